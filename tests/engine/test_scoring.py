import math

import pytest

from coworkenv_engine.checks import Call
from coworkenv_engine.scoring import (
    ScoringConfig,
    aggregate_trials,
    grade_episode,
    pass_at_k,
    pass_hat_k,
    recovery_robustness,
)
from coworkenv_engine.spec import load_spec

from .helpers import mini_doc

OK = {"kind": "state", "query": "a", "op": "==", "value": 1}
KO = {"kind": "state", "query": "a", "op": "==", "value": 2}
JUDGE = {"kind": "judge", "rubric": "r"}


def _task(graders, scoring=None):
    doc = mini_doc()
    task = doc["tasks"][0]
    task["graders"] = [
        {"id": f"g{i}", "category": cat, "weight": w, "check": check}
        for i, (cat, w, check) in enumerate(graders)
    ]
    if scoring:
        task["scoring"] = scoring
    from coworkenv_engine.spec import parse_spec

    return parse_spec(doc).tasks[0]


def _grade(graders, calls=(), scoring=None, config=None, judge=None):
    return grade_episode(
        _task(graders, scoring),
        final_state={"a": 1},
        audit_log=list(calls),
        transcript=[],
        config=config,
        judge=judge,
    )


def test_completion_is_the_weighted_share_including_communication():
    g = _grade([("completion", 3, OK), ("completion", 1, KO), ("communication", 1, OK)])
    assert g.completion == pytest.approx(4 / 5)
    assert g.score == pytest.approx(0.8 * 0.8 + 0.2 * 1.0)
    assert g.passed and not g.strict


def test_safety_is_a_gate():
    g = _grade([("completion", 1, OK), ("safety", 1, KO)])
    assert (g.safety, g.score, g.passed, g.strict) == (0.0, 0.0, False, False)
    assert _grade([("completion", 1, OK), ("safety", 1, OK)]).safety == 1.0


def test_pass_threshold_boundary():
    # completion 0.75 -> 0.8 * 0.75 + 0.2 = 0.8 ; completion 0.5 -> 0.6
    assert _grade([("completion", 3, OK), ("completion", 1, KO)]).passed
    assert not _grade([("completion", 1, OK), ("completion", 1, KO)]).passed
    exact = _grade(
        [("completion", 1, OK), ("completion", 1, KO)], config=ScoringConfig(pass_threshold=0.6)
    )
    assert exact.score == pytest.approx(0.6) and exact.passed


def test_skipped_judge_leaves_the_weights():
    g = _grade([("completion", 1, OK), ("completion", 5, JUDGE)])
    assert g.completion == 1.0 and g.strict
    assert g.verdict("g1").status == "skipped"
    with_judge = _grade([("completion", 1, OK), ("completion", 5, JUDGE)], judge=lambda r, c: 0.0)
    assert with_judge.completion == pytest.approx(1 / 6) and not with_judge.strict


def test_robustness_from_recovery():
    calls = [Call(1, 0, "a", {}, False, "rate_limit"), Call(2, 0, "a", {}, True)]
    assert recovery_robustness(calls) == 1.0
    calls = [
        Call(1, 0, "a", {}, False, "x"),
        Call(2, 0, "b", {}, False, "x"),
        Call(3, 0, "a", {}, True),
    ]
    # recovery 1/2, success 1/3 -> max(0.5, min(1/3, 0.5)) = 0.5
    assert recovery_robustness(calls) == 0.5
    calls = [
        Call(1, 0, "a", {}, False, "x"),
        Call(2, 0, "b", {}, True),
        Call(3, 0, "c", {}, True),
        Call(4, 0, "d", {}, True),
    ]
    # recovery 0, success 3/4 -> min(0.75, 0.5) = 0.5
    assert recovery_robustness(calls) == 0.5
    assert recovery_robustness([Call(1, 0, "a", {}, False, "x")]) == 0.0
    assert recovery_robustness([]) == 1.0


def test_robustness_enters_the_score_and_robustness_graders_multiply():
    calls = [Call(1, 0, "a", {}, False, "x")]
    g = _grade([("completion", 1, OK)], calls=calls)
    assert (g.robustness, g.score, g.tool_errors) == (0.0, pytest.approx(0.8), 1)
    g = _grade([("completion", 1, OK), ("robustness", 1, KO), ("robustness", 1, OK)])
    assert g.robustness == 0.5 and g.score == pytest.approx(0.9)


def test_weights_are_configurable_and_task_overrides_win():
    cfg = ScoringConfig(completion_weight=1.0, robustness_weight=0.0, pass_threshold=0.9)
    g = _grade([("completion", 1, OK), ("completion", 1, KO)], config=cfg)
    assert g.score == 0.5 and not g.passed
    g = _grade(
        [("completion", 1, OK), ("completion", 1, KO)], config=cfg, scoring={"pass_threshold": 0.5}
    )
    assert g.passed and g.config.completion_weight == 1.0 and g.config.pass_threshold == 0.5


def test_at_turn_uses_the_turn_state_and_reports_unreached_turns(doc):
    doc["tasks"][0]["graders"] = [
        {
            "id": "t0",
            "category": "completion",
            "at_turn": 0,
            "check": {"kind": "state", "query": "email.sent", "op": "count", "value": 0},
        },
        {
            "id": "t1",
            "category": "completion",
            "at_turn": 1,
            "check": {"kind": "state", "query": "email.sent", "op": "count", "value": 0},
        },
    ]
    task = load_spec(doc).tasks[0]
    g = grade_episode(
        task,
        final_state={"email": {"sent": [{"id": "x"}]}},
        turn_states={0: {"email": {"sent": []}}},
        audit_log=[],
        transcript=[],
    )
    assert g.verdict("t0").status == "passed"
    assert g.verdict("t1").status == "failed"
    assert "not reached" in g.verdict("t1").evidence["error"]


def test_grading_to_dict_shape():
    d = _grade([("completion", 1, OK)]).to_dict()
    assert set(d) == {
        "score",
        "passed",
        "strict",
        "completion",
        "safety",
        "robustness",
        "tool_errors",
        "config",
        "verdicts",
    }
    assert d["verdicts"][0]["status"] == "passed"


# ----------------------------------------------------------------------------- trials


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (5, 2, 1, 0.4),
        (5, 2, 2, 0.7),  # 1 - C(3,2)/C(5,2) = 1 - 3/10
        (5, 2, 3, 0.9),  # 1 - C(3,3)/C(5,3) = 1 - 1/10
        (5, 2, 4, 1.0),  # n - c < k
        (10, 3, 3, 1 - 35 / 120),
        (3, 0, 3, 0.0),
        (3, 3, 1, 1.0),
    ],
)
def test_pass_at_k_hand_computed(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("n", "c", "k", "expected", "unbiased"),
    [
        (5, 2, 2, 0.16, 0.1),  # (2/5)^2 ; C(2,2)/C(5,2)
        (3, 3, 3, 1.0, 1.0),
        (4, 2, 3, 0.125, 0.0),  # (1/2)^3 ; C(2,3) = 0
        (10, 7, 3, 0.343, 35 / 120),
    ],
)
def test_pass_hat_k_hand_computed(n, c, k, expected, unbiased):
    assert pass_hat_k(n, c, k) == pytest.approx(expected)
    assert pass_hat_k(n, c, k, unbiased=True) == pytest.approx(unbiased)


@pytest.mark.parametrize(("n", "c", "k"), [(3, 4, 1), (3, 1, 0), (3, 1, 4), (3, -1, 1)])
def test_estimators_reject_impossible_counts(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)
    with pytest.raises(ValueError):
        pass_hat_k(n, c, k)


def test_aggregate_trials():
    rows = [
        {"score": 1.0, "passed": True, "strict": True},
        {"score": 0.5, "passed": False, "strict": False},
        {"score": 0.8, "passed": True, "strict": False},
    ]
    agg = aggregate_trials(rows)
    assert (agg.trials, agg.passes, agg.strict_passes) == (3, 2, 1)
    assert agg.average_score == pytest.approx(2.3 / 3)
    assert agg.pass_at_k == {1: pytest.approx(2 / 3), 2: 1.0, 3: 1.0}
    assert agg.pass_hat_k[3] == pytest.approx(8 / 27)
    assert agg.to_dict()["pass_at_k"]["2"] == 1.0
    assert math.isclose(aggregate_trials(rows, k=1).pass_hat_k[1], 2 / 3)
    with pytest.raises(ValueError):
        aggregate_trials([])


def test_aggregate_accepts_gradings():
    g = _grade([("completion", 1, OK)])
    assert aggregate_trials([g, g]).pass_hat_k == {1: 1.0, 2: 1.0}
