"""A task's horizon from its spec: how many turns, reference calls and calendar days.

Plain functions over the spec's JSON (no database), shared by the evaluation by horizon
(apps.runs.evaluation) and the coverage page (apps.environments.capability_selectors).
"""

from __future__ import annotations

from datetime import date, datetime


def _day(text: object) -> date | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00")).date()
    except ValueError:
        return None


def task_horizon(turns: list | None, clock: dict | None) -> dict:
    """A task's horizon from its spec: ``turns`` (how many user turns) and ``days`` (calendar
    days from the clock's start to the last turn's time, both counted; 1 without times)."""
    turns = turns if isinstance(turns, list) else []
    start = _day((clock or {}).get("start")) if isinstance(clock, dict) else None
    days = [d for d in (_day(t.get("time")) for t in turns if isinstance(t, dict)) if d]
    first = start or (min(days) if days else None)
    span = (max(days) - first).days + 1 if days and first else 1
    return {"turns": len(turns), "days": max(1, span)}


def reference_calls(reference_solution: list | None) -> int:
    """How many tool calls the reference solution makes."""
    steps = reference_solution if isinstance(reference_solution, list) else []
    return sum(
        len(step.get("calls") or [])
        for step in steps
        if isinstance(step, dict) and isinstance(step.get("calls") or [], list)
    )


# Buckets of the distribution: (label, lowest value in it).
TURN_BUCKETS = (("1 turn", 1), ("2 turns", 2), ("3-4 turns", 3), ("5-8 turns", 5), ("9+ turns", 9))
DAY_BUCKETS = (("1 day", 1), ("2 days", 2), ("3-5 days", 3), ("6-10 days", 6), ("11+ days", 11))
CALL_BUCKETS = (
    ("0-4 calls", 0),
    ("5-9 calls", 5),
    ("10-19 calls", 10),
    ("20-39 calls", 20),
    ("40-60 calls", 40),
    ("61+ calls", 61),
)
UNKNOWN = "(unknown)"


def bucket(value: int | None, buckets: tuple[tuple[str, int], ...]) -> str:
    if value is None or value < buckets[0][1]:
        return UNKNOWN
    return [label for label, low in buckets if value >= low][-1]
