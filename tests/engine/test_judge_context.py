"""A judge check's declared context: what the judge is shown (``judging.judge_evidence``),
the schema and the static checks of the declaration."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coworkenv_engine.checks import Call, CheckView, evaluate, judge_context
from coworkenv_engine.judging import (
    JUDGE_SYSTEM,
    JUDGE_SYSTEM_DECLARED,
    canonical,
    declared_context,
    judge_evidence,
    judge_messages,
)
from coworkenv_engine.spec import schema_problems
from coworkenv_engine.validation import validate_spec

from .helpers import mini_doc

STATE = {
    "email": {"sent": [{"id": "s1", "body": "SENT-BODY"}], "inbox": [{"id": "m1", "body": "IN"}]},
    "crm": {"deals": [{"id": "d1", "amount": 4200}], "notes": [{"id": "n1", "text": "NOTE"}]},
}
MESSAGES = [
    {"role": "system", "content": "SYSTEM-PROMPT"},
    {"role": "user", "content": "USER-ASKS"},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function"}]},
    {"role": "tool", "tool_call_id": "c1", "content": '{"id": "d1", "amount": 4200}'},
    {"role": "assistant", "content": "FIRST-REPLY"},
    {"role": "user", "content": "USER-AGAIN"},
    {"role": "assistant", "content": "LAST-REPLY"},
]
CALLS = [Call(1, 0, "get_deal", {"deal_id": "d1"}, True, diff=({"op": "read"},))]


def view(state=STATE, messages=MESSAGES):
    replies = [(0, "FIRST-REPLY"), (1, "LAST-REPLY")]
    return CheckView(state, CALLS, replies, 1, messages, "task")


def shown(context=None, **check):
    leaf = {"kind": "judge", "rubric": "r", **check}
    if context is not None:
        leaf["context"] = context
    return judge_evidence(judge_context(leaf, view()))


DEFAULT_KEYS = {"task", "scope", "conversation", "final_reply", "audit_log", "changes"}


@pytest.mark.parametrize(
    "context", [None, {}, {"messages": "all"}, {"calls": True, "state": []}, "not a dict"]
)
def test_the_default_context_is_todays_evidence(context):
    evidence = shown(context)
    assert set(evidence) == DEFAULT_KEYS  # no "shown", no "state": cached verdicts still hit
    assert evidence == shown(None)
    assert judge_messages("r", evidence)[0]["content"] == JUDGE_SYSTEM


@pytest.mark.parametrize(
    ("messages", "present", "absent"),
    [
        ("all", ["USER-ASKS", "SYSTEM-PROMPT", "FIRST-REPLY", "LAST-REPLY"], []),
        ("assistant", ["FIRST-REPLY", "LAST-REPLY"], ["USER-ASKS", "SYSTEM-PROMPT"]),
        ("final", ["LAST-REPLY"], ["USER-ASKS", "FIRST-REPLY", "SYSTEM-PROMPT"]),
        ("none", [], ["USER-ASKS", "FIRST-REPLY", "LAST-REPLY"]),
    ],
)
def test_the_judge_is_shown_the_declared_messages(messages, present, absent):
    evidence = shown({"messages": messages, "calls": False})
    text = canonical(evidence)
    assert all(p in text for p in present) and not any(a in text for a in absent)
    assert "audit_log" not in evidence and "changes" not in evidence and "state" not in evidence
    assert evidence["shown"] == {"messages": messages, "calls": False, "state": []}
    assert judge_messages("r", evidence)[0]["content"] == JUDGE_SYSTEM_DECLARED


def test_the_judge_is_shown_the_declared_collections_only():
    evidence = shown({"state": ["email.sent", "crm"]})
    assert evidence["state"] == {"email": {"sent": STATE["email"]["sent"]}, "crm": STATE["crm"]}
    assert "IN" not in canonical(evidence["state"])
    assert evidence["audit_log"] and evidence["conversation"] == MESSAGES  # the defaults kept


def test_the_judge_callable_is_handed_no_undeclared_record():
    seen = {}

    def judge(rubric, context):
        seen.update(context)
        return 1.0

    check = {"kind": "judge", "rubric": "r", "context": {"state": ["crm.notes"]}}
    status, _ = evaluate(check, CheckView(STATE, CALLS, [], 1, MESSAGES, "task", judge))
    assert status == "passed"
    assert seen["state"] == {"crm": {"notes": STATE["crm"]["notes"]}}
    assert "SENT-BODY" not in canonical(seen["state"])


def test_a_declared_context_is_cut_again_by_judge_evidence():
    """A context built elsewhere (an export's own grading) cannot show more than declared."""
    context = {"declared": {"state": ["crm.deals"]}, "state": STATE, "messages": MESSAGES}
    assert judge_evidence(context)["state"] == {"crm": {"deals": STATE["crm"]["deals"]}}


NAMES = st.sampled_from(["email", "email.sent", "email.inbox", "crm", "crm.deals", "crm.notes"])


@settings(max_examples=80, deadline=None)
@given(
    names=st.lists(NAMES, max_size=4, unique=True),
    messages=st.sampled_from(["all", "assistant", "final", "none"]),
    calls=st.booleans(),
)
def test_the_evidence_never_holds_an_undeclared_record(names, messages, calls):
    evidence = shown({"messages": messages, "calls": calls, "state": names})
    for service, collections in (evidence.get("state") or {}).items():
        for collection in collections:
            assert service in names or f"{service}.{collection}" in names
    declared = declared_context({"messages": messages, "calls": calls, "state": names})
    if declared is None:
        assert set(evidence) == DEFAULT_KEYS
    else:
        assert ("audit_log" in evidence) is calls
        assert ("final_reply" in evidence) is (messages != "none")
        if messages != "all":
            assert "USER-ASKS" not in canonical(evidence)
    undeclared = [
        marker
        for marker, at in (("SENT-BODY", "email.sent"), ("NOTE", "crm.notes"))
        if at not in names and at.split(".")[0] not in names
    ]
    state_text = canonical(evidence.get("state") or {})
    assert not any(m in state_text for m in undeclared)


# ----------------------------------------------------------------------------- the spec


def judged(context, **check):
    doc = mini_doc()
    leaf = {"kind": "judge", "rubric": "The reply is polite.", "context": context, **check}
    doc["tasks"][0]["graders"].append({"id": "judged", "category": "communication", "check": leaf})
    return doc


PTR = "/tasks/0/graders/6/check"


@pytest.mark.parametrize(
    ("context", "where"),
    [
        ({"messages": "user"}, "/context/messages"),
        ({"calls": "yes"}, "/context/calls"),
        ({"state": ["email/sent"]}, "/context/state/0"),
        ({"state": ["email.sent", "email.sent"]}, "/context/state"),
        ({"records": ["email"]}, "/context/records"),
    ],
)
def test_the_schema_refuses_a_malformed_context(context, where):
    got = [(p.code, p.pointer) for p in schema_problems(judged(context))]
    assert ("schema_invalid", PTR + where) in got, got


@pytest.mark.parametrize(
    ("context", "code", "where"),
    [
        ({"state": ["email.drafts"]}, "unknown_collection", "/context/state/0"),
        ({"state": ["email.sent", "billing"]}, "unknown_service", "/context/state/1"),
        ({"messages": "none", "calls": False}, "check_invalid", "/context"),
    ],
)
def test_the_static_checks_refuse_what_names_nothing_or_shows_nothing(context, code, where):
    report = validate_spec(judged(context), dynamic=False)
    assert (code, PTR + where) in [(p.code, p.pointer) for p in report.errors]


def test_a_scope_of_every_reply_needs_the_replies_shown():
    report = validate_spec(judged({"messages": "final"}, scope="all"), dynamic=False)
    assert ("check_invalid", PTR + "/context/messages") in [
        (p.code, p.pointer) for p in report.errors
    ]
    fine = validate_spec(judged({"messages": "assistant"}, scope="all"), dynamic=False)
    assert fine.valid, [p.to_dict() for p in fine.errors]
