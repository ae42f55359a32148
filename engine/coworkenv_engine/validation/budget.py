"""The wall-clock budget of one validation: a backstop behind the deterministic caps.

Step, size and mutant caps (bounds.py, bounded_query.py, faults.py) bound the work of
every run, but a machine under load, a slow judge or many mid-sized tasks can still add up.
``validate_spec`` takes a time budget (``DEFAULT_TIME_BUDGET_S`` unless told otherwise),
turns it into a ``Deadline`` and passes it down through dynamic validation; every replay,
fault seed, trivial agent, adversary and mutant asks it first. Past the deadline the
validation stops with ``validation_time_budget_exceeded`` at the task it was validating:
an error (nothing after that point is certified), never a traceback.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ..problems import Problem, error, pointer

#: generous: the samples and template environments validate in well under a second
DEFAULT_TIME_BUDGET_S = 60.0


class OutOfTime(Exception):
    """Raised by ``Deadline.check`` once the budget is spent; caught by the validator."""

    def __init__(self, what: str):
        super().__init__(what)
        self.what = what


class Deadline:
    """A point in (monotonic) time; ``None`` seconds means no deadline."""

    def __init__(self, seconds: float | None, clock: Callable[[], float] = time.monotonic):
        self.seconds = seconds
        self.clock = clock
        self.at = None if seconds is None else clock() + max(0.0, float(seconds))

    def expired(self) -> bool:
        return self.at is not None and self.clock() >= self.at

    def check(self, what: str) -> None:
        """Raise ``OutOfTime(what)`` when the budget is spent before ``what`` starts."""
        if self.expired():
            raise OutOfTime(what)


def as_deadline(budget: float | Deadline | None) -> Deadline:
    return budget if isinstance(budget, Deadline) else Deadline(budget)


def out_of_time_problem(deadline: Deadline, k: int | None, task_key: str, what: str) -> Problem:
    where = pointer("tasks", k) if k is not None else ""
    seconds = "no" if deadline.seconds is None else f"{deadline.seconds:g} s"
    task = f" while validating task '{task_key}'" if task_key else ""
    return error(
        "validation_time_budget_exceeded",
        where,
        f"Validation ran out of its time budget ({seconds}){task}, before {what}; nothing "
        "from there on was checked.",
        "Make the task cheaper to replay: fewer state-changing reference calls per task "
        "(split a long task in two), fewer and smaller records, lower fault rates, fewer "
        "judge graders. If the spec is as intended, validate with a larger budget "
        "(--time-budget, VALIDATION_TIME_BUDGET_S).",
    )
