"""Facts known in time: unread collections, values given later, the clock, the call limit."""

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from coworkenv_engine.limits import Limits
from coworkenv_engine.spec import parse_spec
from coworkenv_engine.validation import validate_spec
from coworkenv_engine.validation.known import (
    _facts,
    call_limit_problems,
    clock_problems,
    timely_fact_problems,
)

from .helpers import mini_doc


def _found(doc):
    spec = parse_spec(doc) if not hasattr(doc, "tasks") else doc
    return [(p.code, p.pointer) for p in timely_fact_problems(spec, 0)]


def test_facts_are_dates_times_and_numbers():
    assert [f for f, _ in _facts("2026-03-05T14:30:00Z, 45.20 EUR in 3 days, id e1")] == [
        "2026-03-05",
        "14:30",
        "45.20",
    ]
    forms = dict(_facts("at 16:00"))["16:00"]
    assert "4 pm" in forms and "4pm" in forms


def _later_doc(second_message: str) -> dict:
    doc = mini_doc()
    task = doc["tasks"][0]
    task["turns"][0]["message"] = "Book the Q3 review with Dana on Thursday for an hour."
    task["turns"][1]["message"] = second_message
    call = task["reference_solution"][0]["calls"][1]["arguments"]
    call.update(start="2026-03-05T14:30:00Z", end="2026-03-05T15:30:00Z")
    return doc


START = "/tasks/0/reference_solution/0/calls/1/arguments/start"


def test_a_time_the_user_gives_next_turn_is_reported():
    assert ("value_given_later", START) in _found(_later_doc("Did you book 14:30?"))
    assert ("value_given_later", START) in _found(_later_doc("Was it 2:30 pm?"))


def test_a_time_given_in_the_same_turn_is_fine():
    doc = _later_doc("Anything clashing?")
    doc["tasks"][0]["turns"][0]["message"] += " At 14:30."
    assert _found(doc) == []


def test_a_fact_only_in_an_unread_collection_is_reported():
    doc = mini_doc()
    doc["services"]["notes"] = {"items": [{"id": "n1", "text": "Room 4512 is booked."}]}
    doc["tasks"][0]["reference_solution"][0]["calls"][2]["arguments"]["body"] = "Room 4512."
    assert _found(doc) == [
        ("fact_in_unread_collection", "/tasks/0/reference_solution/0/calls/2/arguments/body")
    ]


@given(minute=st.integers(0, 59), step=st.sampled_from([30, 60, 90]))
def test_a_turn_crossing_midnight_is_reported_exactly_when_its_calls_change_date(minute, step):
    doc = mini_doc()
    start = datetime(2026, 3, 2, 23, minute, tzinfo=UTC)
    doc["clock"] = {"start": start.strftime("%Y-%m-%dT%H:%M:%SZ"), "step_seconds": step}
    calls = len(doc["tasks"][0]["reference_solution"][0]["calls"])
    first, last = start + timedelta(seconds=step), start + timedelta(seconds=step * calls)
    crossing = ("reference_crosses_midnight", "/tasks/0/turns/0")
    got = {(p.code, p.pointer) for p in clock_problems(parse_spec(doc), 0)}
    assert (crossing in got) is (first.date() != last.date())


def test_scheduling_before_the_clock_is_reported_and_after_is_not():
    doc = mini_doc()
    doc["clock"] = {"start": "2026-03-05T16:30:00Z", "step_seconds": 60}
    doc["services"]["email"]["inbox"][0]["date"] = "2026-03-05T08:00:00Z"
    got = [(p.code, p.pointer) for p in clock_problems(parse_spec(doc), 0)]
    assert ("reference_acts_in_past", START) in got
    assert ("reference_acts_in_past", START.replace("start", "end")) not in got  # 17:00 ahead
    assert clock_problems(parse_spec(mini_doc()), 0) == []


def test_call_limit_headroom_warns_at_the_limit_and_errs_past_it():
    spec = parse_spec(mini_doc())  # four reference calls
    assert call_limit_problems(spec, 0, Limits(max_calls=5)) == []
    [at] = call_limit_problems(spec, 0, Limits(max_calls=4))
    assert (at.code, at.severity, at.pointer) == (
        "call_limit_headroom",
        "warning",
        "/tasks/0/reference_solution",
    )
    [over] = call_limit_problems(spec, 0, Limits(max_calls=3))
    assert over.severity == "error"
    [turn] = call_limit_problems(spec, 0, Limits(max_rounds_per_turn=4))
    assert (turn.severity, turn.pointer) == ("warning", "/tasks/0/reference_solution/0/calls")


def test_an_update_into_an_unread_collection_is_an_error_with_its_pointer():
    doc = mini_doc()
    doc["tasks"][0]["turns"][1]["updates"].append(
        {"op": "create", "service": "email", "collection": "sent", "values": {
            "id": "x1", "from": "me@acme.test", "to": "a@acme.test", "subject": "s",
            "body": "b", "date": "2026-03-02T09:30:00Z"}}
    )  # fmt: skip
    report = validate_spec(doc, dynamic=False)
    assert ("fact_in_unread_collection", "/tasks/0/turns/1/updates/1") in {
        (p.code, p.pointer) for p in report.errors
    }


def test_a_time_only_written_by_a_later_update_is_not_given_later():
    doc = _later_doc("Anything clashing?")
    update = doc["tasks"][0]["turns"][1]["updates"][0]
    update["values"] = {"start": "2026-03-05T14:30:00Z"}  # the agent picked 14:30 itself
    assert _found(doc) == []
