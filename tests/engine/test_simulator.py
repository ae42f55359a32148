import dataclasses
import json

import pytest

from coworkenv_engine.simulator import AuditEntry, Episode, Limits, ToolResult, base_state
from coworkenv_engine.spec import load_spec

from .helpers import mini_doc

EVENT = {
    "title": "X",
    "start": "2026-03-05T10:00:00Z",
    "end": "2026-03-05T11:00:00Z",
    "attendees": ["me@acme.test"],
}


def test_unknown_tool_is_an_error_result_and_audited(spec):
    ep = Episode(spec, "book")
    result = ep.call("launch_rockets", {})
    assert (result.ok, result.error_code) == (False, "unknown_tool")
    assert "list_events" in result.error_message
    assert ep.audit_log[0].tool == "launch_rockets" and not ep.audit_log[0].ok


@pytest.mark.parametrize(
    ("arguments", "needle"),
    [
        ({"title": "X"}, "required"),
        ({**EVENT, "start": "next tuesday"}, "date-time"),
        ({**EVENT, "attendees": "me"}, "array"),
        ("{not json", "not JSON"),
        ("[1, 2]", "object"),
        ([1, 2], "object"),
        ({**EVENT, "x": float("nan")}, "not JSON"),
        ({**EVENT, "x": object()}, "not JSON"),
    ],
)
def test_bad_arguments_are_error_results_that_change_nothing(spec, arguments, needle):
    ep = Episode(spec, "book")
    before = ep.state_hash()
    result = ep.call("create_event", arguments)
    assert (result.ok, result.error_code) == (False, "bad_arguments")
    assert needle in result.error_message
    assert ep.state_hash() == before
    json.dumps(ep.audit_log[0].to_dict())


def test_arguments_as_json_string_are_accepted(spec):
    ep = Episode(spec, "book")
    assert ep.call("create_event", json.dumps(EVENT)).ok
    assert ep.call("list_events", None).ok


def test_argument_size_is_bounded(spec):
    ep = Episode(spec, "book", limits=Limits(max_argument_chars=50))
    result = ep.call("create_event", {**EVENT, "title": "x" * 100})
    assert result.error_code == "bad_arguments" and "exceed" in result.error_message


def test_tool_result_message_content(spec):
    ep = Episode(spec, "book")
    ok = ep.call("get_event", {"event_id": "e1"})
    assert json.loads(ok.to_message_content())["title"] == "Dentist"
    err = ep.call("get_event", {"event_id": "zz"})
    assert json.loads(err.to_message_content()) == {
        "error": {"code": "not_found", "message": "no events record with id 'zz'"}
    }
    assert err.to_dict()["content"] is None and not err.retryable


def test_mutating_result_content_cannot_corrupt_state(spec):
    ep = Episode(spec, "book")
    content = ep.call("get_event", {"event_id": "e1"}).content
    content["title"] = "Hacked"
    assert ep.state["calendar"]["events"][0]["title"] == "Dentist"


def test_advance_turn_applies_updates_and_marks_only_loud_ones(doc):
    doc["tasks"][0]["turns"].append(
        {
            "updates": [
                {
                    "op": "create",
                    "service": "email",
                    "collection": "inbox",
                    "values": {
                        "id": "m9",
                        "from": "x@acme.test",
                        "to": "me@acme.test",
                        "date": "2026-03-03T09:00:00Z",
                        "subject": "Hi",
                        "body": ".",
                    },
                },
                {
                    "op": "delete",
                    "service": "calendar",
                    "collection": "events",
                    "id": "e1",
                    "notice": "The dentist cancelled.",
                },
            ],
            "time": "2026-03-03T09:00:00Z",
            "message": "Anything new?",
        }
    )
    ep = Episode(doc, "book")
    first = ep.advance_turn()
    assert (first.index, first.notices, first.text) == (0, (), first.message)
    second = ep.advance_turn()
    assert second.notices == ()  # the silent update is not announced
    assert ep.state["calendar"]["events"][0]["start"] == "2026-03-05T16:30:00Z"
    third = ep.advance_turn()
    assert third.notices == ("New record in email/inbox.", "The dentist cancelled.")
    assert third.text.startswith("[notice] New record in email/inbox.\n[notice] The dentist")
    assert ep.clock_iso() == "2026-03-03T09:00:00Z"
    assert ep.state["calendar"]["events"] == []
    assert ep.advance_turn() is None
    assert [e["ok"] for e in ep.exogenous_log] == [True, True, True]


def test_update_to_a_record_the_agent_deleted_is_skipped_not_raised(spec):
    ep = Episode(spec, "book")
    ep.advance_turn()
    assert ep.call("delete_event", {"event_id": "e1"}).ok
    assert ep.advance_turn().index == 1
    assert ep.exogenous_log[-1]["ok"] is False


def test_clock_is_deterministic_per_call(spec):
    ep = Episode(spec, "book")
    ep.call("list_events", {})
    ep.call("nope", {})
    assert [e.at for e in ep.audit_log] == ["2026-03-02T09:01:00Z", "2026-03-02T09:02:00Z"]


def test_faults_only_when_enabled_deterministic_and_stateless(doc):
    for tool in doc["tools"]:
        tool["faults"] = {"rate": 0.5, "kinds": ["rate_limit", "server_error", "timeout"]}

    def run(seed, faults=True):
        ep = Episode(doc, "book", seed, faults=faults)
        codes = []
        for i in range(30):
            before = ep.state_hash()
            result = ep.call("create_event", {**EVENT, "title": f"E{i}"})
            codes.append(result.error_code)
            if not result.ok:
                assert result.retryable and ep.state_hash() == before
                assert ep.audit_log[-1].fault == result.error_code
        return codes

    with_faults = run(0)
    assert set(with_faults) - {None} <= {"rate_limit", "server_error", "timeout"}
    assert 5 < sum(c is not None for c in with_faults) < 25
    assert run(0) == with_faults
    assert run(1) != with_faults
    assert run(0, faults=False) == [None] * 30


def test_timeout_fault_advances_the_clock(doc):
    doc["tools"][0]["faults"] = {"rate": 1.0, "kinds": ["timeout"]}
    ep = Episode(doc, "book")
    result = ep.call("list_events", {})
    assert result.error_code == "timeout"
    assert ep.audit_log[0].at == "2026-03-02T09:01:30Z"


def test_call_limit(spec):
    ep = Episode(spec, "book", limits=Limits(max_calls=3))
    results = [ep.call("list_events", {}) for _ in range(5)]
    assert [r.ok for r in results] == [True, True, True, False, False]
    assert results[-1].error_code == "call_limit"
    assert len(ep.audit_log) == 5


def test_state_and_record_size_limits(spec):
    ep = Episode(spec, "book", limits=Limits(max_record_bytes=300))
    big = ep.call("create_event", {**EVENT, "title": "x" * 400})
    assert big.error_code == "state_limit"
    full = Episode(spec, "book", limits=Limits(max_state_bytes=ep.state_bytes + 50))
    before = full.state_hash()
    assert full.call("create_event", EVENT).error_code == "state_limit"
    assert full.state_hash() == before


def test_result_size_is_truncated_with_a_marker(doc):
    doc["services"]["calendar"]["events"] += [
        {**EVENT, "id": f"x{i}", "title": "t" * 50} for i in range(100)
    ]
    ep = Episode(doc, "book", limits=Limits(max_result_chars=2000))
    result = ep.call("list_events", {})
    text = result.to_message_content()
    assert len(text) <= 2000
    assert result.content["total"] == 101
    assert "more results omitted" in result.content["truncated"]
    single = Episode(doc, "book", limits=Limits(max_result_chars=150))
    record = single.call("get_event", {"event_id": "x1"})
    assert "preview" in record.content and record.content["preview"].endswith("…[truncated]")


def test_reset_restores_the_initial_state_and_logs(spec):
    ep = Episode(spec, "book")
    initial = ep.state_hash()
    ep.advance_turn()
    ep.call("create_event", EVENT)
    ep.call("delete_event", {"event_id": "e1"})
    assert ep.state_hash() != initial
    ep.reset()
    assert ep.state_hash() == initial
    assert (ep.audit_log, ep.exogenous_log, ep.turn_index) == ([], [], -1)
    assert ep.call("create_event", EVENT).content["id"] == "events-1"


def test_reset_is_copy_on_write_not_a_deep_copy():
    doc = mini_doc()
    doc["services"]["calendar"]["events"] += [{**EVENT, "id": f"x{i}"} for i in range(10_000)]
    spec = load_spec(doc)
    base = base_state(spec, "book")
    ep = Episode(spec, "book")
    events = base.collections[("calendar", "events")].records
    # before any write the episode shares the base list itself
    assert ep.state["calendar"]["events"] is events
    ep.call("create_event", EVENT)
    assert ep.state["calendar"]["events"] is not events and len(events) == 10_001
    # untouched collections are still shared, and reset shares again
    assert ep.state["email"]["inbox"] is base.collections[("email", "inbox")].records
    ep.reset()
    assert ep.state["calendar"]["events"] is events
    assert base_state(spec, "book") is base  # built once per spec and task


def test_snapshot_views_are_stable_after_later_writes(spec):
    ep = Episode(spec, "book")
    ep.call("create_event", EVENT)
    view = ep.state
    frozen = json.dumps(view)
    ep.call("create_event", {**EVENT, "title": "Y"})
    ep.call("delete_event", {"event_id": "e1"})
    assert json.dumps(view) == frozen


def test_task_records_merge_over_environment_records(doc):
    doc["tasks"][0]["records"] = {
        "calendar": {
            "events": [{**EVENT, "id": "e1", "title": "Dentist (moved)"}, {**EVENT, "id": "t1"}]
        }
    }
    ep = Episode(doc, "book")
    assert [(e["id"], e["title"]) for e in ep.state["calendar"]["events"]] == [
        ("e1", "Dentist (moved)"),
        ("t1", "X"),
    ]
    assert doc["services"]["calendar"]["events"][0]["title"] == "Dentist"


def test_state_snapshot_is_a_deep_copy(spec):
    ep = Episode(spec, "book")
    snap = ep.state_snapshot()
    snap["calendar"]["events"][0]["title"] = "changed"
    assert ep.state["calendar"]["events"][0]["title"] == "Dentist"


def test_tool_result_repr_and_lazy_content():
    result = ToolResult(True, '{"a": 1}')
    assert result.content == {"a": 1} and "ok=True" in repr(result)


def test_episode_accepts_a_plain_document(doc):
    assert Episode(doc, "book").task.key == "book"


def test_malformed_calls_count_towards_the_call_limit():
    from coworkenv_engine.simulator import Episode, Limits
    from tests.engine.helpers import mini_doc

    doc = mini_doc()
    episode = Episode(doc, doc["tasks"][0]["key"], limits=Limits(max_calls=2))
    episode.advance_turn()
    assert episode.call("anything", "{not json").error_code == "bad_arguments"
    assert episode.call("anything", "[]").error_code == "bad_arguments"
    assert episode.call("anything", {}).error_code == "call_limit"


def test_audit_entries_equal_constructed_ones_and_stay_frozen(spec):
    ep = Episode(spec, "book", faults=False)
    ep.call("create_event", dict(EVENT))
    entry = ep.audit_log[0]
    fields = {f.name: getattr(entry, f.name) for f in dataclasses.fields(AuditEntry)}
    assert entry == AuditEntry(**fields)
    assert (entry.seq, entry.tool, entry.ok, entry.arguments) == (1, "create_event", True, EVENT)
    with pytest.raises(dataclasses.FrozenInstanceError):
        entry.ok = False


def test_arguments_are_the_episodes_own_copy(spec):
    ep = Episode(spec, "book", faults=False)
    args = {**EVENT, "attendees": ["me@acme.test"]}
    ep.call("create_event", args)
    args["attendees"].append("eve@evil.test")
    args["title"] = "changed"
    assert ep.audit_log[0].arguments == EVENT
    created = ep.audit_log[0].diff[0]["after"]
    assert (created["title"], created["attendees"]) == ("X", ["me@acme.test"])
    assert ep.audit_log[0].arguments["attendees"] is not created["attendees"]


def test_search_text_is_cached_per_record_and_follows_changes(doc):
    """A record's search text is computed once and shared by the task's episodes; an update
    replaces the record (a new object), so a search sees the new text at once."""
    doc["tasks"][0]["turns"][1]["updates"] = [
        {
            "op": "update",
            "service": "email",
            "collection": "inbox",
            "id": "m2",
            "values": {"subject": "Done", "body": "Rotated already."},
            "silent": True,
        }
    ]
    spec = load_spec(doc)

    def found(ep, query):
        return [r["id"] for r in ep.call("search_email", {"query": query}).content["results"]]

    first = Episode(spec, "book")
    first.advance_turn()
    assert found(first, "password expires") == ["m2"]
    cached = len(base_state(spec, "book").search_texts)
    assert cached >= 2
    first.advance_turn()
    assert found(first, "password") == []
    assert found(first, "rotated") == ["m2"]
    second = Episode(spec, "book")  # the base records again, their texts from the cache
    second.advance_turn()
    assert found(second, "password") == ["m2"]
    assert found(second, "rotated") == []
