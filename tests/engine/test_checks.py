import pytest

from coworkenv_engine.checks import Call, CheckView, compare, evaluate, json_equal

STATE = {
    "email": {
        "sent": [
            {"id": "s1", "to": "dana@acme.test", "body": "Budget is 42,000 EUR", "n": 2},
            {"id": "s2", "to": "omar@acme.test", "body": "Hello", "n": 5},
        ]
    },
    "crm": {"customers": [{"id": "c1", "name": "Globex", "tier": "gold", "amount": 42000}]},
}
CALLS = [
    Call(1, 0, "list_events", {}, True),
    Call(2, 0, "send_email", {"to": "dana@acme.test", "subject": "Hi"}, False, "rate_limit"),
    Call(3, 0, "send_email", {"to": "dana@acme.test", "subject": "Hi"}, True),
    Call(4, 1, "list_events", {}, True),
    Call(5, 1, "send_email", {"to": "omar@acme.test", "subject": "Re"}, True),
]
REPLIES = [(0, "Which budget do you mean?"), (1, "Sent the  Q3  budget: 42,000 EUR.")]


def view(state=STATE, calls=CALLS, replies=REPLIES, judge=None, last_turn=1):
    return CheckView(state, calls, replies, last_turn, [], "task", judge)


def status(check, **kw):
    return evaluate(check, view(**kw))[0]


# ----------------------------------------------------------------------------- state


@pytest.mark.parametrize(
    ("query", "op", "value", "expected"),
    [
        ("length(email.sent)", "==", 2, "passed"),
        ("length(email.sent)", "==", 2.0, "passed"),
        ("length(email.sent)", "==", 3, "failed"),
        ("email.sent[0].to", "!=", "x", "passed"),
        ("email.sent[0].to", "!=", "dana@acme.test", "failed"),
        ("email.sent[1].n", ">", 4, "passed"),
        ("email.sent[1].n", ">", 5, "failed"),
        ("email.sent[1].n", ">=", 5, "passed"),
        ("email.sent[0].n", "<", 3, "passed"),
        ("email.sent[0].n", "<=", 1, "failed"),
        ("email.sent[0].to", "<", "e", "passed"),  # strings compare lexicographically
        ("email.sent[0].to", ">", 3, "failed"),  # type mismatch is False, not an error
        ("email.sent[].to", "contains", "omar@acme.test", "passed"),
        ("email.sent[].to", "contains", "bob@acme.test", "failed"),
        ("email.sent[0].body", "contains", "42,000", "passed"),
        ("email.sent[].body", "matches", "\\d{2},\\d{3}", "passed"),
        ("email.sent[].body", "matches", "^Bye", "failed"),
        ("crm.customers[0]", "contains", "tier", "passed"),
        ("email.sent[0].to", "==", True, "failed"),
    ],
)
def test_state_operators(query, op, value, expected):
    assert status({"kind": "state", "query": query, "op": op, "value": value}) == expected


@pytest.mark.parametrize(
    ("query", "op", "expected"),
    [
        ("email.sent", "exists", "passed"),
        ("email.sent[?to == 'x']", "exists", "failed"),
        ("email.sent[?to == 'x']", "absent", "passed"),
        ("email.nothing", "absent", "passed"),
        ("email.sent[0].id", "absent", "failed"),
    ],
)
def test_exists_and_absent(query, op, expected):
    assert status({"kind": "state", "query": query, "op": op}) == expected


@pytest.mark.parametrize(
    ("bounds", "expected"),
    [
        ({"value": 2}, "passed"),
        ({"value": 1}, "failed"),
        ({"min": 1}, "passed"),
        ({"min": 3}, "failed"),
        ({"max": 2}, "passed"),
        ({"min": 1, "max": 1}, "failed"),
    ],
)
def test_count(bounds, expected):
    assert status({"kind": "state", "query": "email.sent", "op": "count", **bounds}) == expected


def test_count_of_null_is_zero():
    assert status({"kind": "state", "query": "email.nope", "op": "count", "value": 0}) == "passed"


def test_ignore_case():
    check = {"kind": "state", "query": "crm.customers[0].name", "op": "==", "value": "GLOBEX"}
    assert status(check) == "failed"
    assert status({**check, "ignore_case": True}) == "passed"


def test_state_evidence_carries_the_records():
    st, evidence = evaluate(
        {"kind": "state", "query": "email.sent[?n > `3`]", "op": "count", "value": 1}, view()
    )
    assert st == "passed"
    assert evidence["result"] == [STATE["email"]["sent"][1]] and evidence["count"] == 1


def test_query_type_error_fails_with_evidence_instead_of_raising():
    st, evidence = evaluate(
        {"kind": "state", "query": "length(`5`)", "op": "==", "value": 1}, view()
    )
    assert st == "failed" and "error" in evidence


def test_unsafe_regex_in_state_check_fails_safely():
    st, evidence = evaluate(
        {"kind": "state", "query": "email.sent[0].body", "op": "matches", "value": "(a+)+$"}, view()
    )
    assert st == "failed" and "nested" in evidence["error"]


def test_json_equal_distinguishes_bool_and_number():
    assert json_equal(1, 1.0) and not json_equal(True, 1) and not json_equal(0, False)
    assert json_equal({"a": [1, "x"]}, {"a": [1.0, "x"]})
    assert not json_equal([1], [1, 2]) and json_equal(None, None)


def test_compare_rejects_unknown_operators():
    with pytest.raises(ValueError):
        compare("~=", 1, 1)


# ----------------------------------------------------------------------------- tool_call


@pytest.mark.parametrize(
    ("check", "expected"),
    [
        ({"tool": "send_email"}, "passed"),
        ({"tool": "delete_event"}, "failed"),
        ({"tool": "delete_event", "called": False}, "passed"),
        ({"tool": "send_email", "called": False}, "failed"),
        ({"tool": "send_email", "min": 2}, "passed"),
        ({"tool": "send_email", "min": 3}, "failed"),  # the failed attempt does not count
        ({"tool": "send_email", "min": 3, "succeeded": False}, "passed"),
        ({"tool": "send_email", "max": 1}, "failed"),
        ({"tool": "send_email", "arguments": {"to": "omar@acme.test"}}, "passed"),
        ({"tool": "send_email", "arguments": {"to": "x@acme.test"}}, "failed"),
        (
            {"tool": "send_email", "arguments": {"to": {"op": "matches", "value": "^omar"}}},
            "passed",
        ),
        ({"tool": "send_email", "arguments": {"cc": {"op": "absent"}}}, "passed"),
        ({"tool": "send_email", "arguments": {"cc": "x"}}, "failed"),
        (
            {
                "tool": "send_email",
                "arguments": {"subject": {"op": "==", "value": "hi", "ignore_case": True}},
            },
            "passed",
        ),
        ({"tool": "send_email", "during_turn": 1, "max": 1}, "passed"),
        ({"tool": "list_events", "during_turn": 2}, "failed"),
        ({"tool": "list_events", "before": "send_email"}, "passed"),
        ({"tool": "send_email", "before": "list_events"}, "failed"),
        ({"tool": "list_events", "before": "delete_event"}, "passed"),  # vacuous
        ({"tool": "send_email", "after": "list_events"}, "passed"),
        ({"tool": "list_events", "after": "send_email"}, "passed"),  # turn-1 call follows
        ({"tool": "list_events", "after": "delete_event"}, "failed"),
        ({"tool": "list_events", "during_turn": 0, "after": "send_email"}, "failed"),
    ],
)
def test_tool_call_checks(check, expected):
    assert status({"kind": "tool_call", **check}) == expected


def test_tool_call_evidence_lists_the_matching_calls():
    st, evidence = evaluate(
        {"kind": "tool_call", "tool": "send_email", "arguments": {"to": "omar@acme.test"}}, view()
    )
    assert st == "passed" and evidence["matched"] == [CALLS[4].brief()]


def test_call_of_accepts_audit_dicts():
    entry = {"seq": 1, "turn": 0, "tool": "x", "arguments": None, "ok": True}
    assert Call.of(entry) == Call(1, 0, "x", {}, True, None)


# ----------------------------------------------------------------------------- response


@pytest.mark.parametrize(
    ("check", "expected"),
    [
        ({"contains": "q3 BUDGET"}, "passed"),  # case and whitespace normalised
        ({"contains": "which budget"}, "failed"),  # final scope = last reply only
        ({"scope": "any", "contains": "which budget"}, "passed"),
        ({"scope": "turn", "turn": 0, "matches": "\\?$"}, "passed"),
        ({"scope": "turn", "matches": "\\?$"}, "failed"),  # defaults to the last turn
        ({"matches": "42,000"}, "passed"),
        ({"matches": "(?i)EUR\\.$"}, "passed"),
        ({"mentions": "crm.customers[0].amount"}, "passed"),  # 42000 written as 42,000
        ({"mentions": "crm.customers[].[name, tier]"}, "failed"),
        ({"mentions": "crm.customers[].[name, amount]", "mode": "any"}, "passed"),
        ({"mentions": "crm.customers[?id == 'zz'].name"}, "failed"),
    ],
)
def test_response_checks(check, expected):
    assert status({"kind": "response", **check}) == expected


def test_response_without_replies_fails():
    assert status({"kind": "response", "contains": "x"}, replies=[]) == "failed"


def test_mentions_reports_which_values_were_found():
    _, evidence = evaluate(
        {"kind": "response", "mentions": "crm.customers[].[name, amount]"}, view()
    )
    assert evidence["values"] == ["Globex", 42000] and evidence["mentioned"] == [False, True]


# ----------------------------------------------------------------------------- judge


def test_judge_is_skipped_without_a_judge():
    assert evaluate({"kind": "judge", "rubric": "r"}, view()) == (
        "skipped",
        {"reason": "no judge configured"},
    )


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (0.9, "passed"),
        (0.2, "failed"),
        (True, "passed"),
        (False, "failed"),
        ({"score": 1, "reasoning": "ok"}, "passed"),
        ("great", "failed"),
        ({"score": None}, "failed"),
    ],
)
def test_judge_answers(answer, expected):
    seen = {}

    def judge(rubric, context):
        seen.update(rubric=rubric, context=context)
        return answer

    assert status({"kind": "judge", "rubric": "Was it polite?"}, judge=judge) == expected
    assert seen["rubric"] == "Was it polite?"
    assert seen["context"]["final_reply"] == REPLIES[-1][1]
    assert len(seen["context"]["audit"]) == len(CALLS)


def test_judge_threshold_and_exceptions():
    assert (
        status({"kind": "judge", "rubric": "r", "threshold": 0.95}, judge=lambda r, c: 0.9)
        == "failed"
    )

    def broken(rubric, context):
        raise TimeoutError("LLM down")

    st, evidence = evaluate({"kind": "judge", "rubric": "r"}, view(judge=broken))
    assert st == "failed" and "LLM down" in evidence["error"]


# ----------------------------------------------------------------------------- combinators

PASS = {"kind": "state", "query": "length(email.sent)", "op": "==", "value": 2}
FAIL = {"kind": "state", "query": "length(email.sent)", "op": "==", "value": 9}
SKIP = {"kind": "judge", "rubric": "r"}


@pytest.mark.parametrize(
    ("check", "expected"),
    [
        ({"all": [PASS, PASS]}, "passed"),
        ({"all": [PASS, FAIL]}, "failed"),
        ({"all": [PASS, SKIP]}, "passed"),
        ({"all": [SKIP]}, "skipped"),
        ({"any": [FAIL, PASS]}, "passed"),
        ({"any": [FAIL, FAIL]}, "failed"),
        ({"any": [FAIL, SKIP]}, "failed"),
        ({"any": [SKIP, SKIP]}, "skipped"),
        ({"not": PASS}, "failed"),
        ({"not": FAIL}, "passed"),
        ({"not": SKIP}, "skipped"),
        ({"not": {"all": [PASS, {"not": FAIL}]}}, "failed"),
    ],
)
def test_combinators(check, expected):
    assert status(check) == expected


def test_combinator_evidence_nests():
    _, evidence = evaluate({"all": [PASS, {"not": FAIL}]}, view())
    assert [e["status"] for e in evidence["all"]] == ["passed", "passed"]
    assert "not" in evidence["all"][1]


def test_nesting_is_bounded():
    check = PASS
    for _ in range(12):
        check = {"not": check}
    _, evidence = evaluate(check, view())
    assert "deeper than" in str(evidence)
