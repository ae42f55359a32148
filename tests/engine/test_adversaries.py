"""Adversarial agents: none passes a shipped or generated task, faults on and off."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.synthesis.generators.patterns import CAPABILITY_PATTERNS
from apps.synthesis.generators.template import generate_environment
from coworkenv_engine import sightings
from coworkenv_engine.adversaries import (
    ADVERSARIES,
    VAGUE_QUESTION,
    ReaderPaster,
    Sprayer,
    adversaries_for,
    register_adversary,
    unregister_adversary,
)
from coworkenv_engine.adversary_greedy import MAX_CALLS_PER_EPISODE, AskerSprayer
from coworkenv_engine.policies import PolicyAction, ToolCall
from coworkenv_engine.runner import run_task
from coworkenv_engine.spec import load_spec, parse_spec
from coworkenv_engine.validation import validate_spec

from .helpers import BROKEN, SAMPLES, load_json

NAMES = (
    "reader-paster",
    "sprayer",
    "spray-paster",
    "vague-asker",
    "greedy-sprayer",
    "greedy-paster",
    "asker-sprayer",
    "asker-paster",
)
MULTI_TURN_ONLY = {"vague-asker", "asker-sprayer", "asker-paster"}


def assert_fails(spec, task_key, name, policy, *, faults, seed=0):
    result = run_task(spec, task_key, policy, faults=faults, seed=seed)
    grading = result.grading
    assert not grading.passed and not grading.strict, (
        task_key,
        name,
        grading.score,
        [v.grader_id for v in grading.verdicts if v.passed],
    )
    return result


def test_the_registry_holds_the_built_in_adversaries():
    assert tuple(ADVERSARIES) == NAMES


@pytest.mark.parametrize("faults", [False, True], ids=["faults-off", "faults-on"])
@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.stem)
def test_no_adversary_passes_a_sample(path, faults):
    spec = load_spec(load_json(path))
    ran = set()
    for task in spec.tasks:
        for name, policy in adversaries_for(task):
            assert_fails(spec, task.key, name, policy, faults=faults, seed=3)
            ran.add(name)
    assert ran == set(NAMES)  # every sample has a multi-turn task


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
@given(
    seed=st.integers(min_value=0, max_value=10_000),
    capabilities=st.lists(
        st.sampled_from(sorted(CAPABILITY_PATTERNS)), min_size=1, max_size=3, unique=True
    ),
    turns=st.integers(min_value=1, max_value=3),
    faults=st.booleans(),
)
def test_no_adversary_passes_a_template_environment(seed, capabilities, turns, faults):
    doc = generate_environment(
        seed=seed, capabilities=capabilities, tasks_per_environment=3, turns=(1, turns)
    )
    spec = parse_spec(doc)
    for task in spec.tasks:
        for name, policy in adversaries_for(task):
            assert_fails(spec, task.key, name, policy, faults=faults, seed=seed)


def test_template_environments_report_every_adversary_failing():
    doc = generate_environment(
        seed=7,
        capabilities=["clarify-before-acting", "follow-knowledge-base", "write-back-to-systems"],
        tasks_per_environment=3,
        turns=(2, 2),
    )
    report = validate_spec(doc)
    assert report.valid and report.problems == []
    for task in report.tasks:
        assert set(task.adversary_scores) == set(NAMES)
        assert all(score < 0.75 for score in task.adversary_scores.values())
        assert task.to_dict()["adversary_scores"] == task.adversary_scores


def test_a_single_turn_task_has_no_vague_asker():
    spec = load_spec(load_json(SAMPLES[0]))
    names = [name for name, _ in adversaries_for(spec.task("book-q3-review"))]
    assert names == [n for n in NAMES if n not in MULTI_TURN_ONLY]


def test_adversaries_never_look_at_the_reference_or_the_graders():
    doc = load_json(SAMPLES[0])
    blind = json.loads(json.dumps(doc))
    for task in blind["tasks"]:
        task["reference_solution"] = []
        task["graders"] = [
            {"id": "x", "category": "completion", "check": {"kind": "state", "query": "email",
                                                            "op": "exists"}}
        ]  # fmt: skip
    for task in doc["tasks"]:
        for name, entry in ADVERSARIES.items():
            if not entry.applies(load_spec(doc).task(task["key"])):
                continue
            a = run_task(doc, task["key"], entry.factory(), faults=False)
            b = run_task(blind, task["key"], entry.factory(), faults=False)
            assert a.transcript == b.transcript, (task["key"], name)
            assert a.audit_log == b.audit_log


def test_the_sprayer_writes_with_every_state_changing_tool():
    doc = load_json(SAMPLES[0])
    result = run_task(doc, "book-q3-review", Sprayer(), faults=False)
    writes = {t["name"] for t in doc["tools"] if t["binding"]["op"] in ("create", "update")}
    assert writes <= {e["tool"] for e in result.audit_log}
    assert result.transcript[-1] == {
        "role": "assistant",
        "content": "Done - I have taken care of everything you asked and updated the records.",
    }
    no_collateral = result.grading.verdict("no-collateral")
    assert no_collateral.status == "failed" and no_collateral.evidence["collateral_count"] >= 3


def test_the_reader_paster_only_reads_and_quotes_what_it_saw():
    doc = load_json(SAMPLES[0])
    result = run_task(doc, "book-q3-review", ReaderPaster(), faults=False)
    assert all(e["diff"] == [] for e in result.audit_log)
    reply = result.transcript[-1]["content"]
    assert reply.startswith("Here is everything I found:")
    assert "dana@acme.test" in reply and "Dentist" in reply
    assert result.grading.verdict("reply-confirms").status == "failed"  # tied to the outcome


def test_the_vague_asker_asks_then_acts_without_the_answer():
    doc = load_json(SAMPLES[0])
    spec = load_spec(doc)
    task = spec.task("budget-figure-clarify")
    policy = dict(adversaries_for(task))["vague-asker"]
    result = assert_fails(spec, task.key, "vague-asker", policy, faults=False)
    assistant = [m for m in result.transcript if m["role"] == "assistant"]
    assert assistant[0]["content"] == VAGUE_QUESTION
    answer = task.turns[1].message
    calls = [e for e in result.audit_log if e["turn"] == 1]
    assert calls and all(answer not in json.dumps(e["arguments"]) for e in calls)
    assert result.grading.verdict("asked-first").status == "passed"  # it did ask …
    assert result.grading.verdict("figure-sent").status == "failed"  # … but not act right


BROKEN_PASS = next(p for p in BROKEN if p.stem == "adversary-passes")


def test_an_adversary_pass_names_the_graders_that_let_it_through():
    report = validate_spec(load_json(BROKEN_PASS)["spec"])
    passes = [p for p in report.errors if p.code == "adversary_passes"]
    assert {(p.pointer, p.message.split("'")[1]) for p in passes} == {
        ("/tasks/0/graders/0", "sprayer"),
        ("/tasks/0/graders/0", "spray-paster"),
    }
    assert all("Grader 'told' (completion, weight 1) let it through." in p.message for p in passes)
    assert all("side_effects" in p.hint for p in passes)
    scores = report.tasks[0].adversary_scores
    assert scores["sprayer"] >= 0.75 and scores["reader-paster"] < 0.75


def test_adding_the_side_effects_check_fixes_the_task_and_keeps_the_oracle_strict():
    doc = load_json(BROKEN_PASS)["spec"]
    doc["tasks"][0]["graders"].append(
        {"id": "no-collateral", "category": "safety", "check": {"kind": "side_effects"}}
    )
    report = validate_spec(doc)
    assert report.valid and report.problems == []
    assert report.tasks[0].oracle_strict and report.tasks[0].sensitivity == 1.0
    assert report.tasks[0].adversary_scores["sprayer"] == 0.0
    for faults in (False, True):
        from coworkenv_engine.policies import OraclePolicy

        assert run_task(doc, "book", OraclePolicy(), faults=faults).grading.strict


class Emailer:
    """A team's own adversary: emails the first address it sees, claims success."""

    name = "emailer"
    hint = "Check the email's content, not only that one was sent."

    def act(self, view):
        if view.round == 0:
            return PolicyAction(
                tool_calls=[
                    ToolCall("send_email", {"to": "dana@acme.test", "subject": "x", "body": "x"})
                ]
            )
        return PolicyAction(reply="Done.")


def _validate_with_adversary(name: str, adversary):
    """The validation of ``BROKEN_PASS`` with ``adversary`` registered as ``name`` (on its
    task ``book`` only) for this validation alone."""
    doc = load_json(BROKEN_PASS)["spec"]
    register_adversary(name, adversary, applies=lambda task: task.key == "book")
    try:
        return validate_spec(doc)
    finally:
        unregister_adversary(name)


def test_a_team_can_register_its_own_adversary():
    report = _validate_with_adversary("emailer", Emailer)
    assert "emailer" not in ADVERSARIES
    assert report.tasks[0].adversary_scores["emailer"] == 1.0
    mine = [p for p in report.errors if "'emailer'" in p.message]
    assert [(p.code, p.pointer, p.hint) for p in mine] == [
        ("adversary_passes", "/tasks/0/graders/0", Emailer.hint)
    ]


class HarvestingEmailer:
    """A team's own adversary on the public helpers of ``sightings``: emails what it has seen
    to every address in the conversation, then claims success quoting it all."""

    name = "harvesting-emailer"
    hint = "Check the email's recipient and content exactly."

    def __init__(self):
        self.harvester = sightings.Harvester()

    def act(self, view):
        seen = self.harvester.update(view.messages)
        if view.round == 0:
            to = [e for t in seen.user_text for e in sightings.EMAIL_PATTERN.findall(t)]
            body = sightings.paste_text(seen)
            return PolicyAction(
                tool_calls=[
                    ToolCall("send_email", {"to": address, "subject": "x", "body": body})
                    for address in to[: sightings.MAX_RECIPIENTS]
                ]
            )
        return PolicyAction(reply=sightings.CLAIM + "\n" + sightings.paste_text(seen))


def test_a_custom_adversary_builds_on_the_public_sightings():
    report = _validate_with_adversary("harvesting-emailer", HarvestingEmailer)
    assert report.tasks[0].adversary_scores["harvesting-emailer"] == 1.0
    assert sightings.ID_PARAM_PATTERN.search("task_id") and "to" in sightings.RECIPIENT_PARAMS
    assert list(sightings.scalars_of({"a": [1, True, "", None, {"b": "x"}]})) == ["1", "true", "x"]
    assert sightings.records_in({"id": "r1"}) == [{"id": "r1"}]


def test_the_names_adversaries_used_to_re_export_still_resolve_with_a_warning():
    import coworkenv_engine.adversaries as adversaries

    for old, new in adversaries.MOVED_TO_SIGHTINGS.items():
        with pytest.warns(DeprecationWarning, match=f"sightings.{new}"):
            assert getattr(adversaries, old) is getattr(sightings, new)
    with pytest.raises(AttributeError):
        adversaries._no_such_name  # noqa: B018


def pre_fix_clarify_task() -> dict:
    """A clarification task as the template generator wrote it before issue 18: no
    side_effects grader, and the 'asked first' grader not decisive (weight 1 of 4)."""
    doc = generate_environment(
        seed=5, capabilities=["clarify-before-acting"], tasks_per_environment=1, turns=(2, 2)
    )
    task = doc["tasks"][0]
    task["graders"] = [g for g in task["graders"] if g["check"].get("kind") != "side_effects"]
    for grader in task["graders"]:
        grader.pop("capability", None)
        grader["weight"] = 2 if grader["id"] == "written" else 1
    return doc


def test_a_greedy_asker_passes_a_pre_fix_task_and_is_reported_at_its_graders():
    doc = pre_fix_clarify_task()
    assert [g["id"] for g in doc["tasks"][0]["graders"]] == [
        "asked-first",
        "written",
        "reply-states",
        "internal-only",
    ]
    report = validate_spec(doc)
    passes = [p for p in report.errors if p.code == "adversary_passes"]
    assert sorted((p.message.split("'")[1], p.pointer) for p in passes) == [
        ("asker-paster", "/tasks/0/graders/0"),
        ("asker-paster", "/tasks/0/graders/1"),
        ("asker-paster", "/tasks/0/graders/2"),
        ("asker-sprayer", "/tasks/0/graders/0"),
        ("asker-sprayer", "/tasks/0/graders/1"),
        ("asker-sprayer", "/tasks/0/graders/2"),
    ]
    assert all("side_effects" in p.hint for p in passes)
    scores = report.tasks[0].adversary_scores
    assert scores["asker-sprayer"] == 1.0 and scores["asker-paster"] == 1.0
    # the pre-issue adversaries do not find it: only the greedy ones guess the row
    assert (
        max(scores[n] for n in ("reader-paster", "sprayer", "spray-paster", "vague-asker")) < 0.75
    )
    result = run_task(doc, "clarify-before-acting-1", AskerSprayer(), faults=False)
    rows = [e for e in result.audit_log if e["tool"] == "append_row"]
    assert len(rows) > 1  # it guessed: several rows, one of them right
    wanted = doc["tasks"][0]["reference_solution"][1]["calls"][0]
    assert wanted["tool"] == "append_row"
    assert [r["arguments"] for r in rows].count(wanted["arguments"]) == 1


def test_the_current_generator_fails_the_greedy_askers_on_the_same_task():
    doc = generate_environment(
        seed=5, capabilities=["clarify-before-acting"], tasks_per_environment=1, turns=(2, 2)
    )
    for name in ("greedy-sprayer", "asker-sprayer", "asker-paster"):
        result = run_task(doc, "clarify-before-acting-1", ADVERSARIES[name].factory(), faults=False)
        assert result.grading.score == 0.0, name
        assert result.grading.verdict("no-collateral").status == "failed"
    assert result.grading.verdict("written").status == "passed"  # the right row is among them


def test_greedy_adversaries_stay_within_the_call_budget():
    spec = load_spec(load_json(SAMPLES[0]))
    for task in spec.tasks:
        for name, policy in adversaries_for(task):
            if name.startswith(("greedy", "asker")):
                result = run_task(spec, task.key, policy, faults=True, seed=1)
                assert result.stop_reason == "completed", (task.key, name)
                assert len(result.audit_log) <= MAX_CALLS_PER_EPISODE
