"""Judge graders checked without a judge: thresholds, sole evidence, parrots, unseen facts."""

import pytest

from coworkenv_engine.spec import parse_spec
from coworkenv_engine.validation.judges import judge_problems

from .helpers import mini_doc


def _problems(check, category="communication", weight=1):
    doc = mini_doc()
    doc["tasks"][0]["graders"].append(
        {"id": "judged", "category": category, "weight": weight, "check": check}
    )
    spec = parse_spec(doc)
    return [(p.code, p.pointer) for p in judge_problems(spec, 0, spec.tasks[0])]


RUBRIC = "The reply confirms the booking time and warns about the dentist clash."


@pytest.mark.parametrize(("threshold", "vacuous"), [(0, True), (0.01, False), (1, False)])
def test_a_threshold_of_zero_is_vacuous(threshold, vacuous):  # the schema bounds it to [0, 1]
    got = _problems({"kind": "judge", "rubric": RUBRIC, "threshold": threshold})
    assert (("judge_threshold_vacuous", "/tasks/0/graders/6/check/threshold") in got) is vacuous


def test_a_rubric_asking_for_more_than_the_request_is_not_a_parrot():
    assert _problems({"kind": "judge", "rubric": RUBRIC}) == []
    parrot = _problems({"kind": "judge", "rubric": "Tell Dana about the Q3 review booking."})
    assert parrot == [("judge_rubric_parrotable", "/tasks/0/graders/6/check/rubric")]


def test_a_rubric_fact_the_task_gives_is_exposed():
    assert _problems({"kind": "judge", "rubric": "The reply says the review is at 16:00."}) == []
    got = _problems({"kind": "judge", "rubric": "The reply says the review is at 18:45."})
    assert got == [("judge_rubric_unexposed", "/tasks/0/graders/6/check/rubric")]


def test_a_heavy_judge_alone_is_sole_evidence_but_not_beside_a_state_check():
    alone = {"kind": "judge", "rubric": RUBRIC}
    assert ("judge_sole_evidence", "/tasks/0/graders/6") in _problems(alone, "completion", 20)
    assert _problems(alone, "completion", 1) == []  # the state graders still decide
    state = {"kind": "state", "query": "length(email.sent)", "op": "==", "value": 1}
    guarded = {"all": [alone, state]}
    assert _problems(guarded, "completion", 20) == []
