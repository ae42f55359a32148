"""Long-horizon projects of the template generator: multi-day, many turns and calls, valid."""

from __future__ import annotations

import copy
import json
from datetime import datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.synthesis.generators import FAMILIES, generate_environment
from apps.synthesis.generators.__main__ import main
from apps.synthesis.generators.long_horizon import HORIZONS, SHAPES, plan
from apps.synthesis.generators.patterns import CAPABILITY_PATTERNS
from coworkenv_engine.policies import MutantPolicy, OraclePolicy, state_changing_calls
from coworkenv_engine.runner import run_task
from coworkenv_engine.spec import parse_spec
from coworkenv_engine.validation import validate_spec

SLUGS = sorted(CAPABILITY_PATTERNS)


def _long(seed: int, family: str, capability: str, horizon: str = "long") -> dict:
    return generate_environment(
        seed=seed,
        capabilities=[capability],
        family=family,
        tasks_per_environment=1,
        horizon=horizon,
    )


def _calls(task: dict) -> int:
    return sum(len(step["calls"]) for step in task["reference_solution"])


def _time(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")


def assert_valid_project(doc: dict) -> None:
    report = validate_spec(doc)
    problems = [(p.code, p.pointer, p.message) for p in report.problems]
    assert report.valid, problems
    # Beyond 24 state-changing calls the validator replays a sample of mutants and says so;
    # nothing else may be reported.
    assert [p for p in problems if p[0] != "mutants_sampled"] == []
    assert [t.sensitivity for t in report.tasks] == [1.0] * len(doc["tasks"])
    assert all(t.oracle_strict and t.deterministic for t in report.tasks)


# --------------------------------------------------------------------------- validity


@pytest.mark.parametrize("family", sorted(FAMILIES))
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(min_value=0, max_value=10**6), pick=st.integers(0, len(SLUGS) - 1))
def test_long_projects_are_valid_for_any_seed(family, seed, pick):
    assert_valid_project(_long(seed, family, SLUGS[pick]))


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(min_value=0, max_value=10**6),
    family=st.sampled_from(sorted(FAMILIES)),
    pick=st.integers(0, len(SLUGS) - 1),
)
def test_medium_mixes_are_valid_for_any_seed(seed, family, pick):
    doc = generate_environment(
        seed=seed,
        capabilities=[SLUGS[pick], SLUGS[(pick + 5) % len(SLUGS)]],
        family=family,
        tasks_per_environment=2,
        horizon="medium",
    )
    # Every second task is a project, the first a short task as before.
    assert ["project" in t["metadata"] for t in doc["tasks"]] == [False, True]
    assert_valid_project(doc)


def test_every_mutant_of_a_long_project_is_caught():
    """The validator samples 24 mutants of a long task; here every one is replayed."""
    doc = _long(3, "meeting-coordination", "notice-silent-changes")
    spec = parse_spec(doc)
    task = spec.tasks[0]
    targets = state_changing_calls(spec, task)
    assert len(targets) >= 10
    oracle = run_task(spec, task.key, OraclePolicy(), faults=False).grading
    assert oracle.strict
    for i in range(len(targets)):
        mutant = run_task(spec, task.key, MutantPolicy(i), faults=False).grading
        assert mutant.score < oracle.score or not mutant.strict, i


# --------------------------------------------------------------------------- shape


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(min_value=0, max_value=10**6),
    family=st.sampled_from(sorted(FAMILIES)),
    pick=st.integers(0, len(SLUGS) - 1),
)
def test_long_projects_have_the_promised_shape(seed, family, pick):
    doc = _long(seed, family, SLUGS[pick])
    (task,) = doc["tasks"]
    lo, hi = SHAPES["long"].turns
    assert lo <= len(task["turns"]) <= hi
    assert SHAPES["long"].calls[0] <= _calls(task) <= SHAPES["long"].calls[1]
    times = [_time(t["time"]) for t in task["turns"] if t.get("time")]
    assert times == sorted(times) and len(set(times)) == len(times)
    assert len({t.date() for t in times}) >= 4  # days apart, not hours
    updates = [u for t in task["turns"] for u in t.get("updates", [])]
    assert {u["silent"] for u in updates} >= {True}
    stages = task["metadata"]["project"]["stages"]
    assert stages[0] == "kickoff" and "drift" in stages
    assert any(g.get("at_turn") is not None for g in task["graders"])
    assert any(g.get("at_turn") is None for g in task["graders"])
    assert [g["id"] for g in task["graders"] if g["check"] == {"kind": "side_effects"}] == [
        "no-collateral"
    ]


def test_a_long_project_interleaves_loud_and_silent_updates():
    doc = _long(0, "onboarding", "reconcile-conflicting-sources")
    kinds = [
        "silent" if u["silent"] else "loud"
        for t in doc["tasks"][0]["turns"]
        for u in t.get("updates", [])
    ]
    assert "loud" in kinds and "silent" in kinds
    stages = doc["tasks"][0]["metadata"]["project"]["stages"]
    assert stages == [
        "kickoff",
        "handoff",
        "reminder",
        "batch",
        "batch",
        "drift",
        "interrupt",
        "handoff-finish",
        "wrap-up",
    ]


@pytest.mark.parametrize(
    ("stages", "expected"),
    [
        (1, ["kickoff"]),
        (2, ["kickoff", "drift"]),
        (3, ["kickoff", "reminder", "drift"]),
        (4, ["kickoff", "reminder", "drift", "wrap-up"]),
        (6, ["kickoff", "handoff", "reminder", "drift", "handoff-finish", "wrap-up"]),
        (
            9,
            [
                "kickoff",
                "handoff",
                "reminder",
                "batch",
                "batch",
                "drift",
                "interrupt",
                "handoff-finish",
                "wrap-up",
            ],
        ),
    ],
)
def test_plan_orders_the_stages(stages, expected):
    assert plan(stages) == expected


def test_short_horizon_is_todays_generator():
    short = generate_environment(seed=4, capabilities=["resolve-conflicts"], horizon="short")
    default = generate_environment(seed=4, capabilities=["resolve-conflicts"])
    assert short == default
    assert all("project" not in t["metadata"] for t in short["tasks"])
    assert short["metadata"]["horizon"] == "short"


def test_unknown_horizon_is_refused():
    with pytest.raises(ValueError, match="horizon must be one of short, medium, long"):
        generate_environment(seed=1, capabilities=["resolve-conflicts"], horizon="weeks")
    assert HORIZONS == ("short", "medium", "long")


# --------------------------------------------------------------------------- the engine


def test_now_advances_with_the_turn_times():
    doc = _long(2, "meeting-coordination", "cross-service-orchestration")
    spec = parse_spec(doc)
    task = doc["tasks"][0]
    result = run_task(spec, task["key"], OraclePolicy(), faults=False)
    assert result.grading.strict
    turn_times = {i: _time(t["time"]) for i, t in enumerate(task["turns"]) if t.get("time")}
    assert len({t.date() for t in turn_times.values()}) >= 4
    by_turn: dict[int, list[datetime]] = {}
    for entry in result.audit_log:
        by_turn.setdefault(entry["turn"], []).append(_time(entry["at"]))
    for turn, start in turn_times.items():
        # Each call of a dated turn happens on that turn's day, after its time.
        assert all(start < at and at.date() == start.date() for at in by_turn[turn]), turn
    # $now in the send_email binding: every email sent is dated on the day it was sent.
    sent = result.final_state["email"]["sent"]
    reference_mails = [
        (step["turn"], c) for step in task["reference_solution"] for c in step["calls"]
    ]
    mails = [(turn, c) for turn, c in reference_mails if c["tool"] == "send_email"]
    dated = {m["subject"]: _time(m["date"]) for m in sent if m["id"].startswith("sent-")}
    for turn, c in mails:
        when = dated[c["arguments"]["subject"]]
        assert when.date() == turn_times.get(turn, _time(doc["clock"]["start"])).date()
    assert len({d.date() for d in dated.values()}) >= 2


def test_a_grader_at_turn_k_sees_that_turns_state_not_the_final_one():
    """The drifted kickoff item is booked with v1 at the kickoff turn and fixed to v2 later:
    its at_turn grader passes on the kickoff state, the same check on the final state fails."""
    doc = _long(2, "finance-close", "clarify-before-acting")  # turns 0-1: the clarification
    task = doc["tasks"][0]
    stages = task["metadata"]["project"]["stages"]
    assert "drift" in stages
    drift_turn = next(
        i for i, t in enumerate(task["turns"]) if any(u["silent"] for u in t.get("updates", []))
    )
    fixed = next(g for g in task["graders"] if g["id"].startswith("re-checked"))
    # The kickoff grader of the item the drift changes: same sheet key, at the kickoff turn.
    key = fixed["check"]["all"][1]["query"].split("invoice == ")[1].split(" ")[0]
    staged = [
        g
        for g in task["graders"]
        if g.get("at_turn") is not None
        and g["at_turn"] < drift_turn
        and f"invoice == {key}" in json.dumps(g["check"])
    ]
    assert len(staged) == 1
    grader = staged[0]
    assert grader["at_turn"] == 2  # the project's first day, after the two-turn pattern
    final = copy.deepcopy(doc)
    final_task = final["tasks"][0]
    final_grader = next(g for g in final_task["graders"] if g["id"] == grader["id"])
    del final_grader["at_turn"]
    verdicts = {}
    for name, variant in (("staged", doc), ("final", final)):
        result = run_task(parse_spec(variant), task["key"], OraclePolicy(), faults=False)
        verdicts[name] = next(
            v.status for v in result.grading.verdicts if v.grader_id == grader["id"]
        )
    assert verdicts == {"staged": "passed", "final": "failed"}


# --------------------------------------------------------------------------- CLI


def test_cli_generates_and_validates_a_long_project(capsys):
    code = main(
        [
            "--seed",
            "7",
            "--capability",
            "handle-interruptions",
            "--family",
            "support-desk",
            "--tasks",
            "1",
            "--horizon",
            "long",
            "--validate",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "valid in" in out
    line = next(line for line in out.splitlines() if "handle-interruptions-1" in line)
    turns = int(line.split("turns=")[1].split()[0])
    calls = int(line.split("calls=")[1].split()[0])
    assert 5 <= turns <= 12 and 20 <= calls <= 60
