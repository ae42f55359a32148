"""One gate for what a request may bring into the database: storable text, bounded JSON.

PostgreSQL refuses a NUL character (U+0000) in ``text`` and ``jsonb`` values, and a lone
UTF-16 surrogate (U+D800 to U+DFFF, which JSON can spell ``"\\ud800"``) cannot be encoded as
UTF-8 at all. Python's ``json`` turns both escapes into ``str`` values without complaint, so
every text that reaches the database passes through here first:

- ``text_fault`` says what is wrong with one string (or ``None``);
- ``json_check`` walks a parsed JSON value (keys too) and raises ``UnsafeInput`` with the
  JSON pointer of the first bad string, or when it nests deeper than ``MAX_JSON_DEPTH``;
- ``json_loads`` is the one parser for JSON text from outside: ``json.loads`` without NaN or
  Infinity, then ``json_check``.

The API's JSON parser, the middleware that screens query strings and form posts, and the
spec import paths all call these. Pure functions; no Django.
"""

import json
import re
from typing import Any

# Deep enough for any spec (a grader check nests combinators; a tool's parameters nest JSON
# Schema), shallow enough that no recursive walker downstream comes near Python's limit.
MAX_JSON_DEPTH = 64

# Bounds of integers a request may give: ids are 64-bit (BigAutoField), seeds and counters
# fit PostgreSQL's 32-bit ``integer``. A value past them is a 400, never a database error.
ID_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1

_SURROGATE = re.compile("[\ud800-\udfff]")


class UnsafeInput(ValueError):
    """Input the database cannot store, or JSON nested too deeply; ``pointer`` locates it."""

    def __init__(self, message: str, pointer: str = "", *, code: str = "text_not_storable"):
        super().__init__(message)
        self.message = message
        self.pointer = pointer
        self.code = code  # "text_not_storable" or "json_too_deep"


def text_fault(text: str) -> str | None:
    """Why ``text`` cannot be stored, or ``None`` when it can."""
    if "\x00" in text:
        return "contains a NUL character (\\u0000), which cannot be stored"
    found = _SURROGATE.search(text)
    if found:
        return (
            f"contains a lone UTF-16 surrogate (\\u{ord(found.group()):04x}), which is not "
            "valid Unicode text"
        )
    return None


def _escape(part) -> str:
    return str(part).replace("~", "~0").replace("/", "~1")


# A reply names where the bad input is, but never echoes a huge key or name whole.
_SHOWN = 200


def _shown(text: str) -> str:
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "…"


def _pointer(path: tuple) -> str:
    return _shown("".join(f"/{_escape(part)}" for part in path))


def json_check(value: Any, *, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Raise UnsafeInput for the first unstorable string (key or value), or for nesting
    deeper than ``max_depth`` containers. Iterative: any depth is safe to check."""
    stack: list[tuple[Any, tuple, int]] = [(value, (), 0)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, str):
            fault = text_fault(item)
            if fault:
                where = f" at {_pointer(path)}" if path else ""
                raise UnsafeInput(f"A text value{where} {fault}.", _pointer(path))
        elif isinstance(item, (dict, list)):
            if depth >= max_depth:
                raise UnsafeInput(
                    f"The JSON nests deeper than {max_depth} levels.",
                    _pointer(path),
                    code="json_too_deep",
                )
            if isinstance(item, dict):
                for key, child in item.items():
                    if isinstance(key, str) and text_fault(key):
                        raise UnsafeInput(
                            f"A key at {_pointer(path) or 'the top level'} {text_fault(key)}.",
                            _pointer(path),
                        )
                    stack.append((child, (*path, key), depth + 1))
            else:
                stack.extend((child, (*path, index), depth + 1) for index, child in enumerate(item))


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable(value: Any) -> Any:
    """A copy of a JSON-like value whose strings (and keys) hold no NUL and no lone
    surrogate: each becomes U+FFFD, the replacement character. For text that is data from
    elsewhere (a model's answer) and must be kept rather than refused."""
    if isinstance(value, str):
        return _UNSTORABLE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {storable(key): storable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [storable(item) for item in value]
    return value


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a JSON value")


def json_loads(text: str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Parse JSON text from outside. Raises ``json.JSONDecodeError`` for bad syntax,
    ``ValueError`` for NaN/Infinity or a key repeated in one object (which value wins differs
    between parsers) and ``UnsafeInput`` for unstorable text or deep nesting."""
    try:
        value = json.loads(
            text, parse_constant=_refuse_constant, object_pairs_hook=_refuse_duplicate_keys
        )
    except RecursionError:
        raise UnsafeInput(
            f"The JSON nests deeper than {max_depth} levels.", code="json_too_deep"
        ) from None
    json_check(value, max_depth=max_depth)
    return value


def _refuse_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict:
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        key = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise ValueError(f"key {key!r} appears twice in one object (parsers disagree which wins)")
    return value


def parse_id(value) -> int | None:
    """``value`` (a str from an address, or an int) as an object id, or ``None``.

    Only ASCII digits: ``str.isdigit()`` is true for "²", which ``int()`` refuses. Only up to
    ``ID_MAX``: a larger number cannot be any row's id."""
    text = str(value)
    if not (text.isascii() and text.isdigit()):
        return None
    number = int(text)
    return number if number <= ID_MAX else None


def is_id(value) -> bool:
    return parse_id(value) is not None


def query_fault(pairs) -> tuple[str, str] | None:
    """``(what, fault)`` for the first unstorable name or value among ``(name, value)`` pairs."""
    for name, value in pairs:
        fault = text_fault(name)
        if fault:
            return "A parameter name", fault
        fault = text_fault(value) if isinstance(value, str) else None
        if fault:
            return f"The value of {_shown(name)!r}", fault
    return None
