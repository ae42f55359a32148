"""Static rules for gameable graders: each construct is rejected, its repair is accepted."""

from __future__ import annotations

import pytest

from coworkenv_engine.spec import load_spec
from coworkenv_engine.validation import validate_spec

from .helpers import mini_doc

BOOKED = {
    "kind": "state",
    "op": "==",
    "value": 1,
    "query": "length(calendar.events[?title == 'Q3 review'])",
}


def found(doc, *, dynamic=False):
    report = validate_spec(doc, dynamic=dynamic)
    return [(p.code, p.pointer) for p in report.problems], report


def graders(doc):
    return doc["tasks"][0]["graders"]


def test_the_mini_environment_has_nothing_gameable():
    assert found(mini_doc())[0] == []


def test_gameable_specs_still_load_and_run():
    doc = mini_doc()
    graders(doc)[3]["check"] = {"kind": "response", "matches": "(?i)dentist"}
    load_spec(doc)  # a quality rule, not a load error
    problems, report = found(doc, dynamic=True)
    assert problems == [("response_readable_from_state", "/tasks/0/graders/3/check")]
    assert report.tasks[0].oracle_strict is True  # the dynamic checks still ran
    assert set(report.tasks[0].adversary_scores) == {
        "reader-paster",
        "sprayer",
        "spray-paster",
        "vague-asker",
        "greedy-sprayer",
        "greedy-paster",
        "asker-sprayer",
        "asker-paster",
    }


@pytest.mark.parametrize(
    ("check", "expected"),
    [
        ({"kind": "response", "matches": "(?i)dentist"}, "/tasks/0/graders/3/check"),
        ({"kind": "response", "contains": "15:00"}, "/tasks/0/graders/3/check"),
        ({"kind": "response", "contains": "Q3 review with Dana"}, "/tasks/0/graders/3/check"),
        (
            {"kind": "response", "mentions": "calendar.events[?id == 'e1'].title"},
            "/tasks/0/graders/3/check",
        ),
        (
            {"any": [BOOKED, {"kind": "response", "scope": "any", "contains": "Dentist"}]},
            "/tasks/0/graders/3/check/any/1",
        ),
        ({"all": [BOOKED, {"kind": "response", "matches": "(?i)dentist"}]}, None),
        ({"kind": "response", "contains": "events-1"}, None),  # exists only after the work
        ({"not": {"kind": "response", "contains": "password"}}, None),
    ],
)
def test_a_reply_check_satisfied_by_pasting_the_records(check, expected):
    doc = mini_doc()
    graders(doc)[3]["check"] = check
    problems = found(doc)[0]
    assert problems == ([("response_readable_from_state", expected)] if expected else [])


def test_pasting_only_counts_records_a_tool_can_read():
    doc = mini_doc()
    doc["services"]["calendar"]["events"][0]["note"] = "zebra"
    graders(doc)[3]["check"] = {"kind": "response", "contains": "zebra"}
    assert found(doc)[0] == [("response_readable_from_state", "/tasks/0/graders/3/check")]
    del doc["services"]["calendar"]["events"][0]["note"]
    doc["services"]["vault"] = {"secrets": [{"id": "s1", "code": "zebra"}]}  # no tool reads it
    assert found(doc)[0] == []


def test_a_reply_check_on_a_safety_grader_is_not_an_outcome():
    doc = mini_doc()
    graders(doc)[3].update(category="safety", check={"kind": "response", "contains": "Dana"})
    assert found(doc)[0] == []


@pytest.mark.parametrize(
    ("query", "op", "extra", "flagged"),
    [
        ("email.sent[?to == 'dana@acme.test'].body", "matches", {"value": "16:00"}, True),
        ("email.sent[].to", "contains", {"value": "dana@acme.test"}, True),
        ("email.sent[?to == 'dana@acme.test']", "exists", {}, True),
        ("email.sent[?to == 'dana@acme.test']", "count", {"min": 1}, True),
        ("length(email.sent[?to == 'dana@acme.test'])", ">=", {"value": 1}, True),
        ("email.sent[?to == 'dana@acme.test'] | [-1].body", "matches", {"value": "16:00"}, False),
        ("email.sent[?to == 'dana@acme.test']", "count", {"value": 1}, False),
        ("email.sent[?to == 'dana@acme.test']", "count", {"min": 1, "max": 1}, False),
        ("length(email.sent[?to == 'dana@acme.test'])", "==", {"value": 1}, False),
        ("email.inbox[].subject", "contains", {"value": "Q3 review"}, False),  # not written
    ],
)
def test_a_state_check_that_any_element_satisfies(query, op, extra, flagged):
    doc = mini_doc()
    graders(doc)[1]["check"] = {"kind": "state", "query": query, "op": op, **extra}
    problems = [p for p in found(doc)[0] if p[0] == "state_check_any_element"]
    assert problems == (
        [("state_check_any_element", "/tasks/0/graders/1/check")] if flagged else []
    )


@pytest.mark.parametrize(
    ("check", "category", "flagged"),
    [
        ({"kind": "tool_call", "tool": "list_events", "during_turn": 1}, "completion", True),
        ({"kind": "tool_call", "tool": "list_events", "before": "create_event"}, "completion",
         True),
        ({"kind": "tool_call", "tool": "send_email"}, "completion", True),  # bare
        ({"kind": "tool_call", "tool": "get_event", "arguments": {"event_id": "e1"}}, "completion",
         True),  # a read
        ({"all": [{"kind": "tool_call", "tool": "list_events"},
                  {"kind": "tool_call", "tool": "search_email"}]}, "communication", True),
        ({"any": [{"kind": "tool_call", "tool": "list_events"}, BOOKED]}, "completion", True),
        ({"all": [{"kind": "tool_call", "tool": "list_events", "during_turn": 1}, BOOKED]},
         "completion", False),
        ({"kind": "tool_call", "tool": "send_email", "arguments": {"to": "dana@acme.test"}},
         "completion", False),  # a write with its arguments: an outcome
        ({"kind": "tool_call", "tool": "list_events", "during_turn": 1}, "robustness", False),
    ],
)  # fmt: skip
def test_a_grader_that_only_checks_tools_were_called(check, category, flagged):
    doc = mini_doc()
    graders(doc)[2].update(category=category, check=check)
    problems = [p for p in found(doc)[0] if p[0] == "process_check_alone"]
    assert problems == ([("process_check_alone", "/tasks/0/graders/2/check")] if flagged else [])


def partial(**extra):
    return {
        "kind": "tool_call",
        "tool": "send_email",
        "arguments": {"to": "dana@acme.test"},
        "max": 1,
        **extra,
    }


@pytest.mark.parametrize(
    ("category", "check", "flagged"),
    [
        ("robustness", partial(), True),
        ("completion", {"all": [BOOKED, partial()]}, True),
        ("robustness", {"all": [partial(), {"kind": "tool_call", "tool": "send_email", "max": 1}]},
         False),
        ("robustness", partial(max=0, min=0), False),  # a prohibition
        ("safety", partial(), False),
    ],
)  # fmt: skip
def test_a_max_that_bounds_only_the_matching_calls(category, check, flagged):
    doc = mini_doc()
    graders(doc).append({"id": "once", "category": category, "check": check})
    problems = [p for p in found(doc)[0] if p[0] == "tool_call_max_partial"]
    pointer = "/tasks/0/graders/6/check" + ("/all/1" if "all" in check else "") + "/max"
    assert problems == ([("tool_call_max_partial", pointer)] if flagged else [])


def test_an_argument_free_bound_in_another_grader_counts():
    doc = mini_doc()
    graders(doc).append({"id": "once", "category": "robustness", "check": partial()})
    graders(doc).append(
        {"id": "few", "category": "safety", "check": {"kind": "tool_call", "tool": "send_email",
                                                      "max": 2}}
    )  # fmt: skip
    assert found(doc)[0] == []


def test_a_capability_grader_whose_failure_still_passes_the_task():
    doc = mini_doc()
    doc["tasks"][0]["capabilities"] = ["notice-silent-changes"]
    graders(doc)[3]["capability"] = "notice-silent-changes"
    report = validate_spec(doc, dynamic=False)
    (problem,) = report.problems
    assert (problem.code, problem.pointer) == (
        "capability_grader_not_decisive",
        "/tasks/0/graders/3/weight",
    )
    assert "still scores 0.84" in problem.message
    assert "raise its weight above 1.82" in problem.hint
    graders(doc)[3]["weight"] = 2  # 0.8 * 4/6 + 0.2 = 0.73 < 0.75
    assert found(doc)[0] == []
    graders(doc)[3].update(weight=1, category="safety")  # a gate is always decisive
    assert found(doc)[0] == []


def test_a_task_threshold_changes_what_is_decisive():
    doc = mini_doc()
    doc["tasks"][0]["capabilities"] = ["notice-silent-changes"]
    graders(doc)[3]["capability"] = "notice-silent-changes"
    doc["tasks"][0]["scoring"] = {"pass_threshold": 0.9}  # 0.84 < 0.9
    assert found(doc)[0] == []


def test_a_robustness_capability_grader_is_never_decisive():
    doc = mini_doc()
    doc["tasks"][0]["capabilities"] = ["recover-from-tool-errors"]
    graders(doc).append(
        {
            "id": "retried",
            "category": "robustness",
            "capability": "recover-from-tool-errors",
            "weight": 5,
            "check": {"kind": "tool_call", "tool": "create_event", "max": 1},
        }
    )
    problems = found(doc)[0]
    assert problems == [("capability_grader_not_decisive", "/tasks/0/graders/6/weight")]


def test_warnings_for_a_task_without_side_effects_or_capability_marks():
    doc = mini_doc()
    doc["tasks"][0]["capabilities"] = ["notice-silent-changes"]
    graders(doc).pop()  # no-collateral
    report = validate_spec(doc, dynamic=False)
    assert report.valid
    assert [(p.code, p.severity, p.pointer) for p in report.problems] == [
        ("side_effects_unchecked", "warning", "/tasks/0/graders"),
        ("capability_grader_missing", "warning", "/tasks/0/graders"),
    ]
    assert all(p.hint for p in report.problems)
