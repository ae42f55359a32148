"""Later turns must count: the reference cut before a later turn fails (validation/turns.py)."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coworkenv_engine.adversaries import TruncatedReference, policy_by_name
from coworkenv_engine.runner import run_task
from coworkenv_engine.sightings import CLAIM
from coworkenv_engine.validation import validate_spec

from .helpers import mini_doc


def _codes(report):
    return [(p.code, p.pointer) for p in report.errors]


def test_a_task_whose_later_turn_counts_is_valid_and_reports_each_cut():
    report = validate_spec(mini_doc())
    assert report.valid
    scores = report.tasks[0].truncated_scores
    assert list(scores) == [1] and scores[1] < 0.75


def test_the_truncated_reference_replays_the_first_turns_then_only_claims():
    result = run_task(mini_doc(), "book", TruncatedReference(1), faults=False)
    assert {e["turn"] for e in result.audit_log} == {0}
    replies = [m["content"] for m in result.transcript if m["role"] == "assistant"]
    assert replies[-1] == CLAIM
    assert not result.grading.passed and not result.grading.strict


def test_policy_by_name_gives_a_truncated_reference():
    policy = policy_by_name("truncated:2")
    assert isinstance(policy, TruncatedReference) and policy.cut == 2


def test_a_single_turn_task_has_no_cut():
    doc = mini_doc()
    task = doc["tasks"][0]
    task["turns"] = task["turns"][:1]
    task["reference_solution"] = task["reference_solution"][:1]
    task["graders"] = [g for g in task["graders"] if g["id"] not in ("re-read", "clash")]
    report = validate_spec(doc)
    assert report.valid, _codes(report)
    assert report.tasks[0].truncated_scores == {}


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(weight=st.integers(min_value=1, max_value=12))
def test_the_error_is_reported_exactly_when_the_cut_run_passes(weight):
    doc = mini_doc()
    doc["tasks"][0]["graders"][0]["weight"] = weight  # the turn-0 booking
    report = validate_spec(doc)
    cut = run_task(doc, "book", TruncatedReference(1), faults=False).grading
    flagged = ("later_turns_unweighted", "/tasks/0/turns/1") in _codes(report)
    assert flagged == (cut.passed or cut.strict)
    assert report.tasks[0].truncated_scores[1] == cut.score
    if flagged:
        problem = next(p for p in report.errors if p.code == "later_turns_unweighted")
        assert f"score {cut.score:.2f}" in problem.message and "threshold 0.75" in problem.message
        assert "re-read" in problem.message and problem.hint
