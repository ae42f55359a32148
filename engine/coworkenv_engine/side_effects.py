"""Collateral writes: what a run changed that the reference solution does not touch.

The ``side_effects`` check compares the records an agent created, changed or deleted (from
the audit log's diffs — reading is free, and exogenous updates are not the agent's doing)
with the *reference footprint*, the same diffs from a fault-free replay of the reference
solution. A change is collateral unless

* it creates a record in a collection where the reference creates as many records (creates
  are counted per collection: created ids depend on call order),
* it updates a record the reference updates, touching only fields the reference touches,
  or updates/deletes a record the reference deletes,
* it changes a record the agent itself created in this run (that record is the create),
* or an author's ``allow`` entry admits it (``{"service", "collection", "op", "id",
  "fields", "max"}``, every key but ``service`` optional; ``max`` caps how many changes the
  entry admits).

``services`` (``"svc"`` or ``"svc.collection"``, default: everything) and ``ignore`` (same
form) scope what the check watches. With ``at_turn: n`` both sides stop after turn ``n``,
so a check at turn 0 of a clarification task fails an agent that writes before asking.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Change:
    """One record's net change in a run (several calls on a record fold into one)."""

    op: str  # "create" | "update" | "delete"
    service: str
    collection: str
    id: str
    fields: tuple[str, ...] = ()  # update: the fields changed
    turn: int = 0  # the turn of the first call that touched the record

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "op": self.op,
            "service": self.service,
            "collection": self.collection,
            "id": self.id,
            "turn": self.turn,
        }
        if self.op == "update":
            out["fields"] = list(self.fields)
        return out


def net_changes(calls: Iterable[Any]) -> list[Change]:
    """Fold the diffs of successful calls into one change per record, in first-touch order.

    ``calls`` are ``checks.Call`` objects (anything with ``ok``, ``turn`` and ``diff``).
    A record created and then deleted in the same run leaves no change.
    """
    order: list[tuple[str, str, str]] = []
    created: set[tuple[str, str, str]] = set()
    deleted: set[tuple[str, str, str]] = set()
    fields: dict[tuple[str, str, str], set[str]] = {}
    turns: dict[tuple[str, str, str], int] = {}
    for call in calls:
        if not call.ok:
            continue
        for d in call.diff or ():
            if not isinstance(d, dict):
                continue
            key = (str(d.get("service")), str(d.get("collection")), str(d.get("id")))
            if key not in turns:
                turns[key] = call.turn
                order.append(key)
            op = d.get("op")
            if op == "create":
                created.add(key)
                deleted.discard(key)
            elif op == "update":
                fields.setdefault(key, set()).update((d.get("changes") or {}).keys())
            elif op == "delete":
                deleted.add(key)
    out = []
    for key in order:
        if key in created:
            if key in deleted:
                continue
            out.append(Change("create", *key, turn=turns[key]))
        elif key in deleted:
            out.append(Change("delete", *key, turn=turns[key]))
        elif fields.get(key):
            out.append(Change("update", *key, fields=tuple(sorted(fields[key])), turn=turns[key]))
    return out


@dataclass(frozen=True)
class Footprint:
    """The reference solution's net changes (fault-free replay)."""

    changes: tuple[Change, ...] = ()

    def until(self, turn: int | None) -> Footprint:
        if turn is None:
            return self
        return Footprint(tuple(c for c in self.changes if c.turn <= turn))

    def to_dict(self) -> dict[str, Any]:
        return {"changes": [c.to_dict() for c in self.changes]}


# --------------------------------------------------------------------------- the check


def _watched(change: Change, services: list[str] | None, ignore: list[str]) -> bool:
    names = (change.service, f"{change.service}.{change.collection}")
    if any(n in ignore for n in names):
        return False
    return services is None or any(n in services for n in names)


def _admits(entry: dict[str, Any], change: Change) -> bool:
    if entry.get("service") != change.service:
        return False
    if "collection" in entry and entry["collection"] != change.collection:
        return False
    if "op" in entry and entry["op"] != change.op:
        return False
    if "id" in entry and entry["id"] != change.id:
        return False
    if "fields" in entry and change.op == "update":
        return set(change.fields) <= set(entry["fields"])
    return True


def collateral(
    changes: list[Change], reference: Footprint, check: dict[str, Any]
) -> tuple[list[Change], list[Change]]:
    """(collateral changes, changes admitted by the reference or an ``allow`` entry)."""
    services = check.get("services")
    ignore = list(check.get("ignore") or [])
    allow = [dict(e) for e in check.get("allow") or [] if isinstance(e, dict)]
    budget = [e.get("max") for e in allow]
    ref_creates: dict[tuple[str, str], int] = {}
    ref_updates: dict[tuple[str, str, str], set[str]] = {}
    ref_deletes: set[tuple[str, str, str]] = set()
    for c in reference.changes:
        if c.op == "create":
            coll = (c.service, c.collection)
            ref_creates[coll] = ref_creates.get(coll, 0) + 1
        elif c.op == "update":
            ref_updates.setdefault((c.service, c.collection, c.id), set()).update(c.fields)
        else:
            ref_deletes.add((c.service, c.collection, c.id))
    bad: list[Change] = []
    ok: list[Change] = []
    for change in changes:
        if not _watched(change, services, ignore):
            continue
        key = (change.service, change.collection, change.id)
        coll = (change.service, change.collection)
        admitted = False
        if change.op == "create" and ref_creates.get(coll, 0) > 0:
            ref_creates[coll] -= 1
            admitted = True
        elif change.op == "update" and (
            key in ref_deletes or set(change.fields) <= ref_updates.get(key, set())
        ):
            admitted = key in ref_deletes or key in ref_updates
        elif change.op == "delete" and key in ref_deletes:
            admitted = True
        if not admitted:
            for i, entry in enumerate(allow):
                if _admits(entry, change) and (budget[i] is None or budget[i] > 0):
                    if budget[i] is not None:
                        budget[i] -= 1
                    admitted = True
                    break
        (ok if admitted else bad).append(change)
    return bad, ok
