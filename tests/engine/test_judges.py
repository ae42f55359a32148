"""Judge graders checked without a judge: thresholds, sole evidence, parrots, unseen facts,
and facts the judge is not shown of the reference run."""

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coworkenv_engine.policies import OraclePolicy
from coworkenv_engine.runner import run_task
from coworkenv_engine.spec import parse_spec
from coworkenv_engine.validation.judges import judge_context_problems, judge_problems, rubric_facts

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


@pytest.mark.parametrize(
    ("rubric", "facts"),
    [
        ("Tell Dana Kim about INV-2041 on Thursday March 5.", ["INV-2041", "Dana Kim"]),
        ("Mentions Acme Corp; ticket T-88 and ORD1234.", ["T-88", "ORD1234", "Acme Corp"]),
        ("It costs 340 at 16:00 on 2026-03-05 for dana@acme.test.",
         ["2026-03-05", "16:00", "340", "dana@acme.test"]),
        ('The reply must say the review is booked on "Thursday".', []),
        ("The Q3 review is booked.", []),
        ('It says "Thank You" to Dana Kim.', ["Dana Kim"]),
    ],
)  # fmt: skip
def test_the_facts_a_rubric_names(rubric, facts):
    assert [f for f, _ in rubric_facts(rubric)] == facts


def test_a_name_or_id_the_task_never_gives_is_unexposed():
    assert _problems({"kind": "judge", "rubric": "The invite is sent to Dana Kim."}) == []
    for rubric in ("The invite is sent to Dana Whitfield.", "The invite cites INV-2041."):
        got = _problems({"kind": "judge", "rubric": rubric})
        assert got == [("judge_rubric_unexposed", "/tasks/0/graders/6/check/rubric")]


# ----------------------------------------------------------------------------- out of context


def _out_of_context(check, doc=None, at_turn=None):
    """judge_rubric_out_of_context of a judge grader added to ``doc``, against the reference."""
    doc = doc or mini_doc()
    grader = {"id": "judged", "category": "communication", "check": check}
    if at_turn is not None:
        grader["at_turn"] = at_turn
    doc["tasks"][0]["graders"].append(grader)
    spec = parse_spec(doc)
    oracle = run_task(spec, "book", OraclePolicy(), faults=False)
    return [(p.code, p.pointer) for p in judge_context_problems(spec, 0, oracle)]


EMAIL_RUBRIC = "The email told Dana the review runs 16:00-17:00."
OUT = ("judge_rubric_out_of_context", "/tasks/0/graders/6/check")


@pytest.mark.parametrize(
    ("context", "hidden"),
    [
        (None, False),  # the default: the conversation shows the request and the email sent
        ({"messages": "final", "calls": False}, True),  # the last reply says neither time
        ({"messages": "final"}, False),  # the call sending the email says both
        ({"messages": "final", "calls": False, "state": ["email.sent"]}, False),
        ({"messages": "final", "calls": False, "state": ["email.inbox"]}, True),
        ({"messages": "assistant", "calls": False, "state": ["calendar"]}, False),
    ],
)
def test_a_rubric_fact_the_judge_is_not_shown_is_out_of_context(context, hidden):
    check = {"kind": "judge", "rubric": EMAIL_RUBRIC}
    if context is not None:
        check["context"] = context
    assert (OUT in _out_of_context(check)) is hidden


def test_a_fact_held_only_in_records_needs_them_shown():
    """Dana Kim is a contact no reference call reads: by default the judge never sees it."""
    check = {"kind": "judge", "rubric": "The invite goes to Dana Kim."}
    assert _out_of_context(check) == [OUT]
    assert _out_of_context({**check, "context": {"state": ["contacts.people"]}}) == []


def test_inside_an_all_the_pointer_is_the_judge_check():
    state = {"kind": "state", "query": "length(email.sent)", "op": "==", "value": 1}
    judge = {"kind": "judge", "rubric": EMAIL_RUBRIC, "context": {"messages": "none",
             "calls": False, "state": ["contacts"]}}  # fmt: skip
    got = _out_of_context({"all": [state, judge]})
    assert got == [("judge_rubric_out_of_context", "/tasks/0/graders/6/check/all/1")]


def test_a_grader_at_an_earlier_turn_is_shown_that_turn():
    """The reply of turn 0 says 16:00; the last reply (turn 1) does not."""
    check = {"kind": "judge", "rubric": "The reply says the review is booked for 16:00.",
             "context": {"messages": "final", "calls": False}}  # fmt: skip
    assert _out_of_context(check, at_turn=0) == []
    assert _out_of_context(check) == [OUT]


@settings(max_examples=25, deadline=None)
@given(number=st.integers(min_value=10_000, max_value=999_999))
def test_a_number_only_in_unread_records_is_out_of_context_until_declared(number):
    doc = mini_doc()
    doc["services"]["contacts"]["people"][0]["phone"] = str(number)
    rubric = f"The reply gives Dana's number {number}."
    assert _out_of_context({"kind": "judge", "rubric": rubric}, copy.deepcopy(doc)) == [OUT]
    for names in (["contacts"], ["contacts.people"]):
        check = {"kind": "judge", "rubric": rubric, "context": {"state": names}}
        assert _out_of_context(check, copy.deepcopy(doc)) == []
