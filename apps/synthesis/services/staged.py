"""Staged LLM drafting for long tasks: outline → one turn at a time → graders.

A single request does not scale to tasks with 5 to 12 turns and dozens of reference calls: the
answer outgrows ``max_tokens`` and one fault sends the whole document back for repair. A job
whose tasks have ``STAGED_FROM_TURNS`` or more turns is drafted in steps, each checked and
repaired on its own before the next is built on it:

1. ``outline`` — the environment (scenario, services and records, tools, each task's key,
   prompt, persona…) with, per task, an outline of its turns (time + what the turn asks and
   leaves behind) instead of turns, reference solution and graders;
2. ``turn:<task>:<k>`` — turn k of a task: message, time, exogenous updates, the reference
   calls and reply of that turn;
3. ``graders:<task>`` — the task's graders (and scoring);
4. ``final`` — the whole document, validated as any draft (dynamic checks included).

The working document is a complete environment at every step (placeholders stand for what
is not written yet; ``metadata.staged`` of each task holds its outline and progress), so each
step is validated statically and only the problems whose JSON pointer falls in what that step
wrote are sent back to it. Problems of the final validation go to the step that owns their
pointer: a fault in turn 2 is repaired by a turn-2 request, never by redrafting the outline.
Every answer and every final validation is a stored ``SynthesisAttempt`` (``report.step``
names the step), so a worker that dies resumes at the step it was on.
"""

from __future__ import annotations

import copy
import json
import time
from dataclasses import dataclass

from django.conf import settings

from apps.environments.attachments import attachment_bytes
from apps.llm.client import llm_chat, parse_json_answer
from apps.llm.exceptions import LLMError
from apps.synthesis.models import Generator, SynthesisAttempt, SynthesisJob, SynthesisSlot
from apps.synthesis.services.drafting import Answer, _avoid_names, capability_context
from apps.synthesis.services.prompts import _render, render_draft, render_system
from coworkenv_engine.validation import validate_spec

STAGED_FROM_TURNS = 5
OUTLINE = "outline"
FINAL = "final"
MAX_DOCUMENT_CHARS_IN_PROMPT = 120_000
PLACEHOLDER_GRADER = {
    "id": "staged-placeholder",
    "category": "completion",
    "weight": 1,
    "check": {"kind": "state", "query": "`true`", "op": "==", "value": True},
}
OBJECT_SCHEMA = {"type": "object"}


# the turns per task a horizon asks of an LLM draft (the template generator's own mixes are in
# generators/long_horizon.py); a job's own range counts when it asks for more
HORIZON_TURNS = {"medium": (3, 6), "long": (5, 12)}


def staged_turns(synthesis: SynthesisJob) -> tuple[int, int]:
    low, high = HORIZON_TURNS.get(synthesis.horizon, (1, 1))
    return max(low, synthesis.turns_min), max(high, synthesis.turns_max)


def drafts_in_stages(synthesis: SynthesisJob) -> bool:
    """LLM jobs with long tasks: 5+ turns asked for, or a medium or long horizon."""
    return synthesis.generator == Generator.LLM and (
        synthesis.turns_max >= STAGED_FROM_TURNS or synthesis.horizon in HORIZON_TURNS
    )


def turn_step(task: int, turn: int) -> str:
    return f"turn:{task}:{turn}"


def graders_step(task: int) -> str:
    return f"graders:{task}"


def _parts(pointer: str) -> list[str]:
    return [p for p in (pointer or "").split("/")[1:]]


def owner_of(pointer: str, document: dict) -> str:
    """The step that wrote what ``pointer`` points at."""
    parts = _parts(pointer)
    if not parts or parts[0] != "tasks" or len(parts) < 2 or not parts[1].isdigit():
        return OUTLINE if parts and parts[0] != "tasks" else graders_step(0)
    task = int(parts[1])
    if len(parts) == 2:
        return graders_step(task)
    field = parts[2]
    if field == "turns" and len(parts) > 3 and parts[3].isdigit():
        return turn_step(task, int(parts[3]))
    if field == "reference_solution" and len(parts) > 3 and parts[3].isdigit():
        steps = _task(document, task).get("reference_solution") or []
        index = int(parts[3])
        if index < len(steps) and isinstance(steps[index], dict):
            return turn_step(task, int(steps[index].get("turn", 0)))
        return graders_step(task)
    if field in ("graders", "scoring", "turns", "reference_solution"):
        return graders_step(task)
    return OUTLINE


def _task(document: dict, index: int) -> dict:
    tasks = document.get("tasks") or []
    return tasks[index] if 0 <= index < len(tasks) and isinstance(tasks[index], dict) else {}


def _staged(task: dict) -> dict:
    return (task.get("metadata") or {}).get("staged") or {}


def _errors_of(report: dict, step: str, document: dict) -> list[dict]:
    return [
        p
        for p in report.get("problems", [])
        if p.get("severity") == "error" and owner_of(p.get("pointer", ""), document) == step
    ]


# ----------------------------------------------------------------------------- applying


class StepRefused(ValueError):
    """An answer that has the wrong shape for its step (a problem for the repair round)."""

    def __init__(self, pointer: str, message: str):
        super().__init__(message)
        self.problem = {
            "code": "staged_answer_shape",
            "severity": "error",
            "pointer": pointer,
            "message": message,
            "hint": "Answer with one JSON object of the shape the stage asks for.",
        }


def apply_outline(answer: dict) -> dict:
    document = copy.deepcopy(answer)
    tasks = document.get("tasks")
    if not isinstance(tasks, list) or not tasks:
        raise StepRefused("/tasks", "The outline has no tasks.")
    for index, task in enumerate(tasks):
        if not isinstance(task, dict):
            raise StepRefused(f"/tasks/{index}", "A task must be an object.")
        outline = task.pop("outline", None)
        if (
            not isinstance(outline, list)
            or not outline
            or not all(isinstance(e, dict) and isinstance(e.get("summary"), str) for e in outline)
        ):
            raise StepRefused(
                f"/tasks/{index}/outline",
                "Each task needs an `outline`: a list of {time, summary} entries, one per turn.",
            )
        task["turns"] = [_placeholder_turn(entry) for entry in outline]
        task["reference_solution"] = []
        task["graders"] = [dict(PLACEHOLDER_GRADER)]
        metadata = task.setdefault("metadata", {})
        if not isinstance(metadata, dict):
            raise StepRefused(f"/tasks/{index}/metadata", "A task's metadata must be an object.")
        metadata["staged"] = {"outline": outline, "expanded": 0, "graded": False}
    return document


def _placeholder_turn(entry: dict) -> dict:
    turn = {"message": entry["summary"].strip() or "(to be written)"}
    if isinstance(entry.get("time"), str):
        turn["time"] = entry["time"]
    return turn


def apply_turn(document: dict, task_index: int, turn: int, answer: dict) -> dict:
    pointer = f"/tasks/{task_index}/turns/{turn}"
    if not isinstance(answer.get("message"), str) or not isinstance(answer.get("calls", []), list):
        raise StepRefused(pointer, "A turn needs a `message` (text) and `calls` (a list).")
    document = copy.deepcopy(document)
    task = document["tasks"][task_index]
    written = {"message": answer["message"]}
    for key in ("time", "updates"):
        if answer.get(key) is not None:
            written[key] = answer[key]
    task["turns"][turn] = written
    steps = [s for s in task.get("reference_solution") or [] if s.get("turn") != turn]
    if answer.get("calls") or answer.get("reply") is not None:
        step = {"turn": turn, "calls": answer.get("calls") or []}
        if answer.get("reply") is not None:
            step["reply"] = answer["reply"]
        steps.append(step)
    task["reference_solution"] = sorted(steps, key=lambda s: s.get("turn", 0))
    staged = task["metadata"]["staged"]
    staged["expanded"] = max(staged.get("expanded", 0), turn + 1)
    return document


def apply_graders(document: dict, task_index: int, answer: dict) -> dict:
    graders = answer.get("graders")
    if not isinstance(graders, list) or not graders:
        raise StepRefused(f"/tasks/{task_index}/graders", "Answer with a non-empty `graders` list.")
    document = copy.deepcopy(document)
    task = document["tasks"][task_index]
    task["graders"] = graders
    if isinstance(answer.get("scoring"), dict):
        task["scoring"] = answer["scoring"]
    task["metadata"]["staged"]["graded"] = True
    return document


def finished_document(document: dict) -> dict:
    """The working document without the staging marks."""
    document = copy.deepcopy(document)
    for task in document.get("tasks") or []:
        metadata = task.get("metadata")
        if isinstance(metadata, dict):
            metadata.pop("staged", None)
            if not metadata:
                task.pop("metadata")
    return document


def next_step(document: dict) -> str:
    """The first turn not yet written, then the first task without graders, then final."""
    tasks = document.get("tasks") or []
    for index, task in enumerate(tasks):
        staged = _staged(task)
        if staged and staged.get("expanded", 0) < len(staged.get("outline") or []):
            return turn_step(index, staged["expanded"])
    for index, task in enumerate(tasks):
        staged = _staged(task)
        if staged and not staged.get("graded"):
            return graders_step(index)
    return FINAL


# ----------------------------------------------------------------------------- requests


def _document_text(document: dict) -> str:
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False)[
        :MAX_DOCUMENT_CHARS_IN_PROMPT
    ]


def step_request(synthesis: SynthesisJob, slot: SynthesisSlot, step: str, document: dict | None):
    version = synthesis.prompt_version
    turns = staged_turns(synthesis)
    if step == OUTLINE:
        draft = render_draft(
            version,
            capabilities=capability_context(synthesis),
            services=list(synthesis.services),
            tasks_per_environment=synthesis.tasks_per_environment,
            turns=turns,
            difficulty=synthesis.difficulty,
            domain_hint=synthesis.domain_hint,
            scenario_hint=synthesis.scenario_hint,
            index=slot.index,
            count=synthesis.count,
            seed=slot.seed,
            avoid_names=_avoid_names(synthesis, slot),
        )
        text = (
            draft
            + "\n"
            + _render(
                version,
                "stage_outline.md",
                {
                    "turns_min": turns[0],
                    "turns_max": turns[1],
                },
            )
        )
    elif step.startswith("turn:"):
        _, task_index, turn = step.split(":")
        task = _task(document, int(task_index))
        outline = _staged(task).get("outline") or []
        text = _render(
            version,
            "stage_turn.md",
            {
                "turn": int(turn),
                "turn_human": int(turn) + 1,
                "turn_count": len(outline),
                "task_key": task.get("key", ""),
                "document": _document_text(document),
                "outline": json.dumps(outline[int(turn)], ensure_ascii=False),
            },
        )
    else:
        task = _task(document, int(step.split(":")[1]))
        text = _render(
            version,
            "stage_graders.md",
            {"task_key": task.get("key", ""), "document": _document_text(document)},
        )
    return [
        {"role": "system", "content": render_system(version)},
        {"role": "user", "content": text},
    ]


def current_of(step: str, document: dict) -> dict:
    """What ``step`` wrote, in the shape it was asked for (shown to its repair)."""
    if step.startswith("turn:"):
        _, task_index, turn = step.split(":")
        task = _task(document, int(task_index))
        written = dict(task["turns"][int(turn)])
        reference = next(
            (s for s in task.get("reference_solution") or [] if s.get("turn") == int(turn)), {}
        )
        written["calls"] = reference.get("calls", [])
        if "reply" in reference:
            written["reply"] = reference["reply"]
        return written
    if step.startswith("graders:"):
        task = _task(document, int(step.split(":")[1]))
        return {"graders": task.get("graders", []), "scoring": task.get("scoring")}
    return finished_document(document)


def repair_request(
    synthesis: SynthesisJob,
    slot: SynthesisSlot,
    step: str,
    document: dict | None,
    *,
    problems: list[dict],
    round_: int,
    parse_error: str = "",
    previous_text: str = "",
) -> list[dict]:
    """The step's request again, then what it wrote and what is wrong with it."""
    messages = step_request(synthesis, slot, step, document)
    if previous_text:
        current = previous_text[:MAX_DOCUMENT_CHARS_IN_PROMPT]
    else:
        current = "" if document is None else _document_text(current_of(step, document))
    repair = _render(
        synthesis.prompt_version,
        "stage_repair.md",
        {
            "parse_error": parse_error,
            "problems": problems[:40],
            "round": round_,
            "max_rounds": synthesis.max_repair_rounds,
            "current": current,
        },
    )
    return [*messages, {"role": "user", "content": repair}]


# ----------------------------------------------------------------------------- the loop


@dataclass
class Plan:
    """What to do next, read from the stored attempts."""

    step: str
    document: dict | None  # the working document the step starts from
    repair: bool = False
    problems: list | None = None
    parse_error: str = ""
    repairs_done: int = 0
    previous_text: str = ""  # the answer, when it could not be applied to the document


def plan(attempts: list[SynthesisAttempt], max_repairs: int) -> Plan | None:
    """The next step, or None when the slot is done (valid, or out of repairs)."""
    if not attempts:
        return Plan(OUTLINE, None)
    last = attempts[-1]
    report = last.report or {}
    step = report.get("step", OUTLINE)
    base = report.get("base")  # the document the step started from
    document = last.document
    repairs = sum(1 for a in attempts if (a.report or {}).get("step") == step) - 1
    if step == FINAL:
        if last.valid:
            return None
        errors = [p for p in report.get("problems", []) if p.get("severity") == "error"]
        owners = [owner_of(p.get("pointer", ""), document) for p in errors]
        repairable = [o for o in owners if o != OUTLINE]
        if not repairable or len(owners) != len(repairable):
            return None  # the outline itself is wrong: staging cannot repair it
        target = repairable[0]
        done = sum(
            1
            for a in attempts
            if (a.report or {}).get("step") == target and (a.report or {}).get("repair")
        )
        if done >= max_repairs:
            return None
        return Plan(
            target,
            document,
            repair=True,
            problems=[p for p, o in zip(errors, owners, strict=True) if o == target],
            repairs_done=done,
        )
    if last.valid:
        return Plan(next_step(document), document)
    if repairs >= max_repairs:
        return None
    if document is None or report.get("refused"):
        return Plan(
            step,
            base,
            repair=True,
            parse_error=report.get("parse_error", ""),
            problems=[p for p in report.get("problems", []) if p.get("severity") == "error"],
            repairs_done=repairs,
            previous_text=last.raw_text,
        )
    return Plan(
        step,
        document,
        repair=True,
        problems=[p for p in report.get("problems", []) if p.get("severity") == "error"],
        repairs_done=repairs,
    )


def run_step(synthesis: SynthesisJob, slot: SynthesisSlot, next_: Plan) -> Answer:
    """One LLM request for a step (or its repair); its answer applied to the working document
    and validated statically, with only that step's problems kept. ``Answer.report`` carries
    ``step`` and ``base`` so that a resumed worker knows where it was."""
    if synthesis.endpoint is None:
        raise LLMError(
            "The job's model endpoint was deleted; start a new job with another endpoint."
        )
    base = next_.document
    if next_.repair:
        messages = repair_request(
            synthesis,
            slot,
            next_.step,
            next_.document,
            problems=next_.problems or [],
            round_=next_.repairs_done + 1,
            parse_error=next_.parse_error,
            previous_text=next_.previous_text,
        )
    else:
        messages = step_request(synthesis, slot, next_.step, base)
    result = llm_chat(
        endpoint=synthesis.endpoint,
        messages=messages,
        purpose=f"synthesis.{next_.step.partition(':')[0]}" + (".repair" if next_.repair else ""),
        job=synthesis.job,
        response_schema=OBJECT_SCHEMA,
        schema_name="stage_answer",
        describe_schema=False,
    )
    answer = Answer(
        tokens_in=result.tokens_in,
        tokens_out=result.tokens_out,
        latency_ms=result.latency_ms,
        cost=result.cost,
        call_ids=[result.call_id],
        model=result.model,
    )
    step_base = base
    try:
        parsed = parse_json_answer(result)
        document = _apply(next_.step, step_base, parsed)
    except StepRefused as exc:
        answer.raw_text = (result.content or "")[:200_000]
        answer.report = {
            "valid": False,
            "problems": [exc.problem],
            "tasks": [],
            "step": next_.step,
            "repair": next_.repair,
            "refused": True,
            "base": step_base,
        }
        return answer
    except LLMError as exc:  # no JSON object in the answer
        answer.raw_text = (result.content or "")[:200_000]
        answer.error = exc.message
        answer.report = {
            "valid": False,
            "problems": [],
            "tasks": [],
            "step": next_.step,
            "repair": next_.repair,
            "parse_error": exc.message,
            "base": step_base,
        }
        return answer
    started = time.monotonic()
    report = validate_spec(document, dynamic=False).to_dict()
    answer.validation_ms = round((time.monotonic() - started) * 1000)
    errors = _errors_of(report, next_.step, document)
    answer.document = document
    answer.report = {
        "valid": not errors,
        "problems": errors,
        "tasks": [],
        "step": next_.step,
        "repair": next_.repair,
    }
    return answer


def _apply(step: str, document: dict | None, parsed: dict) -> dict:
    if step == OUTLINE:
        return apply_outline(parsed)
    if step.startswith("turn:"):
        _, task_index, turn = step.split(":")
        return apply_turn(document, int(task_index), int(turn), parsed)
    return apply_graders(document, int(step.split(":")[1]), parsed)


def final_check(document: dict) -> Answer:
    finished = finished_document(document)
    started = time.monotonic()
    report = validate_spec(
        finished, attachments=attachment_bytes, time_budget=settings.VALIDATION_TIME_BUDGET_S
    ).to_dict()
    answer = Answer(document=finished, model="")
    answer.validation_ms = round((time.monotonic() - started) * 1000)
    answer.report = {**report, "step": FINAL}
    # the staging marks go back on for a repair round (next_step needs none: all written)
    answer.document = document if not report["valid"] else finished
    return answer
