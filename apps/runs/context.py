"""Context management: the request sent to the agent's model fits its context window.

The engine's conversation (``PolicyView.messages``) is never changed: it is the trajectory,
what graders and the viewer see. Only the *request* is shortened when the endpoint says how
long its context is (``ModelEndpoint.context_tokens``) and the conversation would not fit in
it with room left for the answer (``max_tokens``). Two strategies:

- ``drop_tool_results``: the content of tool results older than the last N is replaced by a
  one-line notice (the call and its id stay, so the request keeps OpenAI's pairing of
  tool calls and results); if that is not enough, whole earlier turns are left out, oldest
  first, behind one notice;
- ``summarize``: the turns before the current one are replaced by a summary written by a
  model (the agent's own, or the endpoint the run names for it), made once and extended as
  more turns are compacted; then the first strategy, if the current turn alone is too long.

Tokens are estimated from characters, calibrated by what the endpoint reported for the last
request (``prompt_tokens`` over the characters sent); before any answer, 3.5 characters a
token, which overestimates English and JSON for today's tokenizers. Every compaction is an
event the run stores (``Run.context_events``) and the viewer shows.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from apps.core.exceptions import ApplicationError
from apps.llm.models import ContextStrategy

DEFAULT_CHARS_PER_TOKEN = 3.5
SAFETY_MARGIN = 0.9  # use at most 90% of the budget by the estimate
OMITTED_TOOL_RESULT = (
    "[tool result omitted to fit the context window: {chars} characters; "
    "call the tool again if you need it]"
)
OMITTED_TURNS = (
    "[{turns} earlier turn{plural} of this conversation omitted to fit the context window]"
)
SUMMARY_HEADER = "[Summary of the earlier conversation, written to fit the context window]\n"


class ContextOverflow(ApplicationError):
    """The current turn alone does not fit the endpoint's context window."""


def _chars(messages: list[dict], tools: list[dict] | None) -> int:
    text = json.dumps(messages, ensure_ascii=False, separators=(",", ":"))
    if tools:
        text += json.dumps(tools, ensure_ascii=False, separators=(",", ":"))
    return len(text)


@dataclass
class TokenEstimator:
    """Characters to tokens, learned from the endpoint's own counts."""

    chars_per_token: float = DEFAULT_CHARS_PER_TOKEN

    def estimate(self, messages: list[dict], tools: list[dict] | None = None) -> int:
        return math.ceil(_chars(messages, tools) / self.chars_per_token)

    def observe(self, messages: list[dict], tools: list[dict] | None, prompt_tokens: int) -> None:
        if prompt_tokens > 0:
            # never trust a ratio that would let a request grow past what was measured
            self.chars_per_token = min(
                DEFAULT_CHARS_PER_TOKEN * 2, max(1.0, _chars(messages, tools) / prompt_tokens)
            )


def _turn_starts(messages: list[dict]) -> list[int]:
    """Indexes of the user messages: each starts a turn."""
    return [i for i, message in enumerate(messages) if message.get("role") == "user"]


@dataclass
class ContextManager:
    """Shortens requests for one run; ``events`` is what it did, in order."""

    context_tokens: int
    max_output_tokens: int
    strategy: str = ContextStrategy.DROP_TOOL_RESULTS
    keep_tool_results: int = 4
    summarize: Callable[[list[dict]], str] | None = None
    estimator: TokenEstimator = field(default_factory=TokenEstimator)
    events: list[dict] = field(default_factory=list)
    _summary: str = ""
    _summarized_upto: int = 0  # messages[1:_summarized_upto] are in the summary

    @property
    def budget(self) -> int:
        return max(0, math.floor((self.context_tokens - self.max_output_tokens) * SAFETY_MARGIN))

    def fit(self, messages: list[dict], tools: list[dict] | None, *, call: int) -> list[dict]:
        """The messages to send for request number ``call`` (counted from 1)."""
        before = self.estimator.estimate(messages, tools)
        if before <= self.budget:
            return messages
        event: dict = {"call": call, "strategy": self.strategy, "tokens_before": before}
        request = list(messages)
        if self.strategy == ContextStrategy.SUMMARIZE and self.summarize is not None:
            request = self._summarized(request, event)
        if self.estimator.estimate(request, tools) > self.budget:
            request = self._without_old_tool_results(request, tools, event)
        if self.estimator.estimate(request, tools) > self.budget:
            request = self._without_old_turns(request, tools, event)
        after = self.estimator.estimate(request, tools)
        event["tokens_after"] = after
        event["budget"] = self.budget
        self.events.append(event)
        if after > self.budget:
            raise ContextOverflow(
                f"The conversation needs about {after:,} tokens even after compaction, but "
                f"the endpoint's context of {self.context_tokens:,} tokens leaves "
                f"{self.budget:,} for the request: raise its context length or lower its "
                "max tokens."
            )
        return request

    def _summarized(self, messages: list[dict], event: dict) -> list[dict]:
        starts = _turn_starts(messages)
        if len(starts) < 2:
            return messages  # one turn: nothing earlier to summarize
        current = starts[-1]
        if current > self._summarized_upto:
            # the summary so far, then what happened since, summarized together
            head = max(1, self._summarized_upto)
            earlier = messages[head:current]
            if self._summary:
                earlier = [{"role": "user", "content": SUMMARY_HEADER + self._summary}, *earlier]
            self._summary = self.summarize(earlier).strip()
            event["summarized_messages"] = current - head
            event["summary"] = self._summary
            self._summarized_upto = current
        system = messages[:1] if messages and messages[0].get("role") == "system" else []
        summary = {"role": "user", "content": SUMMARY_HEADER + self._summary}
        return [*system, summary, *messages[self._summarized_upto :]]

    def _without_old_tool_results(
        self, messages: list[dict], tools: list[dict] | None, event: dict
    ) -> list[dict]:
        request = list(messages)
        tool_indexes = [i for i, m in enumerate(request) if m.get("role") == "tool"]
        older = tool_indexes[: max(0, len(tool_indexes) - self.keep_tool_results)]
        dropped = 0
        for index in older:
            if self.estimator.estimate(request, tools) <= self.budget:
                break
            content = request[index].get("content")
            if isinstance(content, str) and content.startswith("[tool result omitted"):
                continue
            size = len(content) if isinstance(content, str) else len(json.dumps(content))
            request[index] = {
                **request[index],
                "content": OMITTED_TOOL_RESULT.format(chars=f"{size:,}"),
            }
            dropped += 1
        if dropped:
            event["dropped_tool_results"] = event.get("dropped_tool_results", 0) + dropped
        return request

    def _without_old_turns(
        self, messages: list[dict], tools: list[dict] | None, event: dict
    ) -> list[dict]:
        """Leave out whole turns (a user message up to the next one, so tool calls stay with
        their results), oldest first, until the request fits or only the current turn is
        left."""
        system = messages[:1] if messages and messages[0].get("role") == "system" else []
        body = messages[len(system) :]
        starts = _turn_starts(body)
        for dropped in range(1, len(starts)):
            candidate = [
                *system,
                {"role": "user", "content": _omitted_turns(dropped)},
                *body[starts[dropped] :],
            ]
            if (
                dropped == len(starts) - 1
                or self.estimator.estimate(candidate, tools) <= self.budget
            ):
                event["dropped_turns"] = dropped
                return candidate
        return messages


def _omitted_turns(count: int) -> str:
    return OMITTED_TURNS.format(turns=count, plural="" if count == 1 else "s")


SUMMARY_SYSTEM = """You compress a conversation between a user and an AI assistant at work, so
that the assistant can go on without the full text. Keep every fact it may need later: names,
ids, dates and times, amounts, what the user asked for, what the assistant did with which tool
and what came back, decisions, promises and open requests. Leave out pleasantries. Write plain
text, at most {words} words."""


def summary_request(messages: list[dict], *, words: int = 300, max_chars: int = 2_000) -> list:
    """The request that asks a model to summarize ``messages`` (tool results cut to
    ``max_chars`` each, so that the request itself stays small)."""
    lines = []
    for message in messages:
        role = message.get("role")
        content = message.get("content")
        if not isinstance(content, str):
            content = json.dumps(content, ensure_ascii=False) if content else ""
        if len(content) > max_chars:
            content = content[:max_chars] + " …"
        if role == "assistant" and message.get("tool_calls"):
            calls = ", ".join(
                f"{c['function']['name']}({c['function']['arguments']})"
                for c in message["tool_calls"]
            )
            content = f"{content}\n[called {calls}]".strip()
        if content:
            lines.append(f"{(role or '?').upper()}: {content}")
    return [
        {"role": "system", "content": SUMMARY_SYSTEM.format(words=words)},
        {"role": "user", "content": "\n\n".join(lines) or "(nothing)"},
    ]
