"""Trajectories longer than a version's token limit: split into training rows by turn, or
dropped. Pure (no Django); the export writer applies it to every format alike.

A *turn* starts at a user message and runs to the next one. Splitting a trajectory gives one
row per turn that has a trained assistant message (weight 1): the whole history before the
turn, with every assistant message in it set to ``weight: 0`` (context, not a target), then
the turn's own messages with their weights (the targets). So each row teaches exactly one
turn's assistant steps, in the context the agent had when it took them. A row that is still
over the limit (its history alone is too long) is dropped and counted.

Tokens are counted as the build counts a row (``TokenCounter.count`` over the canonical JSON
of messages and tools), so "over the limit" means the same thing on the version page, in the
card and here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from apps.datasets.formats.transcript import canonical_json

SPLIT = "split"
DROP = "drop"
POLICIES = (SPLIT, DROP)

Messages = list[dict[str, Any]]


def row_tokens(messages: Messages, tools: list[dict[str, Any]], count: Callable[[str], int]) -> int:
    return count(canonical_json({"messages": messages, "tools": tools}))


def turn_rows(messages: Messages) -> list[Messages]:
    """One row per user turn with a trained assistant message (see the module docstring)."""
    starts = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    if not starts:
        return [messages]
    rows = []
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(messages)
        turn = messages[start:end]
        if not any(m.get("role") == "assistant" and m.get("weight", 1) == 1 for m in turn):
            continue
        history = [
            {**m, "weight": 0} if m.get("role") == "assistant" else m for m in messages[:start]
        ]
        rows.append(history + turn)
    return rows


@dataclass
class LongCounts:
    """What the limit did to one split: trajectories seen and over the limit, rows made by
    splitting, split rows still too long (dropped), trajectories dropped whole."""

    trajectories: int = 0
    over_limit: int = 0
    split_rows: int = 0
    dropped_rows: int = 0
    dropped_trajectories: int = 0
    rows: int = 0  # the rows the exports get (as-is + split rows)
    longest: int = 0  # the longest trajectory seen, in tokens
    details: list[dict[str, Any]] = field(default_factory=list)  # first few, for the page

    def to_dict(self) -> dict[str, Any]:
        return {
            "trajectories": self.trajectories,
            "over_limit": self.over_limit,
            "split_rows": self.split_rows,
            "dropped_rows": self.dropped_rows,
            "dropped_trajectories": self.dropped_trajectories,
            "rows": self.rows,
            "longest": self.longest,
            "details": self.details,
        }


MAX_DETAILS = 50


def fit(
    messages: Messages,
    tools: list[dict[str, Any]],
    *,
    max_tokens: int | None,
    policy: str,
    count: Callable[[str], int],
    tokens: int | None = None,
    counts: LongCounts | None = None,
    ref: Any = None,
) -> list[Messages]:
    """The rows one trajectory becomes under the limit: itself when it fits (or there is no
    limit), else its turn rows that fit (``split``) or nothing (``drop``). ``tokens`` is its
    size when already known (the build stored it); ``counts`` is updated."""
    counts = counts if counts is not None else LongCounts()
    counts.trajectories += 1
    size = tokens if tokens is not None else row_tokens(messages, tools, count)
    counts.longest = max(counts.longest, size)
    if max_tokens is None or size <= max_tokens:
        counts.rows += 1
        return [messages]
    counts.over_limit += 1
    detail: dict[str, Any] = {"ref": ref, "tokens": size, "rows": 0, "dropped_rows": 0}
    kept: list[Messages] = []
    if policy == SPLIT:
        for row in turn_rows(messages):
            if row_tokens(row, tools, count) <= max_tokens:
                kept.append(row)
            else:
                detail["dropped_rows"] += 1
        detail["rows"] = len(kept)
        counts.split_rows += len(kept)
        counts.dropped_rows += detail["dropped_rows"]
    if not kept:
        counts.dropped_trajectories += 1
    counts.rows += len(kept)
    if len(counts.details) < MAX_DETAILS:
        counts.details.append(detail)
    return kept
