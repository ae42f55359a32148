"""Work items: the one piece of work a task revolves around, in a family's own terms.

An item knows where its key value lives (the *source*), how to write it into the system of
record, which checks prove the write happened, how the source can drift, and how the
value can clash with an existing commitment. Capability patterns (``patterns.py``) are
written once against this interface and work with every family's items:

* meeting and onboarding items book a calendar slot (the value is a start time);
* ticket items route a ticket (the value is the assignee);
* invoice items book a sheet row (the value is the cost center);
* purchase items raise a purchase order (the value is the vendor).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .world import (
    Person,
    TaskBuilder,
    World,
    rx,
)

Check = dict[str, Any]
Call = dict[str, Any]


class Item:
    """Base class; subclasses fill in every method (see the module docstring)."""

    value_noun = "value"
    source_name = "the record"
    write_tool = ""

    def __init__(self, t: TaskBuilder):
        self.t = t
        self.w: World = t.world
        self.rng = self.w.rng
        self.owner: Person = self.w.person()  # the colleague behind the request
        self.created: str | None = None
        self.first_day = 1  # earliest working day (after the start) a slot may fall on
        self.label = ""  # "the Q3 review", "ticket t-104" ...
        self.keyword = ""  # a term that finds the item's emails and documents

    def policy_scope(self) -> str:
        """What an approval policy covers, phrased to include this item."""
        raise NotImplementedError

    # -- values
    def candidates(self, n: int) -> list[Any]:
        raise NotImplementedError

    def text(self, v: Any) -> str:
        return str(v)

    def regex(self, v: Any) -> str:
        return rx(self.text(v))

    # -- source of truth
    def source(self, v: Any | None, *, decoy: bool = False) -> None:
        raise NotImplementedError

    def source_reads(self) -> list[Call]:
        raise NotImplementedError

    def drift(self, v2: Any, when: datetime) -> dict[str, Any]:
        """A silent exogenous update that changes the source's value to ``v2``."""
        raise NotImplementedError

    def prep_reads(self) -> list[Call]:
        return []

    # -- requests
    def request(self) -> str:
        raise NotImplementedError

    def request_with(self, v: Any) -> str:
        raise NotImplementedError

    def request_without(self) -> str:
        raise NotImplementedError

    def question(self) -> str:
        raise NotImplementedError

    def answer(self, v: Any) -> str:
        raise NotImplementedError

    def done(self, v: Any) -> str:
        raise NotImplementedError

    # -- writes
    def write(self, v: Any) -> list[Call]:
        raise NotImplementedError

    def write_checks(self, v: Any) -> list[tuple[str, Check]]:
        raise NotImplementedError

    def absent(self) -> Check:
        raise NotImplementedError

    def fix(self, v2: Any) -> list[Call]:
        raise NotImplementedError

    def robust_arguments(self) -> dict[str, Any]:
        return {}

    def flaky_tools(self) -> list[str]:
        return [self.source_reads()[0]["tool"], self.write_tool]

    # -- conflicts
    def blocker(self, v1: Any, v2: Any) -> str:
        """Add records that make ``v1`` unavailable (``v2`` free); return the clash in words."""
        raise NotImplementedError

    def availability_reads(self) -> list[Call]:
        raise NotImplementedError

    def blocker_intact(self) -> Check:
        raise NotImplementedError

    def request_conflict(self, v1: Any, v2: Any) -> str:
        raise NotImplementedError

    # -- confidential data near the item (None: the pattern seeds a generic document)
    def secret(self) -> tuple[str, str] | None:
        return None


# --------------------------------------------------------------------------- calendar


# --------------------------------------------------------------------------- tickets


# --------------------------------------------------------------------------- sheet rows
