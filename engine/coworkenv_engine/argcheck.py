"""Tool-argument checks compiled once per tool schema.

``compile_check(schema)`` turns a JSON Schema built from the keywords tool parameters use
(``type``, ``properties``, ``required``, ``additionalProperties``, ``items``, ``enum`` and
``const`` of scalars, ``minimum``/``maximum`` and their exclusive forms,
``minLength``/``maxLength``, ``minItems``/``maxItems``, ``format``, and annotations) into a
plain predicate with draft 2020-12 semantics — the same answers as ``jsonschema``'s
``is_valid`` with the engine's format checker, in a fraction of the time. Any other keyword
(``$ref``, ``pattern``, ``anyOf``, ``prefixItems``, …) returns None and the caller uses the
``jsonschema`` validator. The predicate only says valid or not: the error messages of an
invalid call still come from ``jsonschema``, so they are the same as ever.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .formats import FORMAT_CHECKER

Check = Callable[[Any], bool]

_ANNOTATIONS = frozenset(
    {"title", "description", "default", "examples", "$comment", "deprecated", "readOnly"}
    | {"writeOnly"}
)
_KEYWORDS = _ANNOTATIONS | {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "format",
}


def _is_integer(v: Any) -> bool:
    t = type(v)
    return t is int or (t is float and v.is_integer())


_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: type(v) is str,
    "object": lambda v: type(v) is dict,
    "array": lambda v: type(v) is list,
    "boolean": lambda v: type(v) is bool,
    "null": lambda v: v is None,
    "number": lambda v: type(v) is int or type(v) is float,
    "integer": _is_integer,
}


def _is_number(v: Any) -> bool:
    return type(v) is int or type(v) is float


class _Unsupported(Exception):
    pass


def _scalar_equal(a: Any, b: Any) -> bool:
    # jsonschema's equality: booleans only equal booleans; 1 == 1.0.
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


def _type_checks(schema: dict) -> list[Check]:
    kind = schema.get("type")
    if kind is None:
        return []
    names = [kind] if isinstance(kind, str) else kind
    if not isinstance(names, list) or not all(n in _TYPES for n in names):
        raise _Unsupported
    tests = [_TYPES[n] for n in names]
    if len(tests) == 1:
        return [tests[0]]
    return [lambda v, tests=tests: any(t(v) for t in tests)]


def _value_checks(schema: dict) -> list[Check]:
    checks: list[Check] = []
    for key in ("enum", "const"):
        if key not in schema:
            continue
        allowed = schema["enum"] if key == "enum" else [schema["const"]]
        if not isinstance(allowed, list) or not all(
            a is None or type(a) in (str, int, float, bool) for a in allowed
        ):
            raise _Unsupported
        checks.append(
            lambda v, allowed=allowed: (
                (v is None or type(v) in (str, int, float, bool))
                and any(_scalar_equal(v, a) for a in allowed)
            )
        )
    return checks


_BOUNDS = (
    ("minimum", lambda v, b: v >= b),
    ("maximum", lambda v, b: v <= b),
    ("exclusiveMinimum", lambda v, b: v > b),
    ("exclusiveMaximum", lambda v, b: v < b),
)


def _bound_checks(schema: dict) -> list[Check]:
    bounds = []
    for key, test in _BOUNDS:
        if key in schema:
            bound = schema[key]
            if not _is_number(bound):
                raise _Unsupported
            bounds.append((test, bound))
    if not bounds:
        return []
    return [lambda v, bounds=bounds: not _is_number(v) or all(t(v, b) for t, b in bounds)]


def _length_checks(schema: dict) -> list[Check]:
    checks: list[Check] = []
    for lo_key, hi_key, typ in (("minLength", "maxLength", str), ("minItems", "maxItems", list)):
        lo, hi = schema.get(lo_key), schema.get(hi_key)
        for b in (lo, hi):
            if b is not None and type(b) is not int:
                raise _Unsupported
        if lo is not None or hi is not None:
            lo_v, hi_v = lo or 0, hi if hi is not None else float("inf")
            checks.append(
                lambda v, typ=typ, lo_v=lo_v, hi_v=hi_v: (
                    type(v) is not typ or lo_v <= len(v) <= hi_v
                )
            )
    return checks


def _format_checks(schema: dict) -> list[Check]:
    fmt = schema.get("format")
    if fmt is None:
        return []
    if not isinstance(fmt, str):
        raise _Unsupported
    if fmt in FORMAT_CHECKER.checkers:
        return [lambda v, fmt=fmt: FORMAT_CHECKER.conforms(v, fmt)]
    return []


def _add_object_check(schema: dict, checks: list[Check]) -> None:
    """Append the check of an object's properties; it absorbs a lone leading ``object``
    type check (a non-object fails right there)."""
    props = schema.get("properties")
    required = schema.get("required")
    extra = schema.get("additionalProperties", True)
    if props is None and required is None and extra is True:
        return
    if props is not None and type(props) is not dict:
        raise _Unsupported
    if required is not None and (
        type(required) is not list or not all(type(r) is str for r in required)
    ):
        raise _Unsupported
    compiled = {name: _compile(sub) for name, sub in (props or {}).items()}
    need = tuple(required or ())
    rest = None if extra is True else _compile(extra)

    strict = bool(checks) and checks[-1] is _TYPES["object"] and schema.get("type") is not None
    if strict:
        checks.pop()

    def check_object(v: Any, compiled=compiled, need=need, rest=rest, strict=strict) -> bool:
        if type(v) is not dict:
            return not strict
        for name in need:
            if name not in v:
                return False
        for name, value in v.items():
            sub = compiled.get(name)
            if sub is None:
                if rest is not None and not rest(value):
                    return False
            elif not sub(value):
                return False
        return True

    checks.append(check_object)


def _compile(schema: Any) -> Check:
    if schema is True:
        return lambda v: True
    if schema is False:
        return lambda v: False
    if type(schema) is not dict:
        raise _Unsupported
    if not schema.keys() <= _KEYWORDS:
        raise _Unsupported
    checks: list[Check] = [
        *_type_checks(schema),
        *_value_checks(schema),
        *_bound_checks(schema),
        *_length_checks(schema),
        *_format_checks(schema),
    ]
    if "items" in schema:
        item = _compile(schema["items"])
        checks.append(lambda v, item=item: type(v) is not list or all(item(x) for x in v))
    _add_object_check(schema, checks)

    if not checks:
        return lambda v: True
    if len(checks) == 1:
        return checks[0]
    checks_t = tuple(checks)

    def check_all(v: Any) -> bool:
        for c in checks_t:  # noqa: SIM110 (a loop: no generator built per call)
            if not c(v):
                return False
        return True

    return check_all


def compile_check(schema: Any) -> Check | None:
    """A predicate equal to draft 2020-12 validity of ``schema``, or None when the schema
    uses a keyword outside the supported subset."""
    try:
        return _compile(schema)
    except _Unsupported:
        return None
