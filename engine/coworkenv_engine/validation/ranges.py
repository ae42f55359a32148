"""Computed values stay in range: clock and turn times, time zones, grader weights.

The simulator advances a clock and sums weights; a spec must leave those computations
room (a clock starting on 9999-12-31 overflows the calendar; weights of 1e308 sum to
infinity), and every date-time must carry its UTC offset so that no computed value depends
on the time zone of the machine that validates or runs it.
"""

from __future__ import annotations

import math
import re
from datetime import datetime
from typing import Any

from ..problems import Problem, error, pointer
from ..spec_model import EnvironmentSpec

MAX_YEAR = 9000
MAX_WEIGHT = 1_000_000
_NAIVE_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?$")


def _parse(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None


def _time(out: list[Problem], ptr: str, text: str | None) -> datetime | None:
    if text is None:
        return None
    moment = _parse(text)
    if moment is None:
        return None
    if moment.tzinfo is None:
        out.append(
            error(
                "datetime_without_offset",
                ptr,
                f"'{text}' has no UTC offset: its moment depends on the machine's time zone.",
                f"Write it in UTC with a Z suffix (e.g. '{text[:19]}Z').",
            )
        )
        return None
    if moment.year > MAX_YEAR:
        out.append(
            error(
                "value_out_of_range",
                ptr,
                f"'{text}' is too close to the end of the calendar for the clock to advance.",
                f"Use a date before the year {MAX_YEAR}.",
            )
        )
        return None
    return moment


def range_problems(spec: EnvironmentSpec) -> list[Problem]:
    out: list[Problem] = []
    start = _time(out, "/clock/start", spec.clock.start)
    _naive_values(out, spec.services, ("services",))
    for k, task in enumerate(spec.tasks):
        _naive_values(out, task.records, ("tasks", k, "records"))
        previous = start
        for j, turn in enumerate(task.turns):
            ptr = pointer("tasks", k, "turns", j)
            moment = _time(out, ptr + "/time", turn.time)
            if moment is not None and previous is not None and moment < previous:
                out.append(
                    error(
                        "turn_time_before_clock",
                        ptr + "/time",
                        f"Turn {j} is set at {turn.time}, earlier than the clock already is "
                        f"({previous.isoformat().replace('+00:00', 'Z')}); the simulator "
                        "would ignore it.",
                        "Give turns times that increase, at or after the clock start.",
                    )
                )
            previous = moment or previous
            for u, up in enumerate(turn.updates):
                _naive_values(out, up.values, ("tasks", k, "turns", j, "updates", u, "values"))
        total = 0.0
        for g, grader in enumerate(task.graders):
            w = grader.weight
            if isinstance(w, (int, float)) and abs(w) > MAX_WEIGHT:
                out.append(
                    error(
                        "value_out_of_range",
                        pointer("tasks", k, "graders", g, "weight"),
                        f"Weight {w} is too large (scores are weighted shares).",
                        f"Use weights between 0 and {MAX_WEIGHT} (e.g. 1 or 2).",
                    )
                )
            elif isinstance(w, (int, float)):
                total += float(w)
        if not math.isfinite(total):  # pragma: no cover - each weight is bounded above
            out.append(
                error(
                    "value_out_of_range",
                    pointer("tasks", k, "graders"),
                    "The grader weights do not sum to a finite number.",
                    "Use small weights.",
                )
            )
    return out


def _naive_values(out: list[Problem], value: Any, path: tuple) -> None:
    """Date-time strings without an offset anywhere in records (iterative; bounded doc)."""
    stack = [(value, path)]
    while stack and len(out) < 200:
        v, p = stack.pop()
        if isinstance(v, str):
            if len(v) <= 32 and _NAIVE_DATETIME.match(v) and _parse(v) is not None:
                _time(out, pointer(*p), v)
        elif isinstance(v, dict):
            stack.extend((x, (*p, key)) for key, x in v.items())
        elif isinstance(v, list):
            stack.extend((x, (*p, i)) for i, x in enumerate(v))
