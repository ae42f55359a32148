"""Copy-on-write world state.

The initial state of a task (environment records merged with task records) is built once
per spec and shared. An episode starts with references to those lists; the first write to
a collection copies that one list and its id index. Records are never mutated in place —
an update stores a new dict — so sharing record objects between episodes, snapshots and the
audit log is safe. Reset is therefore O(number of collections), not O(number of records).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Key = tuple[str, str]


@dataclass(slots=True)
class Collection:
    records: list[dict[str, Any]]
    index: dict[str, int]

    @classmethod
    def of(cls, records: list[dict[str, Any]]) -> Collection:
        return cls(records, {r["id"]: i for i, r in enumerate(records)})


@dataclass(frozen=True)
class BaseState:
    collections: dict[Key, Collection]
    order: tuple[Key, ...]
    size_bytes: int
    # (id(record), fields) -> (record, its normalised search text), shared by the episodes
    # of this task: records are never changed in place, so a record's text never changes.
    search_texts: dict[tuple[int, tuple[str, ...]], tuple[dict[str, Any], str]] = field(
        default_factory=dict, compare=False, repr=False
    )


MAX_SEARCH_TEXTS = 20_000  # cached texts per task's base state (then computed each time)


_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str).encode


def json_size(value: Any) -> int:
    return len(_COMPACT(value))


def build_base(
    services: dict[str, dict[str, list[dict[str, Any]]]],
    overlay: dict[str, dict[str, list[dict[str, Any]]]] | None = None,
) -> BaseState:
    """Merge ``overlay`` (task records) over ``services``: same id replaces, new ids append.

    Overlay collections that ``services`` lacks are ignored (validation reports them).
    """
    cols: dict[Key, Collection] = {}
    order: list[Key] = []
    for service, collections in services.items():
        for name, records in collections.items():
            key = (service, name)
            merged = list(records)
            extra = (overlay or {}).get(service, {}).get(name)
            if extra:
                index = {r["id"]: i for i, r in enumerate(merged)}
                for record in extra:
                    if record["id"] in index:
                        merged[index[record["id"]]] = record
                    else:
                        index[record["id"]] = len(merged)
                        merged.append(record)
            cols[key] = Collection.of(merged)
            order.append(key)
    size = json_size({f"{s}.{c}": cols[(s, c)].records for s, c in order})
    return BaseState(cols, tuple(order), size)


class WorldState:
    def __init__(self, base: BaseState):
        self._base = base
        self.reset()

    def reset(self) -> None:
        self._cols: dict[Key, Collection] = dict(self._base.collections)
        self._owned: set[Key] = set()
        self.size_bytes = self._base.size_bytes

    def has(self, service: str, collection: str) -> bool:
        return (service, collection) in self._cols

    def records(self, service: str, collection: str) -> list[dict[str, Any]]:
        return self._cols[(service, collection)].records

    def get(self, service: str, collection: str, record_id: str) -> dict[str, Any] | None:
        col = self._cols[(service, collection)]
        pos = col.index.get(record_id)
        return None if pos is None else col.records[pos]

    def _own(self, key: Key) -> Collection:
        if key not in self._owned:
            col = self._cols[key]
            self._cols[key] = Collection(list(col.records), dict(col.index))
            self._owned.add(key)
        return self._cols[key]

    def insert(self, service: str, collection: str, record: dict[str, Any]) -> None:
        col = self._own((service, collection))
        col.index[record["id"]] = len(col.records)
        col.records.append(record)

    def replace(self, service: str, collection: str, record: dict[str, Any]) -> None:
        col = self._own((service, collection))
        col.records[col.index[record["id"]]] = record

    def remove(self, service: str, collection: str, record_id: str) -> None:
        col = self._own((service, collection))
        pos = col.index.pop(record_id)
        del col.records[pos]
        for r in col.records[pos:]:
            col.index[r["id"]] -= 1

    def view(self) -> dict[str, dict[str, list[dict[str, Any]]]]:
        """A stable nested view: later writes copy before touching any list it holds."""
        self._owned.clear()
        out: dict[str, dict[str, list[dict[str, Any]]]] = {}
        for service, name in self._base.order:
            out.setdefault(service, {})[name] = self._cols[(service, name)].records
        return out

    def search_text(
        self,
        record: dict[str, Any],
        fields: tuple[str, ...],
        make: Callable[[dict[str, Any], tuple[str, ...]], str],
    ) -> str:
        """``make(record, fields)``, computed once per record object and fields."""
        cache = self._base.search_texts
        key = (id(record), fields)
        hit = cache.get(key)
        if hit is not None and hit[0] is record:
            return hit[1]
        text = make(record, fields)
        if len(cache) < MAX_SEARCH_TEXTS:
            cache[key] = (record, text)  # the record kept alive: its id is not reused
        return text

    def record_count(self) -> int:
        return sum(len(c.records) for c in self._cols.values())
