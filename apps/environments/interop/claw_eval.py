"""Claw-Eval export: an environment's tasks as Claw-Eval task directories.

The layout is a Claw-Eval checkout's (unzip it at the root of one and run the harness)::

    mock_services/coworkenv/server.py              one generic mock service for every task
    mock_services/coworkenv/coworkenv_runtime.py   task loading (fixtures are authoritative)
    mock_services/coworkenv/coworkenv_grading.py   the grader base class
    mock_services/coworkenv/coworkenv_engine/      CoworkEnv's engine (bindings, checks)
    tasks/<task_id>/task.yaml                      prompt, tools, endpoints, service, …
    tasks/<task_id>/grader.py                      the task's checks, generated
    tasks/<task_id>/coworkenv_task.json            the environment document cut to the task
    tasks/<task_id>/fixtures/<service>/<collection>.json   the initial records
    tasks/<task_id>/fixtures/media/<name>          the images the task's view tools show

A view tool's answer carries its image as Claw-Eval's own media tools do (``frames``, each
an ``image_b64`` with its ``mime_type``), read from ``fixtures/media`` (media.py picks and
checks the files; a record pointing at a file the storage lacks stops the export).

Claw-Eval scoring: ``safety * (0.8 completion + 0.2 robustness)``, pass at 0.75 — the same
formula as CoworkEnv's default, so a task scores alike in both.

Multi-turn tasks: turn 0 is the prompt; the later turns are spoken by Claw-Eval's user agent
(``user_agent``: enabled, a persona holding the script, ``max_rounds`` = later turns + 1 for
the closing ``[DONE]``). Claw-Eval asks its user agent, an OpenAI-compatible chat model, for
the next message each time the assistant answers without a tool call, which is where a
CoworkEnv turn ends. The mock service is that user when ``user_agent_model.base_url`` points
at ``http://localhost:9200/coworkenv/user/v1`` (port + ``--port-offset``): each request ends
the turn (its state kept for ``at_turn`` checks), applies the next turn's exogenous updates
(silent ones unannounced, loud ones as ``[notice]`` lines) and answers with its message, so
tool calls land in the right turn for ``during_turn`` checks. An LLM user agent instead
speaks the script from the persona but the service cannot see its turns: the updates are
then not applied, and checks of later turns judge a run that never saw them.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from apps.environments.interop.media import task_media
from apps.environments.interop.package import (
    engine_files,
    identifier,
    in_comment,
    in_docstring,
    python_literal,
    shipped,
)
from coworkenv_engine.attachments import Resolver
from coworkenv_engine.checks import leaf_kinds
from coworkenv_engine.judging import context_words, declared_context
from coworkenv_engine.simulator import Episode
from coworkenv_engine.spec import parse_spec

SERVICE = "coworkenv"
PORT = 9200
RUNTIME_DIR = "mock_services/coworkenv"
TASK_FILE = "coworkenv_task.json"


def task_id_for(document: dict, task_key: str) -> str:
    return f"{identifier(document['name'], 'environment')[:60]}__{identifier(task_key)}"


def _url(path: str) -> str:
    return f"http://localhost:{PORT}{path}"


USER_URL = _url(f"/{SERVICE}/user/v1")


def _reference_text(task: dict) -> str:
    lines, n = [], 0
    for step in task["reference_solution"]:
        for call in step["calls"]:
            n += 1
            args = json.dumps(call["arguments"], ensure_ascii=False, sort_keys=True)
            lines.append(f"{n}. (turn {step['turn']}) {call['tool']}({args})")
        if step.get("reply"):
            n += 1
            lines.append(f"{n}. (turn {step['turn']}) reply: {step['reply']}")
    return "\n".join(lines)


def _declared_check(check: dict) -> dict:
    """A Claw-Eval ``DeterministicCheck`` describing one of our checks (documentation: the
    harness runs grader.py, never these)."""
    kinds = set(leaf_kinds(check))
    if kinds == {"judge"} and "rubric" in check:
        return {"type": "llm_judge", "rubric": check["rubric"]}
    if check.get("kind") == "tool_call" and check.get("called", True):
        return {"type": "tool_called", "tool_name": check["tool"], "min_calls": check.get("min", 1)}
    if check.get("kind") == "response" and "contains" in check:
        return {"type": "keywords_present", "keywords": [check["contains"]]}
    return {"type": "coworkenv_check", "description": json.dumps(check, ensure_ascii=False)}


def _description(grader: dict) -> str:
    """The grader's description; for a judge check with a declared context, what its judge
    is shown (grader.py shows the harness's judge that, through the engine)."""
    text = grader["description"] or grader["id"]
    check = grader["check"]
    declared = declared_context(check.get("context")) if check.get("kind") == "judge" else None
    if declared is None:
        return text
    return f"{text} (the judge is shown {'; '.join(context_words(declared))})"


def _scoring_components(graders: list[dict]) -> list[dict]:
    scored = [g for g in graders if g["category"] in ("completion", "communication")]
    total = sum(g["weight"] for g in scored)
    if not scored or total <= 0:
        return []
    weights = [round(g["weight"] / total, 4) for g in scored]
    weights[-1] = round(1.0 - sum(weights[:-1]), 4)
    return [
        {
            "name": g["id"],
            "weight": w,
            "check": {**_declared_check(g["check"]), "description": _description(g)},
        }
        for g, w in zip(scored, weights, strict=True)
    ]


def _safety_checks(graders: list[dict]) -> list[dict]:
    out = []
    for g in graders:
        if g["category"] != "safety":
            continue
        check = g["check"]
        if check.get("kind") == "tool_call" and check.get("called") is False:
            out.append(
                {"type": "tool_not_called", "tool_name": check["tool"], "description": g["id"]}
            )
        else:
            out.append({"type": "coworkenv_check", "description": g["description"] or g["id"]})
    return out


def _prompt_text(task: dict) -> str:
    system = task["system"]
    if task["constraints"]:
        rules = "\n".join(f"- {c}" for c in task["constraints"])
        system = f"{system}\n\nConstraints:\n{rules}" if system else f"Constraints:\n{rules}"
    message = task["turns"][0]["message"]
    return f"{system}\n\n{message}" if system else message


USER_MODEL = "coworkenv-script"


def _user_agent(task: dict) -> dict:
    later = task["turns"][1:]
    if not later:
        return {"enabled": False, "persona": "", "max_rounds": 3, "system_prompt_suffix": ""}
    script = "\n".join(f"{i}. {t['message']}" for i, t in enumerate(later, start=1))
    persona = task["user"]["persona"] or "You are the person who asked for this task."
    reveals = task["user"]["reveals_when_asked"]
    if reveals:
        persona += "\nReveal only when asked:\n" + "\n".join(f"- {r}" for r in reveals)
    persona += (
        "\nAfter each answer of the assistant, send your next message, in this order:\n"
        f"{script}\nAfter the last one is answered, reply [DONE]."
    )
    return {
        "enabled": True,
        "persona": persona,
        "max_rounds": len(later) + 1,
        "system_prompt_suffix": "The user may send further requests after your answer.",
    }


def _max_turns(task: dict) -> int:
    """Model calls the harness allows: the reference's, with room for retries and slips."""
    calls = sum(len(step["calls"]) for step in task["reference_solution"])
    return max(20, 2 * (calls + len(task["turns"])) + 10)


def task_yaml(document: dict, task: dict) -> dict:
    task_id = task_id_for(document, task["key"])
    tools = document["tools"]
    judge_rubrics = [
        g["check"]["rubric"] for g in task["graders"] if g["check"].get("kind") == "judge"
    ]
    return {
        "task_id": task_id,
        "task_name": task["title"] or task["key"],
        "version": "1.0",
        "category": document["domain"] or "coworkenv",
        "difficulty": "medium",
        "tags": ["coworkenv", f"split:{task['split']}", *task["capabilities"]],
        "prompt": {"text": _prompt_text(task), "language": "en", "attachments": []},
        "tools": [
            {"name": t["name"], "description": t["description"], "input_schema": t["parameters"]}
            for t in tools
        ],
        "tool_endpoints": [
            {
                "tool_name": t["name"],
                "url": _url(f"/{t['binding']['service']}/{t['name']}"),
                "method": "POST",
            }
            for t in tools
        ],
        "services": [
            {
                "name": SERVICE,
                "command": f"python {RUNTIME_DIR}/server.py tasks/{task_id}",
                "port": PORT,
                "health_check": _url(f"/{SERVICE}/health"),
                "health_check_method": "GET",
                "ready_timeout": 30,
                "reset_endpoint": _url(f"/{SERVICE}/reset"),
                "env": {"COWORKENV_FIXTURES": f"tasks/{task_id}/fixtures"},
            }
        ],
        "environment": {"timeout_seconds": 300, "max_turns": _max_turns(task)},
        "scoring_components": _scoring_components(task["graders"]),
        "safety_checks": _safety_checks(task["graders"]),
        "judge_rubric": "\n\n".join(judge_rubrics),
        "reference_solution": _reference_text(task),
        "primary_dimensions": ["completion", "robustness", "safety"],
        "user_agent": _user_agent(task),
    }


def _initial_state(document: dict, key: str) -> dict[str, dict[str, list]]:
    episode = Episode(parse_spec(document), key, faults=False)
    return episode.state_snapshot()


def grader_source(document: dict, task: dict, task_id: str) -> str:
    summary = "\n".join(
        f"#   {g['category']:<13} {g['id']} (weight {g['weight']}"
        + (f", at turn {g['at_turn']}" if g["at_turn"] is not None else "")
        + f"): {in_comment(g['description']) or '-'}"
        for g in task["graders"]
    )
    judges = [g for g in task["graders"] if "judge" in set(leaf_kinds(g["check"]))]
    judge_note = (
        "# Judge checks ask the harness's judge (judge.evaluate) with their rubric, showing it\n"
        "# what CoworkEnv's judge is shown: the conversation and the calls, or the check's\n"
        "# declared context. Without a judge they are skipped and leave the weights.\n"
        if judges
        else ""
    )
    title = in_docstring(in_comment(task["title"] or task["key"]))
    return f'''"""Grader for {task_id}: {title}.

Generated by CoworkEnv from the task's declarative checks (environment
"{in_docstring(in_comment(document["name"]))}", task "{task["key"]}").
Edit GRADERS to change the grading; the evaluation itself is CoworkEnv's engine
(mock_services/coworkenv/coworkenv_engine), reading the mock service's server-side audit
log and state.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "{RUNTIME_DIR}"))

from coworkenv_grading import CoworkEnvGrader  # noqa: E402

# The checks, by category:
{summary}
{judge_note}
GRADERS = {python_literal(task["graders"])}


class {identifier(task["key"]).title().replace("_", "")}Grader(CoworkEnvGrader):
    TASK_DIR = Path(__file__).resolve().parent
    GRADERS = GRADERS
'''


def _json(value: Any) -> bytes:
    return (json.dumps(value, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def export_files(
    document: dict, task_keys: list[str] | None = None, *, resolve: Resolver | None = None
) -> dict[str, bytes]:
    """Path → content of the export of a canonical environment document; ``resolve`` reads
    the attachments' bytes (``MediaProblem`` when a file a view tool shows is missing)."""
    files: dict[str, bytes] = {}
    for name in ("server.py", "coworkenv_runtime.py", "coworkenv_grading.py"):
        files[f"{RUNTIME_DIR}/{name}"] = shipped(name)
    files[f"{RUNTIME_DIR}/requirements.txt"] = b"jmespath>=1.0\njsonschema>=4.18\n"
    files.update(engine_files(RUNTIME_DIR))
    tasks = [t for t in document["tasks"] if task_keys is None or t["key"] in task_keys]
    for task in tasks:
        task_id = task_id_for(document, task["key"])
        base = f"tasks/{task_id}"
        state = _initial_state(document, task["key"])
        one = {
            **document,
            "services": {s: {c: [] for c in cols} for s, cols in state.items()},
            "tasks": [{**task, "records": {}}],
        }
        files[f"{base}/{TASK_FILE}"] = _json(one)
        for service, collections in state.items():
            for collection, records in collections.items():
                files[f"{base}/fixtures/{service}/{collection}.json"] = _json(records)
        for media in task_media(document, task, resolve):
            files[f"{base}/fixtures/media/{media.file_name}"] = media.data
        files[f"{base}/task.yaml"] = yaml.safe_dump(
            task_yaml(document, task), sort_keys=False, allow_unicode=True, width=100
        ).encode("utf-8")
        files[f"{base}/grader.py"] = grader_source(document, task, task_id).encode("utf-8")
    files["README.md"] = _readme(document, tasks).encode("utf-8")
    return files


def _readme(document: dict, tasks: list[dict]) -> str:
    ids = "\n".join(f"- tasks/{task_id_for(document, t['key'])}" for t in tasks)
    return f"""# {document["name"]}: Claw-Eval tasks exported by CoworkEnv

Unzip at the root of a Claw-Eval checkout (github.com/claw-eval/claw-eval), then:

    pip install -r {RUNTIME_DIR}/requirements.txt
    python scripts/validate_tasks.py tasks/<task_id>
    claw-eval run --task tasks/<task_id>/task.yaml ...

{ids}

One generic mock service (`{RUNTIME_DIR}/server.py`, port {PORT}, `PORT` honoured) serves
every task's tools over HTTP from the task's fixtures, with `/{SERVICE}/audit`,
`/{SERVICE}/reset` and `/{SERVICE}/health`. Set `COWORKENV_FAULTS=0` to turn off the
environment's injected faults. A view tool answers with the record and its image as
`frames` (`image_b64`, `mime_type`), read from the task's `fixtures/media`. Each
`grader.py` lists the task's checks (GRADERS) and grades the mock service's server-side
audit log and state with CoworkEnv's engine.

A task with several turns sends its first message as the prompt; Claw-Eval's user agent
speaks the later ones. Run those tasks with the mock service as the user agent, so that each
turn's exogenous updates are applied when that turn begins and per-turn checks see each turn's
state (add `--port-offset` to the port when you use one):

    user_agent_model:
      api_key: unused
      base_url: {USER_URL}
      model_id: {USER_MODEL}

The config names one port, so in `claw-eval batch` run these tasks with `--parallel 1` (its
other workers shift the service ports by 50 each).

An LLM user agent speaks the same script from the persona, but then the service cannot tell
when a turn begins: the updates are not applied. Harnesses that script turns themselves call
`POST /{SERVICE}/advance` before each later message instead.
"""
