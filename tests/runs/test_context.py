"""Context management (apps.runs.context): requests shortened to fit the model's window,
with the conversation itself untouched. Pure functions: no database, no server."""

from __future__ import annotations

import json

import pytest

from apps.llm.models import ContextStrategy
from apps.runs.context import (
    OMITTED_TOOL_RESULT,
    SUMMARY_HEADER,
    ContextManager,
    ContextOverflow,
    TokenEstimator,
    summary_request,
)

SYSTEM = {"role": "system", "content": "You help."}
TOOLS = [{"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}]


def turn(n: int, *, results: int = 1, size: int = 400) -> list[dict]:
    """One turn: a user message, an assistant call per result, each result ``size`` chars,
    and the assistant's reply."""
    messages = [{"role": "user", "content": f"request {n}"}]
    for r in range(results):
        call_id = f"c{n}-{r}"
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "read", "arguments": "{}"},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call_id, "content": "x" * size})
    messages.append({"role": "assistant", "content": f"done {n}"})
    return messages


def manager(budget_tokens: int, **kwargs) -> ContextManager:
    # budget = floor((context - max_output) * 0.9): pick the context that gives this budget
    context = int(budget_tokens / 0.9) + 1 + 100
    made = ContextManager(context_tokens=context, max_output_tokens=100, **kwargs)
    assert made.budget == budget_tokens
    return made


def tokens(messages, tools=TOOLS) -> int:
    return TokenEstimator().estimate(messages, tools)


def pairing_is_kept(messages: list[dict]) -> bool:
    called = [c["id"] for m in messages for c in m.get("tool_calls") or []]
    answered = [m["tool_call_id"] for m in messages if m.get("role") == "tool"]
    return called == answered


def test_a_request_that_fits_is_sent_whole_and_nothing_is_recorded():
    messages = [SYSTEM, *turn(0)]
    context = manager(tokens(messages) + 1)
    assert context.fit(messages, TOOLS, call=1) is messages
    assert context.events == []


def test_old_tool_results_are_left_out_first_and_the_last_ones_kept_whole():
    messages = [SYSTEM, *turn(0, results=3), *turn(1, results=3)]
    # each result left out saves about 85 tokens: three must go
    budget = tokens(messages) - 200
    context = manager(budget, keep_tool_results=2)

    request = context.fit(messages, TOOLS, call=7)

    contents = [m["content"] for m in request if m["role"] == "tool"]
    omitted = OMITTED_TOOL_RESULT.format(chars="400")
    # oldest first, just as many as needed; the last two are never touched
    assert contents == [omitted, omitted, omitted, "x" * 400, "x" * 400, "x" * 400]
    assert pairing_is_kept(request)
    assert len(request) == len(messages)
    assert tokens(request) <= budget
    assert context.events == [
        {
            "call": 7,
            "strategy": ContextStrategy.DROP_TOOL_RESULTS,
            "tokens_before": tokens(messages),
            "dropped_tool_results": 3,
            "tokens_after": tokens(request),
            "budget": budget,
        }
    ]
    # the conversation itself is untouched
    assert [m["content"] for m in messages if m["role"] == "tool"] == ["x" * 400] * 6


def test_whole_earlier_turns_go_next_oldest_first_with_a_notice():
    messages = [SYSTEM, *turn(0, size=2000), *turn(1, size=2000), *turn(2, size=100)]
    current = turn(2, size=100)
    notice = "[2 earlier turns of this conversation omitted to fit the context window]"
    expected = [SYSTEM, {"role": "user", "content": notice}, *current]
    budget = tokens(expected) + 2
    context = manager(budget, keep_tool_results=1)

    request = context.fit(messages, TOOLS, call=3)

    # old results went first (not enough), then the two earlier turns; the current is whole
    assert request == expected
    assert context.events[0]["dropped_tool_results"] == 2
    assert tokens(request) <= budget
    assert context.events[0]["dropped_turns"] == 2


def test_summarize_replaces_earlier_turns_once_per_turn_and_extends_the_summary():
    calls = []

    def summarize(messages):
        calls.append(messages)
        return f"summary {len(calls)}"

    first, second, third = turn(0, size=3000), turn(1, size=50), turn(2, size=50)
    budget = tokens([SYSTEM, {"role": "user", "content": SUMMARY_HEADER + "summary 1"}, *second])
    context = manager(budget, strategy=ContextStrategy.SUMMARIZE, summarize=summarize)

    in_turn_1 = [SYSTEM, *first, *second[:1]]
    request = context.fit(in_turn_1, TOOLS, call=4)
    assert calls == [first]
    assert request == [SYSTEM, {"role": "user", "content": SUMMARY_HEADER + "summary 1"}, second[0]]

    # the same turn goes on: the summary is reused, not written again
    later = [SYSTEM, *first, *second[:3]]
    assert context.fit(later, TOOLS, call=5)[1:3] == [
        {"role": "user", "content": SUMMARY_HEADER + "summary 1"},
        second[0],
    ]
    assert len(calls) == 1

    # a new turn: the old summary and the turn since are summarized together
    in_turn_2 = [SYSTEM, *first, *second, *third[:1]]
    request = context.fit(in_turn_2, TOOLS, call=6)
    assert calls[1] == [{"role": "user", "content": SUMMARY_HEADER + "summary 1"}, *second]
    assert request == [SYSTEM, {"role": "user", "content": SUMMARY_HEADER + "summary 2"}, third[0]]
    assert [e.get("summarized_messages") for e in context.events] == [len(first), None, len(second)]
    assert [e.get("summary") for e in context.events] == ["summary 1", None, "summary 2"]


def test_a_turn_too_long_on_its_own_is_a_clear_error():
    messages = [SYSTEM, {"role": "user", "content": "y" * 5000}]
    context = manager(100)
    with pytest.raises(
        ContextOverflow, match=r"context of [\d,]+ tokens leaves 100 for the request"
    ):
        context.fit(messages, TOOLS, call=1)
    assert context.events[0]["tokens_after"] > 100


def test_the_estimate_learns_the_endpoints_own_count():
    messages = [SYSTEM, *turn(0)]
    estimator = TokenEstimator()
    chars = len(json.dumps(messages, separators=(",", ":"))) + len(
        json.dumps(TOOLS, separators=(",", ":"))
    )
    estimator.observe(messages, TOOLS, prompt_tokens=chars // 2)
    assert estimator.estimate(messages, TOOLS) in (chars // (chars / (chars // 2)), chars // 2 + 1)
    estimator.observe(messages, TOOLS, prompt_tokens=0)  # no usage reported: keep what we had
    assert round(estimator.chars_per_token, 3) == round(chars / (chars // 2), 3)
    estimator.observe(messages, TOOLS, prompt_tokens=1)  # absurd: capped
    assert estimator.chars_per_token == 7.0


def test_the_summary_request_cuts_long_tool_results_and_names_the_calls():
    request = summary_request(turn(0, size=5000), max_chars=100)
    assert request[0]["role"] == "system"
    text = request[1]["content"]
    assert "USER: request 0" in text
    assert "[called read({})]" in text
    assert "TOOL: " + "x" * 100 + " …" in text
    assert "x" * 101 not in text
