"""The record diffs every trajectory page shows (run detail, compare, review) come from
``apps.runs.timeline.record_diff``; the diffs here are the engine's own, from real calls."""

from apps.runs.timeline import record_diff, run_timeline, turn_days
from coworkenv_engine.simulator import Episode
from tests.engine.helpers import mini_doc

S = {"type": "string"}


def _episode() -> Episode:
    doc = mini_doc()
    doc["services"]["desk"] = {
        "tickets": [{"id": "t-17", "title": "VPN down", "assignee": None, "priority": "low"}]
    }
    binding = {"service": "desk", "collection": "tickets"}
    doc["tools"] += [
        {
            "name": "assign",
            "parameters": {
                "type": "object",
                "properties": {"id": S, "assignee": S, "priority": S},
                "required": ["id"],
            },
            "binding": {
                "op": "update",
                "id": "$id",
                "values": {"assignee": "$assignee", "priority": "$priority"},
                **binding,
            },
        },
        {
            "name": "open_ticket",
            "parameters": {"type": "object", "properties": {"title": S}, "required": ["title"]},
            "binding": {"op": "create", "values": {"title": "$title", "status": "open"}, **binding},
        },
        {
            "name": "drop_ticket",
            "parameters": {"type": "object", "properties": {"id": S}, "required": ["id"]},
            "binding": {"op": "delete", "id": "$id", **binding},
        },
    ]
    return Episode(doc, "book", faults=False)


def _diff_of(episode: Episode, tool: str, arguments: dict) -> dict:
    assert episode.call(tool, arguments).ok
    (change,) = episode.audit_log[-1].to_dict()["diff"]
    return change


def test_update_lists_each_changed_field_with_before_and_after():
    change = _diff_of(_episode(), "assign", {"id": "t-17", "assignee": "dana@acme.test"})
    assert record_diff(change) == {
        "title": "desk.tickets/t-17",
        "op": "update",
        "fields": [
            {"name": "assignee", "before": "—", "after": "dana@acme.test", "changed": True},
        ],
        "changed": 1,
    }


def test_update_of_two_fields_keeps_the_engine_order():
    change = _diff_of(
        _episode(), "assign", {"id": "t-17", "assignee": "dana@acme.test", "priority": "high"}
    )
    diff = record_diff(change)
    assert [(f["name"], f["before"], f["after"]) for f in diff["fields"]] == [
        ("assignee", "—", "dana@acme.test"),
        ("priority", "low", "high"),
    ]
    assert diff["changed"] == 2


def test_create_shows_every_field_as_new():
    episode = _episode()
    change = _diff_of(episode, "open_ticket", {"title": "Printer jam"})
    new_id = change["id"]
    assert record_diff(change) == {
        "title": f"desk.tickets/{new_id}",
        "op": "create",
        "fields": [
            {"name": "id", "before": "", "after": new_id, "changed": True},
            {"name": "title", "before": "", "after": "Printer jam", "changed": True},
            {"name": "status", "before": "", "after": "open", "changed": True},
        ],
        "changed": 3,
    }


def test_delete_shows_every_field_as_gone():
    change = _diff_of(_episode(), "drop_ticket", {"id": "t-17"})
    assert record_diff(change) == {
        "title": "desk.tickets/t-17",
        "op": "delete",
        "fields": [
            {"name": "id", "before": "t-17", "after": "", "changed": True},
            {"name": "title", "before": "VPN down", "after": "", "changed": True},
            {"name": "assignee", "before": "—", "after": "", "changed": True},
            {"name": "priority", "before": "low", "after": "", "changed": True},
        ],
        "changed": 4,
    }


def test_exogenous_update_marks_only_the_fields_that_changed():
    entry = {
        "turn": 1,
        "op": "update",
        "service": "calendar",
        "collection": "events",
        "id": "e1",
        "silent": True,
        "ok": True,
        "before": {"id": "e1", "start": "09:00", "room": "A"},
        "after": {"id": "e1", "start": "11:00", "room": "A"},
    }
    diff = record_diff(entry)
    assert [(f["name"], f["before"], f["after"], f["changed"]) for f in diff["fields"]] == [
        ("id", "e1", "e1", False),
        ("start", "09:00", "11:00", True),
        ("room", "A", "A", False),
    ]
    assert diff["changed"] == 1


def test_the_timeline_carries_the_update_diff_to_its_tool_call():
    episode = _episode()
    episode.call("assign", {"id": "t-17", "assignee": "dana@acme.test"})
    audit = [e.to_dict() for e in episode.audit_log]
    transcript = [
        {"role": "user", "content": "Give t-17 to Dana."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {
                        "name": "assign",
                        "arguments": '{"id": "t-17", "assignee": "dana@acme.test"}',
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "{}"},
    ]
    items = run_timeline(transcript=transcript, audit_log=audit, exogenous_log=[])
    (call,) = items[1]["calls"]
    assert [d["changed"] for d in call["diffs"]] == [1]
    assert call["diffs"][0]["fields"][0]["after"] == "dana@acme.test"


def _call(call_id: str) -> dict:
    return {"id": call_id, "function": {"name": "list_tickets", "arguments": "{}"}}


def test_turns_are_grouped_by_the_day_their_first_call_fell_on():
    transcript = [
        {"role": "user", "content": "Monday: sort the queue."},
        {"role": "assistant", "content": "", "tool_calls": [_call("c1")]},
        {"role": "tool", "tool_call_id": "c1", "content": "[]"},
        {"role": "assistant", "content": "Sorted."},
        {"role": "user", "content": "Thanks."},  # no call: stays on Monday
        {"role": "assistant", "content": "You're welcome."},
        {"role": "user", "content": "Wednesday: any news?"},
        {"role": "assistant", "content": "", "tool_calls": [_call("c2")]},
        {"role": "tool", "tool_call_id": "c2", "content": "[]"},
    ]
    audit_log = [
        {"seq": 1, "ok": True, "at": "2026-03-02T09:01:00Z"},
        {"seq": 2, "ok": True, "at": "2026-03-04T09:30:00Z"},
    ]
    items = run_timeline(transcript=transcript, audit_log=audit_log, exogenous_log=[])
    days = turn_days(items)
    assert [(d["day"], d["date"], [t["turn"] for t in d["turns"]]) for d in days] == [
        (1, "2026-03-02", [0, 1]),
        (2, "2026-03-04", [2]),
    ]
    assert [t["anchor"] for t in days[1]["turns"]] == ["turn-2"]


def test_a_run_without_calls_is_one_undated_day():
    transcript = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]
    days = turn_days(run_timeline(transcript=transcript, audit_log=[], exogenous_log=[]))
    assert days == [{"date": "", "turns": [{"turn": 0, "anchor": "turn-0"}], "day": 1}]
