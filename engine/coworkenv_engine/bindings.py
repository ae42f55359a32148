"""The six generic operations a tool binds to, executed against a WorldState.

Placeholders: a value that is exactly ``"$param"`` takes the argument (an omitted optional
argument leaves the field out / unchanged), ``"$now"`` takes the simulated clock, ``"$$x"``
is the literal ``"$x"``; anything else is a fixed value. Only top-level values of
``values`` / ``where`` and the ``id`` / ``query`` / ``limit`` / ``merge`` slots are resolved.
"""

from __future__ import annotations

import copy
import json
import unicodedata
from dataclasses import dataclass
from typing import Any

from .spec_model import Binding
from .state import WorldState, json_size

DEFAULT_LIMIT = 50
MISSING = object()


class ToolError(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class OpContext:
    state: WorldState
    now: str
    id_counters: dict[tuple[str, str], int]
    max_record_bytes: int
    max_state_bytes: int


def placeholder_name(value: Any) -> str | None:
    """The parameter a value refers to (``"$to"`` -> ``"to"``), None for fixed values."""
    if isinstance(value, str) and value.startswith("$") and not value.startswith("$$"):
        name = value[1:]
        return None if name == "now" else name
    return None


_IMMUTABLE = frozenset({str, int, float, bool, type(None)})


def _copy(value: Any) -> Any:
    # Scalars are immutable: only lists and objects need a copy of their own.
    return value if type(value) in _IMMUTABLE else copy.deepcopy(value)


def resolve(value: Any, args: dict[str, Any], now: str) -> Any:
    if type(value) is str and value.startswith("$"):
        if value.startswith("$$"):
            return value[1:]
        name = value[1:]
        if name == "now":
            return now
        return _copy(args[name]) if name in args else MISSING
    return _copy(value)


def normalize_text(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _field_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return " ".join(_field_text(v) for v in value)
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False, default=str)


def _search_text(record: dict[str, Any], fields: tuple[str, ...]) -> str:
    return normalize_text(" ".join(_field_text(record.get(f)) for f in fields))


def _where(binding: Binding, args: dict[str, Any], now: str) -> dict[str, Any]:
    out = {}
    for field, raw in (binding.where or {}).items():
        value = resolve(raw, args, now)
        if value is not MISSING:
            out[field] = value
    return out


def _matches_where(record: dict[str, Any], where: dict[str, Any]) -> bool:
    for field, expected in where.items():
        actual = record.get(field, MISSING)
        if isinstance(actual, list) and not isinstance(expected, list):
            if expected not in actual:
                return False
        elif actual != expected or isinstance(actual, bool) != isinstance(expected, bool):
            return False
    return True


def _limit(binding: Binding, args: dict[str, Any]) -> int:
    raw = binding.limit
    if raw is None:
        return DEFAULT_LIMIT
    if isinstance(raw, int):
        return raw
    value = args.get(raw[1:], MISSING)
    if value is MISSING:
        return DEFAULT_LIMIT
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ToolError("bad_arguments", f"'{raw[1:]}' must be a positive integer")
    return min(value, 1000)


def _page(matched: list[dict[str, Any]], limit: int) -> dict[str, Any]:
    return {"results": matched[:limit], "total": len(matched)}


def _id_arg(binding: Binding, args: dict[str, Any], now: str) -> str:
    value = resolve(binding.id, args, now)
    if value is MISSING or not isinstance(value, str) or not value:
        raise ToolError("bad_arguments", "a record id (non-empty string) is required")
    return value


def _new_id(ctx: OpContext, binding: Binding) -> str:
    key = (binding.service, binding.collection)
    n = ctx.id_counters.get(key, 0)
    while True:
        n += 1
        candidate = f"{binding.collection}-{n}"
        if ctx.state.get(binding.service, binding.collection, candidate) is None:
            ctx.id_counters[key] = n
            return candidate


def _changes(binding: Binding, args: dict[str, Any], now: str) -> dict[str, Any]:
    changes: dict[str, Any] = {}
    for field, raw in (binding.values or {}).items():
        value = resolve(raw, args, now)
        if value is not MISSING:
            changes[field] = value
    if binding.merge:
        extra = args.get(binding.merge[1:], MISSING)
        if extra is not MISSING:
            if not isinstance(extra, dict):
                raise ToolError("bad_arguments", f"'{binding.merge[1:]}' must be an object")
            if "id" in extra:
                raise ToolError("bad_arguments", "the record id cannot be set or changed")
            changes.update(copy.deepcopy(extra))
    return changes


def _check_size(ctx: OpContext, size: int, delta: int) -> None:
    """``size``: the new record's JSON size; ``delta``: what the state's size would grow by."""
    if size > ctx.max_record_bytes:
        raise ToolError("state_limit", f"record too large ({size} bytes > {ctx.max_record_bytes})")
    if ctx.state.size_bytes + delta > ctx.max_state_bytes:
        raise ToolError("state_limit", "the service's storage is full")


Outcome = tuple[Any, list[dict[str, Any]]]


def _list(binding: Binding, args: dict[str, Any], ctx: OpContext) -> Outcome:
    where = _where(binding, args, ctx.now)
    records = ctx.state.records(binding.service, binding.collection)
    matched = [r for r in records if _matches_where(r, where)]
    return _page(matched, _limit(binding, args)), []


def _search(binding: Binding, args: dict[str, Any], ctx: OpContext) -> Outcome:
    query = resolve(binding.query, args, ctx.now)
    if query is MISSING:
        query = ""
    if not isinstance(query, str):
        raise ToolError("bad_arguments", "the search query must be a string")
    terms = normalize_text(query).split()
    where = _where(binding, args, ctx.now)
    fields = tuple(binding.fields or ())
    matched = []
    for r in ctx.state.records(binding.service, binding.collection):
        if where and not _matches_where(r, where):
            continue
        text = ctx.state.search_text(r, fields, _search_text)
        if all(t in text for t in terms):
            matched.append(r)
    return _page(matched, _limit(binding, args)), []


def _existing(binding: Binding, args: dict[str, Any], ctx: OpContext) -> tuple[str, dict]:
    record_id = _id_arg(binding, args, ctx.now)
    record = ctx.state.get(binding.service, binding.collection, record_id)
    if record is None:
        raise ToolError("not_found", f"no {binding.collection} record with id '{record_id}'")
    return record_id, record


def _get(binding: Binding, args: dict[str, Any], ctx: OpContext) -> Outcome:
    return _existing(binding, args, ctx)[1], []


def _create(binding: Binding, args: dict[str, Any], ctx: OpContext) -> Outcome:
    state, svc, col = ctx.state, binding.service, binding.collection
    record = _changes(binding, args, ctx.now)
    if "id" in record:
        if not isinstance(record["id"], str) or not record["id"]:
            raise ToolError("bad_arguments", "the record id must be a non-empty string")
        if state.get(svc, col, record["id"]) is not None:
            raise ToolError("conflict", f"a {col} record with id '{record['id']}' exists")
    else:
        record = {"id": _new_id(ctx, binding), **record}
    size = json_size(record)
    _check_size(ctx, size, size + 1)
    state.insert(svc, col, record)
    state.size_bytes += size + 1
    diff = {"op": "create", "service": svc, "collection": col, "id": record["id"], "after": record}
    return record, [diff]


def _update(binding: Binding, args: dict[str, Any], ctx: OpContext) -> Outcome:
    record_id, old = _existing(binding, args, ctx)
    changes = _changes(binding, args, ctx.now)
    changes.pop("id", None)
    changed = {
        k: {"before": old.get(k), "after": v}
        for k, v in changes.items()
        if k not in old or old[k] != v or type(old[k]) is not type(v)
    }
    if not changed:
        return old, []
    new = {**old, **changes}
    size = json_size(new)
    delta = size - json_size(old)
    _check_size(ctx, size, delta)
    ctx.state.replace(binding.service, binding.collection, new)
    ctx.state.size_bytes += delta
    diff = {
        "op": "update",
        "service": binding.service,
        "collection": binding.collection,
        "id": record_id,
        "changes": changed,
    }
    return new, [diff]


def _delete(binding: Binding, args: dict[str, Any], ctx: OpContext) -> Outcome:
    record_id, old = _existing(binding, args, ctx)
    ctx.state.remove(binding.service, binding.collection, record_id)
    ctx.state.size_bytes -= json_size(old) + 1
    diff = {
        "op": "delete",
        "service": binding.service,
        "collection": binding.collection,
        "id": record_id,
        "before": old,
    }
    return {"deleted": record_id}, [diff]


_OPERATIONS = {
    "list": _list,
    "search": _search,
    "get": _get,
    "create": _create,
    "update": _update,
    "delete": _delete,
}


def execute(binding: Binding, args: dict[str, Any], ctx: OpContext) -> Outcome:
    """Run one operation. Returns (content, diff); raises ToolError; never half-applies."""
    operation = _OPERATIONS.get(binding.op)
    if operation is None:
        raise ToolError("server_error", f"unsupported operation {binding.op!r}")
    return operation(binding, args, ctx)
