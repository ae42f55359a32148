"""Near-duplicates and leak keys on hand-written transcripts (``formats.similarity``)."""

import json

from apps.datasets.formats import normalize_messages
from apps.datasets.formats.similarity import (
    collapse_retries,
    leak_keys,
    mask_ids_dates,
    mask_names_numbers,
    masked_signature,
    near_duplicate_reason,
    near_signature,
    retry_signature,
)


def _call(call_id, name, arguments):
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
        ],
    }


def _result(call_id, content):
    return {"role": "tool", "tool_call_id": call_id, "content": json.dumps(content)}


TIMEOUT = {"error": {"code": "timeout", "message": "the request timed out after 30 s"}}
NOT_FOUND = {"error": {"code": "not_found", "message": "no tickets record with id 't-9'"}}


def clean_run():
    """Search, comment (record comments-1 at 09:02), reply."""
    return normalize_messages(
        [
            {"role": "system", "content": "You are a support agent."},
            {"role": "user", "content": "Please handle ticket t-101."},
            _call("call_1", "search_articles", {"query": "duplicate charge"}),
            _result("call_1", {"results": [{"id": "kb-12", "title": "Refunds"}]}),
            _call("call_2", "add_comment", {"ticket_id": "t-101", "body": "Refund form."}),
            _result("call_2", {"id": "comments-1", "at": "2026-03-02T09:02:00Z"}),
            {"role": "assistant", "content": "Replied on t-101 with the refund form from KB-12."},
        ]
    )


def retried_run():
    """The same, but the search timed out once and was retried: the comment became
    comments-2 at 09:03 (the failed call took an id and a minute)."""
    return normalize_messages(
        [
            {"role": "system", "content": "You are a support agent."},
            {"role": "user", "content": "Please handle ticket t-101."},
            _call("call_1", "search_articles", {"query": "duplicate charge"}),
            _result("call_1", TIMEOUT),
            _call("call_2", "search_articles", {"query": "duplicate charge"}),
            _result("call_2", {"results": [{"id": "kb-12", "title": "Refunds"}]}),
            _call("call_3", "add_comment", {"ticket_id": "t-101", "body": "Refund form."}),
            _result("call_3", {"id": "comments-2", "at": "2026-03-02T09:03:00Z"}),
            {"role": "assistant", "content": "Replied on t-101 with the refund form from KB-12."},
        ]
    )


def test_collapse_retries_drops_the_faulted_call_and_its_result():
    collapsed = collapse_retries(retried_run())
    assert [m["role"] for m in collapsed] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert [m["tool_calls"][0]["id"] for m in collapsed if m.get("tool_calls")] == [
        "call_2",
        "call_3",
    ]
    assert json.loads(collapsed[3]["content"])["results"][0]["id"] == "kb-12"
    assert collapse_retries(clean_run()) == clean_run()


def test_a_failure_that_is_the_agents_own_is_not_collapsed():
    messages = normalize_messages(
        [
            {"role": "user", "content": "Close t-9."},
            _call("call_1", "get_ticket", {"ticket_id": "t-9"}),
            _result("call_1", NOT_FOUND),
            {"role": "assistant", "content": "There is no ticket t-9."},
        ]
    )
    assert collapse_retries(messages) == messages


def test_a_parallel_step_keeps_its_answered_calls():
    step = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "x", "arguments": "{}"}},
            {"id": "b", "type": "function", "function": {"name": "y", "arguments": "{}"}},
        ],
    }
    messages = normalize_messages(
        [{"role": "user", "content": "go"}, step, _result("a", TIMEOUT), _result("b", {"ok": 1})]
    )
    collapsed = collapse_retries(messages)
    assert [c["id"] for c in collapsed[1]["tool_calls"]] == ["b"]
    assert [m.get("tool_call_id") for m in collapsed[2:]] == ["b"]


def test_masks():
    assert mask_ids_dates(
        "t-101 comments-2 call_3 FIN-22 at 2026-03-02T09:03:00Z on 2026-03-05"
    ) == ("<id> <id> <id> <id> at <date> on <date>")
    assert mask_ids_dates("deadbeef12 and 123e4567-e89b-12d3-a456-426614174000") == (
        "<id> and <id>"
    )
    # Times, plain numbers and words with a hyphen stay (they are content, not ids).
    assert mask_ids_dates("16:00 for 42,000 at tier2-oncall, Q3") == (
        "16:00 for 42,000 at tier2-oncall, Q3"
    )
    assert mask_names_numbers("Booked Dana Kim at 16:00 for 3 people; told dana@acme.test.") == (
        "<name> <name> <name> at <n> for <n> people; told <email>."
    )


def test_a_retried_run_is_a_near_duplicate_of_the_clean_one():
    clean, retried = clean_run(), retried_run()
    assert near_signature(clean) == near_signature(retried)
    # Neither normalisation alone is enough: the retry shifted the comment's id and time.
    assert retry_signature(clean) != retry_signature(retried)
    assert masked_signature(clean) != masked_signature(retried)
    why = near_duplicate_reason(
        (retry_signature(clean), masked_signature(clean)),
        (retry_signature(retried), masked_signature(retried)),
    )
    assert why == (
        "the same once retries after injected faults are collapsed and ids and dates masked"
    )


def test_the_reason_names_the_one_normalisation_that_was_needed():
    clean = clean_run()
    other_ids = json.loads(json.dumps(clean).replace("comments-1", "comments-7"))
    assert near_signature(other_ids) == near_signature(clean)
    assert (
        near_duplicate_reason(
            (retry_signature(clean), masked_signature(clean)),
            (retry_signature(other_ids), masked_signature(other_ids)),
        )
        == "the same once ids and dates are masked"
    )
    assert near_duplicate_reason(("r", "m1"), ("r", "m2")) == (
        "the same once retries after injected faults are collapsed"
    )


def test_different_work_is_not_a_near_duplicate():
    clean = clean_run()
    other_reply = json.loads(json.dumps(clean))
    other_reply[-1]["content"] = "Replied on t-101; the refund arrives in 5-7 business days."
    assert near_signature(other_reply) != near_signature(clean)
    excluded = json.loads(json.dumps(clean))
    excluded[-1]["weight"] = 0  # a turn excluded from training is another example
    assert near_signature(excluded) != near_signature(clean)


def test_leak_keys_mask_names_and_numbers():
    messages = normalize_messages(
        [
            {"role": "user", "content": "Book the Q3 review with Dana for Thursday."},
            {
                "role": "assistant",
                "content": "Booked the Q3 review with Dana on Thursday at 16:00.",
            },
            {"role": "assistant", "content": "Done."},
        ]
    )
    assert leak_keys(messages) == {
        "prompt:<name> the <name><n> review with <name> for <name>.",
        "reply:<name> the <name><n> review with <name> on <name> at <n>.",
    }
    twin = normalize_messages(
        [
            {"role": "user", "content": "Book the Q4 review with Omar for Monday."},
            {"role": "assistant", "content": "Booked the Q4 review with Omar on Monday at 10:30."},
        ]
    )
    assert leak_keys(twin) == leak_keys(messages)
