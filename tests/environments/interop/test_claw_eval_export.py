"""Claw-Eval export: the task directories, the generic mock service over loopback HTTP, the
generated grader.py scoring the reference solution's replay, and Claw-Eval's own validator
(when a checkout is at hand)."""

import base64
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from apps.environments.interop.claw_eval import PORT, export_files, task_id_for
from coworkenv_engine.policies import NullPolicy, OraclePolicy
from coworkenv_engine.runner import run_task
from coworkenv_engine.simulator import Episode
from coworkenv_engine.spec import canonical_dump, load_spec
from tests.environments.interop.support import (
    MockService,
    claw_eval_checkout,
    free_port,
    grade,
    next_user_message,
    receipts_document,
    reference_responder,
    replay_reference,
    tool_paths,
    write_tree,
)
from tests.llm_server import LoopbackLLMServer, Reply

ROOT = Path(__file__).resolve().parents[3]
SAMPLES = sorted((ROOT / "samples").glob("*.json"))
CASES = [
    (path.stem, task["key"]) for path in SAMPLES for task in json.loads(path.read_text())["tasks"]
]


# A generated receipts environment: its view tool shows each receipt's image.
RECEIPTS = "receipts"


def _document(stem: str) -> dict:
    if stem == RECEIPTS:
        return receipts_document()[0]
    return canonical_dump(json.loads((ROOT / "samples" / f"{stem}.json").read_text()))


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Every sample exported into one Claw-Eval-shaped tree."""
    root = tmp_path_factory.mktemp("claw-eval-export")
    for path in SAMPLES:
        write_tree(export_files(_document(path.stem)), root)
    return root


def test_layout_and_task_yaml():
    document = _document("support-desk")
    files = export_files(document)
    task = document["tasks"][0]
    task_id = task_id_for(document, task["key"])
    base = f"tasks/{task_id}"
    assert task_id == "Acme_Support_helpdesk_with_CRM_and_knowledge_base__answer_refund_ticket"
    for name in ("task.yaml", "grader.py", "coworkenv_task.json"):
        assert f"{base}/{name}" in files
    for name in ("server.py", "coworkenv_runtime.py", "coworkenv_grading.py", "requirements.txt"):
        assert f"mock_services/coworkenv/{name}" in files
    assert "mock_services/coworkenv/coworkenv_engine/checks.py" in files
    assert "mock_services/coworkenv/coworkenv_engine/schema/environment.v1.json" in files

    data = yaml.safe_load(files[f"{base}/task.yaml"])
    assert data["task_id"] == task_id
    assert data["prompt"]["text"].endswith("\n\nPlease handle ticket t-101.")
    assert data["prompt"]["text"].startswith(task["system"])
    assert [t["name"] for t in data["tools"]] == [t["name"] for t in document["tools"]]
    assert [t["input_schema"] for t in data["tools"]] == [
        t["parameters"] for t in document["tools"]
    ]
    assert data["tool_endpoints"][0] == {
        "tool_name": "list_tickets",
        "url": f"http://localhost:{PORT}/tickets/list_tickets",
        "method": "POST",
    }
    [service] = data["services"]
    assert service == {
        "name": "coworkenv",
        "command": f"python mock_services/coworkenv/server.py tasks/{task_id}",
        "port": PORT,
        "health_check": f"http://localhost:{PORT}/coworkenv/health",
        "health_check_method": "GET",
        "ready_timeout": 30,
        "reset_endpoint": f"http://localhost:{PORT}/coworkenv/reset",
        "env": {"COWORKENV_FIXTURES": f"tasks/{task_id}/fixtures"},
    }
    components = data["scoring_components"]
    assert [c["name"] for c in components] == ["public-answer", "pending", "kb-consulted"]
    assert [c["weight"] for c in components] == [0.5, 0.25, 0.25]
    assert data["reference_solution"].splitlines()[0] == (
        '1. (turn 0) get_ticket({"ticket_id": "t-101"})'
    )
    assert data["user_agent"]["enabled"] is False

    # Fixtures: one JSON array per collection, the task's initial state exactly.
    initial = Episode(load_spec(document), task["key"], faults=False).state_snapshot()
    for service_name, collections in initial.items():
        for collection, records in collections.items():
            path = f"{base}/fixtures/{service_name}/{collection}.json"
            assert json.loads(files[path]) == records
    cut = json.loads(files[f"{base}/coworkenv_task.json"])
    assert [t["key"] for t in cut["tasks"]] == [task["key"]]
    assert cut["tasks"][0]["records"] == {}
    assert all(r == [] for cols in cut["services"].values() for r in cols.values())

    grader = files[f"{base}/grader.py"].decode()
    assert "class AnswerRefundTicketGrader(CoworkEnvGrader):" in grader
    assert "#   safety        no-collateral (weight 1): " in grader


def test_multi_turn_task_becomes_a_user_agent_script():
    document = _document("support-desk")
    task = next(t for t in document["tasks"] if len(t["turns"]) > 1)
    files = export_files(document)
    data = yaml.safe_load(files[f"tasks/{task_id_for(document, task['key'])}/task.yaml"])
    agent = data["user_agent"]
    assert agent["enabled"] is True
    # One round per later turn and one for the closing [DONE] (the user agent is asked
    # after each answer without a tool call, the last one included).
    assert agent["max_rounds"] == len(task["turns"])
    assert f"1. {task['turns'][1]['message']}" in agent["persona"]
    calls = sum(len(s["calls"]) for s in task["reference_solution"])
    assert data["environment"]["max_turns"] >= calls + len(task["turns"])
    assert "base_url: http://localhost:9200/coworkenv/user/v1" in files["README.md"].decode()


def test_scripted_user_advances_once_per_answered_turn(exported):
    """The mock service as Claw-Eval's user agent: a request after the agent's answer starts
    the next turn (updates applied, loud ones announced); the same request retried gets the
    same message without a second advance; after the last turn, ``[DONE]``."""
    document = _document("support-desk")
    task = next(t for t in document["tasks"] if len(t["turns"]) > 1)
    [update] = task["turns"][1]["updates"]
    task_dir = exported / "tasks" / task_id_for(document, task["key"])
    prompt = {"role": "user", "content": task["turns"][0]["message"]}
    answered = [prompt, {"role": "assistant", "content": "Closed."}]
    with MockService(exported, task_dir, {"COWORKENV_FAULTS": "0"}) as service:
        before = service.audit()
        assert before["turn"] == 0
        text = next_user_message(service, answered)
        assert text.startswith("[notice] ") and text.endswith("\n\n" + task["turns"][1]["message"])
        assert next_user_message(service, answered) == text  # a retry: no second advance
        after = service.audit()
        assert after["turn"] == 1
        assert [(e["turn"], e["op"], e["ok"]) for e in after["exogenous_log"]] == [
            (1, update["op"], True)
        ]
        records = after["state"][update["service"]][update["collection"]]
        assert len(records) == len(before["state"][update["service"]][update["collection"]]) + 1
        assert after["turn_states"]["0"] == before["state"]
        later = [*answered, {"role": "user", "content": f"[user_agent]\n{text}"},
                 {"role": "assistant", "content": "Updated."}]  # fmt: skip
        assert next_user_message(service, later) == "[DONE]"
        assert service.audit()["turn"] == 1
        # Another client's format (no Claw-Eval transcript): every request advances.
        assert service.request("POST", "/coworkenv/reset")[0] == 200
        status, body = service.request(
            "POST", "/coworkenv/user/v1/chat/completions", {"messages": []}
        )
        assert status == 200
        assert body["object"] == "chat.completion"
        assert body["choices"][0]["message"]["content"] == text
        assert service.audit()["turn"] == 1


@pytest.mark.parametrize(("stem", "key"), CASES)
def test_reference_replay_over_http_scores_at_least_075(exported, tmp_path, stem, key):
    document = _document(stem)
    task_dir = exported / "tasks" / task_id_for(document, key)
    with MockService(exported, task_dir) as service:
        messages, statuses = replay_reference(service)
        audit = service.audit()
    result = grade(task_dir, messages, audit, tmp_path)
    # The same episode graded by the engine in-process: the export grades alike.
    expected = run_task(load_spec(document), key, OraclePolicy(), faults=True).grading
    assert result["score"] >= 0.75
    assert all(s in (200, 429, 500, 504) for s in statuses)
    assert result["completion"] == round(expected.completion, 4)
    assert result["safety"] == expected.safety
    judged = {v.grader_id for v in expected.verdicts if v.status == "skipped"}
    assert {g for g, s in result["verdicts"].items() if s == "skipped"} == judged
    assert all(s == "passed" for g, s in result["verdicts"].items() if g not in judged)


def test_per_turn_checks_see_each_turn(exported, tmp_path):
    """Calls made in the wrong turn fail the turn's checks: the silent change of turn 1 is
    read in turn 0 (before it happened, so ``during_turn: 1`` fails), and the review moved
    before the user asked fails the ``at_turn: 0`` check; the rest still passes."""
    document = _document("acme-ops")
    task = next(t for t in document["tasks"] if t["key"] == "notice-moved-dentist")
    task_dir = exported / "tasks" / task_id_for(document, task["key"])
    paths = tool_paths(task_dir)
    [create], [listing, move, mail] = (s["calls"] for s in task["reference_solution"])

    def run(turn0: list[dict], turn1: list[dict]) -> dict:
        with MockService(exported, task_dir, {"COWORKENV_FAULTS": "0"}) as service:
            messages = [{"role": "user", "content": task["turns"][0]["message"]}]
            for call in turn0:
                assert service.request("POST", paths[call["tool"]], call["arguments"])[0] == 200
            messages.append({"role": "assistant", "content": "Booked."})
            text = next_user_message(service, messages)
            messages.append({"role": "user", "content": f"[user_agent]\n{text}"})
            for call in turn1:
                assert service.request("POST", paths[call["tool"]], call["arguments"])[0] == 200
            messages.append(
                {"role": "assistant", "content": task["reference_solution"][1]["reply"]}
            )
            audit = service.audit()
        return grade(task_dir, messages, audit, tmp_path)["verdicts"]

    early_read = run([create, listing], [move, mail])
    assert early_read["re-read"] == "failed"
    assert early_read["booked-first"] == early_read["moved"] == "passed"
    early_move = run([create, move], [listing, mail])
    assert early_move["booked-first"] == "failed"
    assert early_move["re-read"] == early_move["moved"] == "passed"


def test_grader_flags_turns_the_service_never_began(exported, tmp_path):
    """An LLM user agent speaks the later turns without the service knowing: the grader
    says how many turns never reached it (their updates were not applied)."""
    document = _document("acme-ops")
    task = next(t for t in document["tasks"] if t["key"] == "notice-moved-dentist")
    task_dir = exported / "tasks" / task_id_for(document, task["key"])
    messages = [
        {"role": "user", "content": task["turns"][0]["message"]},
        {"role": "assistant", "content": "Booked."},
        {"role": "user", "content": f"[user_agent]\n{task['turns'][1]['message']}"},
        {"role": "assistant", "content": "Nothing clashes."},
    ]
    with MockService(exported, task_dir, {"COWORKENV_FAULTS": "0"}) as service:
        audit = service.audit()
    assert grade(task_dir, messages, audit, tmp_path)["unapplied_turns"] == 1
    with MockService(exported, task_dir, {"COWORKENV_FAULTS": "0"}) as service:
        next_user_message(service, messages[:2])
        audit = service.audit()
    assert grade(task_dir, messages, audit, tmp_path)["unapplied_turns"] == 0


def test_doing_nothing_grades_like_the_engine(exported, tmp_path):
    document = _document("support-desk")
    key = document["tasks"][0]["key"]
    task_dir = exported / "tasks" / task_id_for(document, key)
    with MockService(exported, task_dir) as service:
        audit = service.audit()
    messages = [{"role": "user", "content": "Please handle ticket t-101."}]
    result = grade(
        task_dir, [*messages, {"role": "assistant", "content": "Done."}], audit, tmp_path
    )
    expected = run_task(load_spec(document), key, NullPolicy(), faults=False).grading
    assert result["completion"] == round(expected.completion, 4) == 0.0
    assert result["score"] < 0.75
    assert result["verdicts"]["public-answer"] == "failed"


def test_mock_service_conventions(exported):
    document = _document("support-desk")
    task_dir = exported / "tasks" / task_id_for(document, document["tasks"][0]["key"])
    fixtures = json.loads((task_dir / "fixtures/tickets/comments.json").read_text())
    with MockService(exported, task_dir, {"COWORKENV_FAULTS": "0"}) as service:
        assert service.request("POST", "/coworkenv/health") == (200, {"status": "ok"})
        status, body = service.request("POST", "/tickets/get_ticket", {"ticket_id": "t-999"})
        assert status == 404
        assert body["error"]["code"] == "not_found"
        status, body = service.request("POST", "/tickets/get_ticket", {})
        assert status == 400
        assert service.request("POST", "/nowhere/tool", {})[0] == 404
        assert service.request("POST", "/tickets/get_ticket", raw=b"{not json")[0] == 400
        arguments = {"ticket_id": "t-101", "body": "Hello", "public": True}
        status, created = service.request("POST", "/tickets/add_comment", arguments)
        assert status == 200
        audit = service.audit()
        assert len(audit["state"]["tickets"]["comments"]) == len(fixtures) + 1
        assert [c["endpoint"] for c in audit["calls"]] == [
            "/tickets/get_ticket",
            "/tickets/get_ticket",
            "/tickets/add_comment",
        ]
        assert audit["calls"][2]["request_body"] == arguments
        assert audit["calls"][2]["response_body"] == created
        assert [e["ok"] for e in audit["audit_log"]] == [False, False, True]
        assert service.request("POST", "/coworkenv/reset") == (200, {"status": "reset"})
        audit = service.audit()
        assert audit["calls"] == []
        assert audit["state"]["tickets"]["comments"] == fixtures


def test_edited_fixtures_are_what_the_service_serves(exported, tmp_path):
    document = _document("support-desk")
    files = export_files(document)
    root = write_tree(files, tmp_path / "tree")
    task_dir = root / "tasks" / task_id_for(document, document["tasks"][0]["key"])
    path = task_dir / "fixtures/tickets/tickets.json"
    tickets = json.loads(path.read_text())
    tickets[0]["subject"] = "Edited in Claw-Eval"
    path.write_text(json.dumps(tickets))
    with MockService(root, task_dir, {"COWORKENV_FAULTS": "0"}) as service:
        status, body = service.request(
            "POST", "/tickets/get_ticket", {"ticket_id": tickets[0]["id"]}
        )
    assert status == 200
    assert body["subject"] == "Edited in Claw-Eval"


def test_claw_eval_validator_passes_the_export(tmp_path):
    checkout = claw_eval_checkout(tmp_path)
    if checkout is None:
        pytest.skip(
            "no Claw-Eval checkout: set CLAW_EVAL_REPO to one (github.com/claw-eval/claw-eval) "
            "to run its scripts/validate_tasks.py on the export; it is not vendored"
        )
    for path in SAMPLES:
        write_tree(export_files(_document(path.stem)), checkout)
    receipts, files = receipts_document()
    write_tree(export_files(receipts, resolve=files.get), checkout)
    done = subprocess.run(
        [sys.executable, "scripts/validate_tasks.py", "--all"],
        cwd=checkout,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    total = len(CASES) + len(receipts["tasks"])
    assert f"Total: {total} | Passed: {total} | Failed: 0" in done.stdout


def _run_harness(
    checkout: Path, task_id: str, config: Path, port: int, trace_dir: Path, *, judge: bool = False
):
    """``claw-eval run`` of ``task_id`` in ``checkout`` (its judge off unless ``judge``)."""
    return subprocess.run(
        [
            sys.executable, "-m", "claw_eval.cli", "run",
            "--task", f"tasks/{task_id}",
            "--config", str(config),
            *([] if judge else ["--no-judge"]),
            "--trace-dir", str(trace_dir),
            "--port-offset", str(port - PORT),
        ],
        cwd=checkout,
        env={**os.environ, "PYTHONPATH": str(checkout / "src")},
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip


@pytest.mark.parametrize(("stem", "key"), [*CASES, (RECEIPTS, "file-receipt-1")])
def test_claw_eval_harness_scores_the_reference_replay(tmp_path, stem, key):
    """Claw-Eval's own ``claw-eval run`` (its agent loop, user agent, ServiceManager,
    dispatcher, trace and grader loading) against the export, with a scripted
    OpenAI-compatible model on loopback replaying the reference solution. Multi-turn tasks
    run with the mock service as the harness's user agent (``user_agent_model.base_url``):
    it speaks the later turns and applies their exogenous updates as each turn begins. The
    receipts task's view tool answers carry the image from fixtures/media to the model."""
    checkout = claw_eval_checkout(tmp_path)
    if checkout is None:
        pytest.skip(
            "no Claw-Eval checkout: set CLAW_EVAL_REPO to one (github.com/claw-eval/claw-eval) "
            "to run its harness on the export; it is not vendored"
        )
    document = _document(stem)
    task = next(t for t in document["tasks"] if t["key"] == key)
    files = receipts_document()[1] if stem == RECEIPTS else {}
    write_tree(export_files(document, resolve=files.get), checkout)
    task_id = task_id_for(document, key)
    port = free_port()
    with LoopbackLLMServer(responder=reference_responder(checkout / "tasks" / task_id)) as llm:
        config = checkout / "config.yaml"
        config.write_text(
            f"model:\n  api_key: test\n  base_url: {llm.base_url}\n  model_id: scripted\n"
            "judge:\n  enabled: false\n"
            f"user_agent_model:\n  api_key: unused\n"
            f"  base_url: http://localhost:{port}/coworkenv/user/v1\n"
            "  model_id: coworkenv-script\n"
        )
        done = _run_harness(checkout, task_id, config, port, tmp_path / "traces")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [trace] = (tmp_path / "traces").rglob("*.jsonl")
    # The harness prints its grading (local runs do not append it to the trace).
    score = re.search(r"task_score:\s+([0-9.]+)", done.stdout)
    assert score is not None, done.stdout[-3000:] + done.stderr[-3000:]
    assert float(score.group(1)) >= 0.75
    if stem == RECEIPTS:  # no faults, nothing to recover from: every check and 1.00
        assert float(score.group(1)) == 1.0
    assert re.search(r"passed:\s+True", done.stdout)
    # Every completion check passed, the per-turn ones (at_turn, during_turn) included.
    assert float(re.search(r"completion:\s+([0-9.]+)", done.stdout).group(1)) == 1.0
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    [audit] = [e for e in events if e["type"] == "audit_snapshot"]
    assert audit["service_name"] == "coworkenv"
    succeeded = [
        e["tool_name"]
        for e in events
        if e["type"] == "tool_dispatch" and e["response_status"] < 400
    ]
    assert succeeded == [c["tool"] for s in task["reference_solution"] for c in s["calls"]]
    # The user agent's messages are the later turns as the agent sees them (loud updates'
    # notices first), each turn's updates applied when it began, its calls in that turn.
    episode = Episode(load_spec(document), key, faults=False)
    episode.advance_turn()
    expected = []
    while (turn := episode.advance_turn()) is not None:
        expected.append(f"[user_agent]\n{turn.text}")
    spoken = [
        e["message"]["content"][0]["text"]
        for e in events
        if e["type"] == "message"
        and e["message"]["role"] == "user"
        and e["message"]["content"][0].get("text", "").startswith("[user_agent]")
    ]
    assert spoken == expected
    data = audit["audit_data"]
    assert data["turn"] == len(task["turns"]) - 1
    updates = [u for t in task["turns"] for u in t["updates"]]
    assert [(e["turn"], e["ok"]) for e in data["exogenous_log"]] == [
        (n, True) for n, t in enumerate(task["turns"]) for _ in t["updates"]
    ]
    assert len(updates) == len(data["exogenous_log"])
    calls_by_turn = [e["turn"] for e in data["audit_log"] if e["ok"]]
    assert calls_by_turn == [s["turn"] for s in task["reference_solution"] for _ in s["calls"]]
    end = next(e for e in events if e["type"] == "trace_end")
    assert end["user_agent_rounds"] == len(task["turns"]) - 1
    assert end["user_agent_done"] is (len(task["turns"]) > 1)
    _assert_views_carried_images(events, files, llm.chat_requests())


def _assert_views_carried_images(events: list[dict], files: dict[str, bytes], requests) -> None:
    """Each view answer in the trace holds its record's image (base64 of the stored bytes,
    its media type), and the model's next request carries it in the tool result."""
    views = [
        e for e in events if e["type"] == "tool_dispatch" and "frames" in (e["response_body"] or {})
    ]
    assert bool(views) is bool(files)
    sent = "".join(json.dumps(r.messages) for r in requests)
    for view in views:
        body = view["response_body"]
        [frame] = body["frames"]
        assert frame["mime_type"] == "image/png"
        assert base64.b64decode(frame["image_b64"]) == files[body["record"]["image"][7:]]
        assert frame["image_b64"] in sent


def test_claw_eval_harness_judge_scores_a_judge_check(tmp_path):
    """A judge check becomes a call of the harness's own LLM judge (``judge.evaluate``) with
    the check's rubric; the scripted loopback model is agent and judge here."""
    checkout = claw_eval_checkout(tmp_path)
    if checkout is None:
        pytest.skip("no Claw-Eval checkout: set CLAW_EVAL_REPO to one; it is not vendored")
    spec = json.loads((ROOT / "samples" / "acme-ops.json").read_text())
    spec["tasks"] = spec["tasks"][:1]
    rubric = 'The reply must say the earlier slot "clashed" and give the new time.'
    spec["tasks"][0]["graders"].append(
        {"id": "judged", "category": "communication", "weight": 4,
         "check": {"kind": "judge", "rubric": rubric, "threshold": 0.75}}
    )  # fmt: skip
    document = canonical_dump(spec)
    write_tree(export_files(document), checkout)
    task_id = task_id_for(document, document["tasks"][0]["key"])
    agent = reference_responder(checkout / "tasks" / task_id)
    judged = []

    def respond(request):
        system = request.messages[0]["content"] if request.messages else ""
        if "evaluation judge" in system:
            judged.append(request.messages[-1]["content"])
            return Reply.json({"score": 0.2, "reasoning": "No clash mentioned."})
        return agent(request)

    port = free_port()
    with LoopbackLLMServer(responder=respond) as llm:
        config = checkout / "config.yaml"
        config.write_text(
            f"model:\n  api_key: test\n  base_url: {llm.base_url}\n  model_id: scripted\n"
            f"judge:\n  api_key: test\n  base_url: {llm.base_url}\n  model_id: judge\n"
            "  enabled: true\n"
        )
        done = _run_harness(checkout, task_id, config, port, tmp_path / "traces", judge=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [asked] = judged
    assert asked.endswith(f"## Rubric\n{rubric}")
    assert "## Actions Taken\n" in asked
    # The judge's 0.2 fails the check (weight 4 of 9 completion weight): completion 5/9.
    completion = re.search(r"completion:\s+([0-9.]+)", done.stdout)
    assert completion is not None
    assert float(completion.group(1)) == round(5 / 9, 2)


def test_generated_python_survives_awkward_text():
    """Titles and descriptions with quotes, backslashes and newlines still give valid Python
    (grader.py here, task.py in the ClawMark export)."""
    from apps.environments.interop import clawmark

    document = _document("support-desk")
    document["name"] = 'Odd """name"""\\ with\nlines"'
    task = document["tasks"][0]
    task["title"] = 'Title ending in a quote "'
    task["graders"][0]["description"] = 'Multi\nline """ description \\ ending "'
    sources = {p: c for p, c in export_files(document).items() if p.endswith("grader.py")}
    sources.update(
        {p: c for p, c in clawmark.export_files(document).items() if p.endswith("task.py")}
    )
    assert len(sources) == 2 * len(document["tasks"])
    for path, content in sources.items():
        compile(content, path, "exec")
