"""ClawMark export: the generated task.py imports in a subprocess, its stages replay our turns
(loud updates announced, silent ones not), and its checkers — state, reply (response),
side-effect checks and their combinations — judge the oracle's and a do-nothing run's stage
snapshots and replies as the engine grades those runs; the rest are documented skips."""

import copy
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from apps.environments.interop.clawmark import SKIP_REASONS, domain_of, export_files
from coworkenv_engine.checks import leaf_kinds
from coworkenv_engine.policies import NullPolicy, OraclePolicy
from coworkenv_engine.runner import run_task
from coworkenv_engine.scoring import replies_by_turn
from coworkenv_engine.simulator import Episode
from coworkenv_engine.spec import canonical_dump, load_spec
from tests.environments.interop.support import drive_clawmark, write_tree

ROOT = Path(__file__).resolve().parents[3]
SAMPLES = sorted((ROOT / "samples").glob("*.json"))
CASES = [
    (path.stem, number, task["key"])
    for path in SAMPLES
    for number, task in enumerate(json.loads(path.read_text())["tasks"], start=1)
]
MULTI_OR_REPLY = [
    (stem, number, key)
    for stem, number, key in CASES
    if any(
        "response" in set(leaf_kinds(g["check"]))
        for t in json.loads((ROOT / "samples" / f"{stem}.json").read_text())["tasks"]
        if t["key"] == key
        for g in t["graders"]
    )
]
# ClawMark is not vendored: its loader runs from the checkout named by CLAWMARK_REPO.
CLAWMARK_REPO = os.environ.get("CLAWMARK_REPO", "")


def _document(stem: str) -> dict:
    return canonical_dump(json.loads((ROOT / "samples" / f"{stem}.json").read_text()))


def _run(document: dict, key: str, policy):
    """A run of ``policy``: the state at the end of every turn, the last reply of every turn
    (what the agent writes to outputs/replies/stage<K>.md), and the engine's grading."""
    result = run_task(load_spec(document), key, policy, faults=False)
    task = next(t for t in document["tasks"] if t["key"] == key)
    states = {**result.turn_snapshots, len(task["turns"]) - 1: result.final_state}
    replies = dict(replies_by_turn(result.transcript))
    return states, replies, result.grading


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("clawmark-export")
    for path in SAMPLES:
        write_tree(export_files(_document(path.stem)), root)
    return root


def _exported(task: dict) -> list[dict]:
    kinds = {"state", "response", "side_effects"}
    return [g for g in task["graders"] if set(leaf_kinds(g["check"])) <= kinds]


@pytest.mark.parametrize(("stem", "number", "key"), CASES)
@pytest.mark.parametrize("policy", [OraclePolicy(), NullPolicy()], ids=["oracle", "nothing"])
def test_checkers_judge_runs_as_the_engine_does(exported, tmp_path, stem, number, key, policy):
    """Every exportable check is a checker in its stage (``at_turn``) or ``final``; on the
    oracle's run all pass, on a do-nothing run every completion checker fails, and in both
    each checker agrees with the engine's verdict on the same run."""
    document = _document(stem)
    task = next(t for t in document["tasks"] if t["key"] == key)
    task_py = exported / "tasks" / domain_of(document) / f"task{number}" / "task.py"
    states, replies, grading = _run(document, key, policy)
    out = drive_clawmark(task_py, states, tmp_path, replies)
    graders = _exported(task)
    assert list(out["checks"]) == [
        g["id"]
        for g in sorted(
            graders, key=lambda g: len(task["turns"]) if g["at_turn"] is None else g["at_turn"]
        )
    ]
    assert out["checks"] == {g["id"]: grading.verdict(g["id"]).passed for g in graders}
    if isinstance(policy, OraclePolicy):
        assert all(out["checks"].values()), out["checks"]
    else:
        done = [g["id"] for g in graders if g["category"] in ("completion", "communication")]
        assert done and not any(out["checks"][g] for g in done), out["checks"]
    # What cannot be a checker is listed, with its reason, not dropped silently.
    skipped = out["metadata"]["coworkenv"]["skipped"]
    assert [s["id"] for s in skipped] == [g["id"] for g in task["graders"] if g not in graders]
    for entry in skipped:
        assert entry["kinds"] and set(entry["kinds"]) - {"state", "response", "side_effects"}
        assert all(SKIP_REASONS[k] in entry["reason"] for k in entry["kinds"] if k in SKIP_REASONS)
    assert out["agents_md"] is True
    # Stage K replays turn K: the loud updates' notices, then the message, at the turn's
    # time, and the output contract's reply file.
    episode = Episode(load_spec(document), key, faults=False)
    expected = []
    while (turn := episode.advance_turn()) is not None:
        expected.append(
            f"{turn.text}\n\n(Write your reply to this message in "
            f"outputs/replies/stage{turn.index}.md.)"
        )
    assert [s["notification"] for s in out["stages"]] == expected
    start = document["clock"]["start"]
    assert [s["time"] for s in out["stages"]] == [t["time"] or start for t in task["turns"]]


def openclaw_session(task: dict, transcript: list[dict]) -> str:
    """An OpenClaw session log (JSONL) of a run: a header, then per turn the notification as
    the user's message (with its reply-file mark, as the exported stages send it), the
    assistant's tool calls (shell commands) and its texts, and the tool results."""
    lines = [{"type": "session", "version": 3, "id": "s-1", "cwd": "/workspace"}]
    turn = -1
    for m in transcript:
        if m["role"] == "user":
            turn += 1
            mark = f"(Write your reply to this message in outputs/replies/stage{turn}.md.)"
            content = [{"type": "text", "text": f"{m['content']}\n\n{mark}"}]
            lines.append({"type": "message", "message": {"role": "user", "content": content}})
        elif m["role"] == "assistant":
            content = [
                {"type": "toolCall", "id": c["id"], "name": "exec",
                 "arguments": {"command": f"coworkenv {c['function']['name']}"}}
                for c in m.get("tool_calls") or []
            ]  # fmt: skip
            if m.get("content"):
                content.append({"type": "text", "text": m["content"]})
            lines.append({"type": "message", "message": {"role": "assistant", "content": content}})
        elif m["role"] == "tool":
            result = [{"type": "text", "text": str(m.get("content"))}]
            lines.append({"type": "message", "message": {"role": "toolResult", "content": result}})
    return "\n".join(json.dumps(line) for line in lines) + "\n"


@pytest.mark.parametrize(("stem", "number", "key"), MULTI_OR_REPLY)
def test_replies_from_openclaws_session_log(exported, tmp_path, stem, number, key):
    """Without reply files, the response checkers read the agent's messages per stage from
    OpenClaw's session log in the sandbox, and judge the oracle as the engine does."""
    document = _document(stem)
    task = next(t for t in document["tasks"] if t["key"] == key)
    task_py = exported / "tasks" / domain_of(document) / f"task{number}" / "task.py"
    result = run_task(load_spec(document), key, OraclePolicy(), faults=False)
    states = {**result.turn_snapshots, len(task["turns"]) - 1: result.final_state}
    session = openclaw_session(task, result.transcript)
    out = drive_clawmark(task_py, states, tmp_path, {}, session)
    graders = _exported(task)
    assert out["checks"] == {g["id"]: result.grading.verdict(g["id"]).passed for g in graders}
    assert all(out["checks"].values()), out["checks"]
    assert out["sandbox"] and all("agents/main/sessions/" in c for c in out["sandbox"])
    # and with neither reply files nor a session log, the reply checkers fail
    out = drive_clawmark(task_py, states, tmp_path / "none", {}, "")
    replied = [g["id"] for g in graders if "response" in set(leaf_kinds(g["check"]))]
    assert replied and not any(out["checks"][g] for g in replied)


def test_every_kind_is_exported_or_skipped_with_its_reason():
    """Across the samples: response and side-effect checks are checkers now; tool_call and
    judge checks are skipped, each named in METADATA with why."""
    kinds_exported, kinds_skipped = set(), set()
    for path in SAMPLES:
        document = _document(path.stem)
        for task in document["tasks"]:
            for g in task["graders"]:
                kinds = set(leaf_kinds(g["check"]))
                (kinds_exported if g in _exported(task) else kinds_skipped).update(kinds)
    assert {"state", "response", "side_effects"} <= kinds_exported
    assert "tool_call" in kinds_skipped


def test_a_reply_at_the_wrong_stage_or_a_collateral_change_fails(exported, tmp_path):
    """The clarification task: asking first (stage 0 reply, nothing sent) is what the stage-0
    checker wants; the oracle's final state with one extra record changed fails the
    side-effects checker while the other checkers still pass."""
    document = _document("acme-ops")
    number, task = next(
        (n, t) for n, t in enumerate(document["tasks"], 1) if t["key"] == "budget-figure-clarify"
    )
    task_py = exported / "tasks" / domain_of(document) / f"task{number}" / "task.py"
    states, replies, _ = _run(document, task["key"], OraclePolicy())
    # the stage-0 question moved to stage 1: the stage-0 checker fails
    moved = {1: replies[0] + "\n\n" + replies[1]}
    out = drive_clawmark(task_py, states, tmp_path / "a", moved)
    assert out["checks"]["asked-first"] is False
    assert out["checks"]["figure-sent"] is True
    # a collateral write in the last stage
    final = json.loads(json.dumps(states[1]))
    service, collection = next(
        (s, c) for s, cols in final.items() for c, rs in cols.items() if rs and s != "email"
    )
    final[service][collection][0] = {**final[service][collection][0], "touched": True}
    out = drive_clawmark(task_py, {**states, 1: final}, tmp_path / "b", replies)
    assert out["checks"]["no-collateral"] is False
    assert out["checks"]["figure-sent"] is True


def test_silent_updates_are_applied_but_not_announced(exported, tmp_path):
    document = _document("support-desk")
    document["tasks"][2]["turns"][1]["updates"][0]["silent"] = True
    files = export_files(document)
    root = write_tree(files, tmp_path / "silent")
    task_py = root / "tasks" / domain_of(document) / "task3" / "task.py"
    out = drive_clawmark(task_py, {}, tmp_path)
    assert out["stages"][1]["notification"] == (
        document["tasks"][2]["turns"][1]["message"]
        + "\n\n(Write your reply to this message in outputs/replies/stage1.md.)"
    )
    update = document["tasks"][2]["turns"][1]["updates"][0]
    written = json.loads(
        (
            tmp_path / "workspace/coworkenv" / update["service"] / f"{update['collection']}.json"
        ).read_text()
    )
    assert written[-1] == {**update["values"], "id": written[-1]["id"]}


def test_task_py_shape(exported):
    document = _document("support-desk")
    folder = "customer_support_acme_support_helpdesk_with_crm_and_knowledge_base"
    assert domain_of(document) == folder
    source = (exported / f"tasks/{folder}/task3/task.py").read_text()
    assert source.startswith('"""Close a confirmed ticket, then act on a loud follow-up: exported')
    assert "async def stage0(ctx):" in source
    assert "async def stage1(ctx):" in source
    assert "async def stage2(ctx):" not in source
    assert "RUBRIC = {" in source
    assert "COWORKENV = TaskData(SERVICES, INITIAL_STATE, TURNS, REFERENCE_CHANGES)" in source
    files = export_files(document)
    assert f"tasks/{folder}/_coworkenv/coworkenv_clawmark.py" in files
    assert f"tasks/{folder}/_coworkenv/coworkenv_engine/checks.py" in files


def test_two_environments_of_one_domain_share_no_task_in_a_checkout(tmp_path):
    first = _document("support-desk")
    second = {**copy.deepcopy(first), "name": "Globex Support"}
    files = {**export_files(first)}
    clashes = set(files) & {p for p in export_files(second) if "/task" in p}
    assert not clashes
    ids = set()
    for document in (first, second):
        for path, content in export_files(document).items():
            if path.endswith("/task.py"):
                ids.add(re.search(r"""['"]id['"]: ['"](\w+)['"]""", content.decode()).group(1))
    assert len(ids) == 2 * len(first["tasks"])


def test_clawmark_loader_accepts_the_export(exported, tmp_path):
    """ClawMark's own ``load_task_py`` (its METADATA, PROMPT, stage and RUBRIC checks)."""
    if not CLAWMARK_REPO or not (Path(CLAWMARK_REPO) / "src").is_dir():
        pytest.skip("no ClawMark checkout: set CLAWMARK_REPO to one; it is not vendored")
    shutil.copytree(Path(CLAWMARK_REPO) / "src", tmp_path / "src")
    script = (
        "import json, sys\nfrom pathlib import Path\n"
        "from clawmark.task_loader import load_task_py\n"
        "out = []\n"
        "for d in sorted(Path(sys.argv[1]).glob('tasks/*/task*')):\n"
        "    t = load_task_py(d)\n"
        "    out.append([t.id, t.environments, len(t.stage_fns), sorted(t.rubric)])\n"
        "print(json.dumps(out))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(exported)],
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path / "src"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    loaded = json.loads(done.stdout)
    assert len(loaded) == len(CASES)
    by_id = {row[0]: row for row in loaded}
    assert by_id["customer_support_task3"][1:] == [
        ["filesystem", "email"],
        2,
        ["final", "stage0", "stage1"],
    ]


def test_email_and_calendar_are_seeded_into_clawmark_services(exported, tmp_path):
    document = _document("acme-ops")
    task_py = exported / "tasks" / domain_of(document) / "task1" / "task.py"
    out = drive_clawmark(task_py, {}, tmp_path)
    inbox = document["services"]["email"]["inbox"]
    senders = [m["from"].split("@")[0].replace(".", "_") for m in inbox]
    assert out["email"] == [
        {"from_user": s, "to": m["to"], "subject": m["subject"], "body": m["body"]}
        for s, m in zip(senders, inbox, strict=True)
    ]
    events = document["services"]["calendar"]["events"]
    assert out["calendar"] == [
        ["coworkenv"],
        [
            ["coworkenv", e["title"], e["start"].replace("Z", "+00:00"),
             e["end"].replace("Z", "+00:00"), e["id"]]
            for e in events
        ],
    ]  # fmt: skip
    written = json.loads((tmp_path / "workspace/coworkenv/calendar/events.json").read_text())
    assert written == events
