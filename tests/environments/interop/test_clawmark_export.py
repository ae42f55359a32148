"""ClawMark export: the generated task.py imports in a subprocess, its stages replay our turns
(loud updates announced, silent ones not), and its checkers pass on the oracle's state and
fail where nothing was done."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from apps.environments.interop.clawmark import domain_of, export_files
from coworkenv_engine.checks import leaf_kinds
from coworkenv_engine.policies import NullPolicy, OraclePolicy
from coworkenv_engine.runner import run_task
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
CLAWMARK_MIRROR = Path("/work/.mirror/evolvent-ai+ClawMark/repo")


def _document(stem: str) -> dict:
    return canonical_dump(json.loads((ROOT / "samples" / f"{stem}.json").read_text()))


def _states(document: dict, key: str, policy) -> dict[int, dict]:
    """The state at the end of every turn of a run of ``policy``."""
    result = run_task(load_spec(document), key, policy, faults=False)
    task = next(t for t in document["tasks"] if t["key"] == key)
    return {**result.turn_snapshots, len(task["turns"]) - 1: result.final_state}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("clawmark-export")
    for path in SAMPLES:
        write_tree(export_files(_document(path.stem)), root)
    return root


@pytest.mark.parametrize(("stem", "number", "key"), CASES)
def test_checkers_pass_on_the_oracle_state(exported, tmp_path, stem, number, key):
    document = _document(stem)
    task = next(t for t in document["tasks"] if t["key"] == key)
    task_py = exported / "tasks" / domain_of(document) / f"task{number}" / "task.py"
    out = drive_clawmark(task_py, _states(document, key, OraclePolicy()), tmp_path)
    exported_ids = [g["id"] for g in task["graders"] if set(leaf_kinds(g["check"])) == {"state"}]
    assert list(out["checks"]) == [
        g["id"]
        for g in sorted(
            (g for g in task["graders"] if g["id"] in exported_ids),
            key=lambda g: len(task["turns"]) if g["at_turn"] is None else g["at_turn"],
        )
    ]
    assert exported_ids, "every sample task has state checks to export"
    assert all(out["checks"].values()), out["checks"]
    assert out["agents_md"] is True
    # Stage K replays turn K: the loud updates' notices, then the message, at the turn's time.
    episode = Episode(load_spec(document), key, faults=False)
    expected = []
    while (turn := episode.advance_turn()) is not None:
        expected.append(turn.text)
    assert [s["notification"] for s in out["stages"]] == expected
    start = document["clock"]["start"]
    assert [s["time"] for s in out["stages"]] == [t["time"] or start for t in task["turns"]]


def test_checkers_fail_when_nothing_was_done(exported, tmp_path):
    document = _document("support-desk")
    key = document["tasks"][0]["key"]
    task_py = exported / "tasks" / domain_of(document) / "task1" / "task.py"
    out = drive_clawmark(task_py, _states(document, key, NullPolicy()), tmp_path)
    assert out["checks"] == {"public-answer": False, "pending": False, "no-false-promise": True}


def test_silent_updates_are_applied_but_not_announced(exported, tmp_path):
    document = _document("support-desk")
    document["tasks"][2]["turns"][1]["updates"][0]["silent"] = True
    files = export_files(document)
    root = write_tree(files, tmp_path / "silent")
    task_py = root / "tasks" / domain_of(document) / "task3" / "task.py"
    out = drive_clawmark(task_py, {}, tmp_path)
    assert out["stages"][1]["notification"] == document["tasks"][2]["turns"][1]["message"]
    update = document["tasks"][2]["turns"][1]["updates"][0]
    written = json.loads(
        (
            tmp_path / "workspace/coworkenv" / update["service"] / f"{update['collection']}.json"
        ).read_text()
    )
    assert written[-1] == {**update["values"], "id": written[-1]["id"]}


def test_task_py_shape(exported):
    document = _document("support-desk")
    source = (exported / "tasks/customer_support/task3/task.py").read_text()
    assert source.startswith('"""Close a confirmed ticket, then act on a loud follow-up: exported')
    assert "async def stage0(ctx):" in source
    assert "async def stage1(ctx):" in source
    assert "async def stage2(ctx):" not in source
    assert "#   no-collateral (side_effects)" in source
    files = export_files(document)
    assert "tasks/customer_support/_coworkenv/coworkenv_clawmark.py" in files
    assert "tasks/customer_support/_coworkenv/coworkenv_engine/checks.py" in files


def test_clawmark_loader_accepts_the_export(exported, tmp_path):
    """ClawMark's own ``load_task_py`` (its METADATA, PROMPT, stage and RUBRIC checks)."""
    if not (CLAWMARK_MIRROR / "HEAD").is_file():
        pytest.skip("no ClawMark checkout on this machine (it is not vendored)")
    archive = subprocess.run(
        ["git", f"--git-dir={CLAWMARK_MIRROR}", "archive", "HEAD", "src"],
        capture_output=True,
        check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(tmp_path)], input=archive, check=True)
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
