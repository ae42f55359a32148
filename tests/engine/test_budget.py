"""The wall-clock budget of a whole validation (issue 11): a backstop, never a traceback."""

import io
import itertools
import json

from coworkenv_engine.cli import main
from coworkenv_engine.validation import DEFAULT_TIME_BUDGET_S, Deadline, validate_spec

from .helpers import SAMPLES, load_json, mini_doc


def _ticking(seconds: float) -> Deadline:
    """A deadline on a clock that advances one 'second' each time it is read."""
    return Deadline(seconds, clock=itertools.count().__next__)


def test_a_spent_budget_stops_at_the_first_task_with_a_pointer_and_a_hint():
    report = validate_spec(mini_doc(), time_budget=1e-9)
    assert not report.valid
    [problem] = [p for p in report.problems if p.code == "validation_time_budget_exceeded"]
    assert problem.severity == "error" and problem.pointer == "/tasks/0"
    assert "'book'" in problem.message and "--time-budget" in problem.hint
    assert report.tasks[0].oracle_score is None


def test_running_out_mid_task_keeps_what_was_measured_and_names_the_run():
    report = validate_spec(mini_doc(), time_budget=_ticking(4))
    [problem] = [p for p in report.problems if p.code == "validation_time_budget_exceeded"]
    assert problem.pointer == "/tasks/0"
    # no tool faults: the oracle, its replay and the null agent ran; the echo agent did not
    assert "before the 'echo' run" in problem.message
    task = report.tasks[0]
    assert task.oracle_score == 1.0 and task.deterministic is True
    assert task.null_score is not None
    assert task.echo_score is None and task.sensitivity is None


def test_tasks_after_the_one_that_ran_out_are_not_validated():
    doc = load_json(SAMPLES[0])
    report = validate_spec(doc, time_budget=1e-9)
    out = [p for p in report.problems if p.code == "validation_time_budget_exceeded"]
    assert [p.pointer for p in out] == ["/tasks/0"]
    assert len(report.tasks) == len(doc["tasks"])
    assert all(t.oracle_score is None for t in report.tasks)


def test_the_default_budget_is_generous_and_unused_by_a_typical_task():
    assert DEFAULT_TIME_BUDGET_S >= 30
    report = validate_spec(mini_doc())
    assert report.valid and report.tasks[0].sensitivity == 1.0
    assert validate_spec(mini_doc(), time_budget=None).valid


def test_cli_time_budget_exits_1_with_the_code(tmp_path):
    path = tmp_path / "mini.json"
    path.write_text(json.dumps(mini_doc()))
    out = io.StringIO()
    assert main(["validate", str(path), "--time-budget", "0.000001", "--json"], out=out) == 1
    codes = {p["code"] for p in json.loads(out.getvalue())["problems"]}
    assert "validation_time_budget_exceeded" in codes
    assert main(["validate", str(path), "--time-budget", "30"], out=io.StringIO()) == 0


def test_cli_refuses_a_budget_that_is_not_a_positive_number(tmp_path, capsys):
    path = tmp_path / "mini.json"
    path.write_text(json.dumps(mini_doc()))
    for bad in ("0", "-1", "abc", "nan", "inf"):
        try:
            code = main(["validate", str(path), "--time-budget", bad], out=io.StringIO())
        except SystemExit as exc:
            code = exc.code
        assert code == 2, bad
    assert "positive number of seconds" in capsys.readouterr().err
