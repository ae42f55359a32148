"""Information flow over time: what the reference uses must be visible by its turn."""

from coworkenv_engine.spec import _build
from coworkenv_engine.validation.flow import information_flow_problems

from .helpers import mini_doc


def _unseen(doc):
    spec = _build(doc)  # the typed spec without the load-time checks (this is one of them)
    return [p.pointer for p in information_flow_problems(spec, 0)]


def test_a_value_given_at_a_turn_is_usable_from_that_turn():
    doc = mini_doc()
    task = doc["tasks"][0]
    task["turns"][1]["message"] = "Anything clashing now? Also mail lee@acme.test."
    task["reference_solution"][1]["calls"].append(
        {"tool": "send_email", "arguments": {"to": "lee@acme.test", "subject": "s", "body": "b"}}
    )
    assert _unseen(doc) == []
    task["reference_solution"][0]["calls"][2]["arguments"]["to"] = "lee@acme.test"
    assert _unseen(doc) == ["/tasks/0/reference_solution/0/calls/2/arguments/to"]


def test_a_record_an_update_creates_is_readable_from_its_turn():
    doc = mini_doc()
    task = doc["tasks"][0]
    task["turns"][1]["updates"].append(
        {
            "op": "create",
            "service": "calendar",
            "collection": "events",
            "id": "e7",
            "values": {"title": "Offsite", "attendees": ["kai.lund@acme.test"]},
            "silent": True,
        }
    )
    task["reference_solution"][1]["calls"].append(
        {"tool": "get_event", "arguments": {"event_id": "e7"}}
    )
    task["reference_solution"][1]["calls"].append(
        {
            "tool": "send_email",
            "arguments": {"to": "kai.lund@acme.test", "subject": "Offsite", "body": "Hi"},
        }
    )
    assert _unseen(doc) == []


def test_names_numbers_and_dates():
    doc = mini_doc()
    calls = doc["tasks"][0]["reference_solution"][0]["calls"]
    # a person the records name; a date the agent computes; a short number
    calls[1]["arguments"]["attendees"].append("Dana Kim")
    calls[1]["arguments"]["start"] = "2026-03-12T16:00:00Z"
    calls.append({"tool": "search_people", "arguments": {"query": "Dana", "limit": 20}})
    assert _unseen(doc) == []
    calls.append({"tool": "search_people", "arguments": {"query": "0044 20 7946 0958"}})
    calls[1]["arguments"]["attendees"].append("Morgan Reyes")
    assert _unseen(doc) == [
        "/tasks/0/reference_solution/0/calls/1/arguments/attendees/3",
        "/tasks/0/reference_solution/0/calls/4/arguments/query",
    ]


def test_an_earlier_calls_own_value_is_visible_later():
    doc = mini_doc()
    task = doc["tasks"][0]
    task["system"] = "You are the assistant of me@acme.test. Desk phone: 0044 20 7946 0958."
    task["reference_solution"][1]["calls"].append(
        {"tool": "search_people", "arguments": {"query": "0044 20 7946 0958"}}
    )
    assert _unseen(doc) == []
