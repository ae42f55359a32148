import io
import json
import subprocess
import sys

import pytest

from coworkenv_engine.cli import main

from .helpers import BROKEN, ROOT, SAMPLES, mini_doc


def _run(*argv):
    out = io.StringIO()
    code = main(list(argv), out=out)
    return code, out.getvalue()


@pytest.fixture
def mini_file(tmp_path):
    path = tmp_path / "mini.json"
    path.write_text(json.dumps(mini_doc()))
    return str(path)


def test_validate_valid_file_exits_0(mini_file):
    code, out = _run("validate", mini_file)
    assert code == 0 and "VALID (0 errors, 0 warnings)" in out
    assert "task book: oracle 1.00" in out and "sensitivity 1.00" in out
    assert (
        "    adversaries: reader-paster 0.20, sprayer 0.00, spray-paster 0.00, vague-asker 0.00, "
        "greedy-sprayer 0.00, greedy-paster 0.00, asker-sprayer 0.00, asker-paster 0.00\n" in out
    )


def test_validate_json_report(mini_file):
    code, out = _run("validate", mini_file, "--json")
    report = json.loads(out)
    assert code == 0 and report["valid"] is True
    assert report["tasks"][0]["key"] == "book" and report["tasks"][0]["sensitivity"] == 1.0


def test_validate_invalid_file_exits_1(tmp_path):
    path = next(p for p in BROKEN if p.stem == "update-target-missing")
    spec_file = tmp_path / "broken.json"
    spec_file.write_text(json.dumps(json.loads(path.read_text())["spec"]))
    code, out = _run("validate", str(spec_file), "--json")
    assert code == 1
    assert json.loads(out)["problems"][0]["pointer"] == "/tasks/0/turns/1/updates/0/id"


def test_validate_unreadable_or_not_json_exits_2(tmp_path, capsys):
    assert main(["validate", str(tmp_path / "missing.json")]) == 2
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    assert main(["validate", str(bad)]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["frobnicate"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        main(["play", "x.json"])  # --task is required
    assert exc.value.code == 2


def test_play_prints_transcript_and_grading(mini_file):
    code, out = _run("play", mini_file, "--task", "book", "--policy", "oracle")
    assert code == 0
    assert "[assistant → create_event]" in out and "score 1.000  passed True  strict True" in out
    assert "passed  completion    w=2  booked" in out


def test_play_json_and_policies(mini_file):
    code, out = _run(
        "play",
        mini_file,
        "--task",
        "book",
        "--policy",
        "null",
        "--json",
        "--seed",
        "4",
        "--no-faults",
    )
    result = json.loads(out)
    assert code == 0 and result["policy"] == "null" and result["seed"] == 4
    assert result["faults"] is False and result["grading"]["passed"] is False


def test_play_an_adversary(mini_file):
    code, out = _run("play", mini_file, "--task", "book", "--policy", "sprayer", "--json")
    result = json.loads(out)
    assert code == 0 and result["policy"] == "sprayer"
    verdicts = {v["grader_id"]: v["status"] for v in result["grading"]["verdicts"]}
    assert verdicts["no-collateral"] == "failed" and result["grading"]["score"] == 0.0


def test_play_unknown_task_or_policy_exits_2(mini_file, capsys):
    assert main(["play", mini_file, "--task", "nope"]) == 2
    assert main(["play", mini_file, "--task", "book", "--policy", "gpt"]) == 2
    assert "no task 'nope'" in capsys.readouterr().err


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.stem)
def test_module_entry_point_validates_samples(path):
    proc = subprocess.run(
        [sys.executable, "-m", "coworkenv_engine", "validate", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "VALID" in proc.stdout


def test_validate_too_deep_file_exits_1_without_a_traceback(tmp_path, capsys):
    path = tmp_path / "deep.json"
    path.write_text('{"metadata": ' + "[" * 10_000 + "]" * 10_000 + "}")
    code, out = _run("validate", str(path), "--json")
    report = json.loads(out)
    assert code == 1 and report["valid"] is False
    assert [(p["code"], p["pointer"]) for p in report["problems"]] == [("document_too_deep", "")]
    assert "Traceback" not in capsys.readouterr().err


def test_validate_duplicate_keys_exits_1(tmp_path):
    path = tmp_path / "dup.json"
    path.write_text(json.dumps(mini_doc()).replace('"name": "Mini"', '"name": "A", "name": "B"'))
    code, out = _run("validate", str(path))
    assert code == 1 and "duplicate_key" in out and "/name" in out


def test_play_refuses_an_unbounded_file_with_exit_1(tmp_path, capsys):
    path = tmp_path / "dup.json"
    path.write_text(json.dumps(mini_doc()).replace('"name": "Mini"', '"name": "A", "name": "B"'))
    assert main(["play", str(path), "--task", "book"]) == 1
    assert "Key 'name' appears twice" in capsys.readouterr().err


def test_an_internal_error_exits_3_never_1(mini_file, monkeypatch, capsys):
    # an engine bug cannot be reached from any input (test_fuzz); simulate one
    from coworkenv_engine import cli

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(cli, "validate_spec", broken)
    assert main(["validate", mini_file]) == 3
    err = capsys.readouterr().err
    assert "internal error" in err and "RuntimeError: boom" in err


def test_a_lone_surrogate_is_reported_not_an_encoding_crash(tmp_path):
    doc = mini_doc()
    doc["services"]["email"]["inbox"][0]["subject"] = "Q3 \ud800"
    path = tmp_path / "s.json"
    path.write_text(json.dumps(doc))  # ASCII escapes: a valid file holding a lone surrogate
    code, out = _run("validate", str(path))
    assert code == 1 and "string_not_unicode" in out
