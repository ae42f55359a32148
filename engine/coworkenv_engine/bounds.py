"""Bounds on a spec document, enforced before anything recurses into it.

Two entry points, both iterative (no recursion over the document, so a 10,000-level
document is a problem, not a ``RecursionError``):

* ``loads_document(text)`` parses JSON text: the raw text is pre-scanned for size and
  nesting depth *before* ``json.loads`` recurses, and an object with the same key twice is
  refused (which one wins differs between parsers);
* ``document_problems(doc)`` checks an already-parsed value (from the API or the database):
  depth, node count, string length, lone surrogates, number of tasks / tools / records.
"""

from __future__ import annotations

import json
import math
import re
from itertools import accumulate
from typing import Any

from .problems import Problem, error, pointer

MAX_DOCUMENT_CHARS = 8_000_000
MAX_DEPTH = 48
MAX_NODES = 400_000
MAX_STRING_CHARS = 100_000
MAX_TASKS = 500
MAX_TOOLS = 128
MAX_RECORDS = 20_000
MAX_PROBLEMS = 20

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_BRACKETS = re.compile(r"[\[\]{}]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


class DocumentUnreadable(ValueError):
    """The text is not JSON at all (the CLI's exit 2)."""


class _Pairs(dict):
    """An object whose key list had duplicates (kept for the pointer walk)."""

    duplicates: tuple[str, ...] = ()


def _pairs_hook(pairs: list[tuple[str, Any]]) -> dict:
    out = _Pairs(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        dups = []
        for k, _ in pairs:
            if k in seen and k not in dups:
                dups.append(k)
            seen.add(k)
        out.duplicates = tuple(dups)
        return out
    return dict(pairs)


def text_depth(text: str) -> int:
    """Maximum bracket nesting of JSON text, ignoring brackets inside strings."""
    structure = _STRING.sub("", text)
    steps = (1 if c in "[{" else -1 for c in _BRACKETS.findall(structure))
    return max(accumulate(steps, initial=0))


def loads_document(text: str | bytes) -> tuple[Any, list[Problem]]:
    """Parse ``text``; problems (too big, too deep, duplicate keys) come back as data.

    Raises ``DocumentUnreadable`` when the text is not UTF-8 JSON at all.
    """
    if isinstance(text, bytes):
        if len(text) > 4 * MAX_DOCUMENT_CHARS:
            return None, [_too_large(len(text))]
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DocumentUnreadable(f"not UTF-8: {exc}") from None
    if len(text) > MAX_DOCUMENT_CHARS:
        return None, [_too_large(len(text))]
    depth = text_depth(text)
    if depth > MAX_DEPTH:
        return None, [_too_deep("", depth)]
    try:
        doc = json.loads(text, object_pairs_hook=_pairs_hook)
    except RecursionError:  # unreachable after the depth scan; kept as a clean refusal
        return None, [_too_deep("", depth)]
    except ValueError as exc:  # JSONDecodeError, or an int with too many digits
        raise DocumentUnreadable(str(exc)) from None
    return doc, document_problems(doc)


def _too_large(size: int) -> Problem:
    return error(
        "document_too_large",
        "",
        f"The document is {size} characters, over the limit of {MAX_DOCUMENT_CHARS}.",
        "Use fewer or shorter records and texts.",
    )


def _too_deep(ptr: str, depth: int) -> Problem:
    return error(
        "document_too_deep",
        ptr,
        f"The document nests {depth} levels deep, over the limit of {MAX_DEPTH}.",
        "Flatten the nested values (records and arguments are a few levels deep).",
    )


def document_problems(doc: Any) -> list[Problem]:
    """Bounds of a parsed document, found by an iterative walk that stops early."""
    problems: list[Problem] = []
    nodes = 0
    stack: list[tuple[Any, tuple, int]] = [(doc, (), 0)]
    while stack:
        value, path, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            problems.append(
                error(
                    "document_too_large",
                    "",
                    f"The document has more than {MAX_NODES} values.",
                    "Use fewer records and shorter lists.",
                )
            )
            break
        if depth > MAX_DEPTH:
            problems.append(_too_deep(pointer(*path[:MAX_DEPTH]), depth))
            break
        if isinstance(value, str):
            _string(problems, value, path)
        elif isinstance(value, dict):
            for k in getattr(value, "duplicates", ()):
                problems.append(
                    error(
                        "duplicate_key",
                        pointer(*path, k),
                        f"Key '{k[:80]}' appears twice in the same object.",
                        "Keep one value per key: parsers disagree on which one wins.",
                    )
                )
            for k, v in value.items():
                if isinstance(k, str):
                    _string(problems, k, path)
                stack.append((v, (*path, k), depth + 1))
        elif isinstance(value, list):
            for i, v in enumerate(value):
                stack.append((v, (*path, i), depth + 1))
        elif isinstance(value, float) and not math.isfinite(value):
            continue  # reported by the schema step with its pointer
        if len(problems) >= MAX_PROBLEMS:
            break
    if not problems and isinstance(doc, dict):
        _counts(problems, doc)
    return sorted(problems, key=lambda p: p.pointer)


def _string(problems: list[Problem], value: str, path: tuple) -> None:
    if len(value) > MAX_STRING_CHARS:
        problems.append(
            error(
                "string_too_long",
                pointer(*path),
                f"A string of {len(value)} characters, over the limit of {MAX_STRING_CHARS}.",
                "Shorten it.",
            )
        )
    elif _SURROGATE.search(value):
        problems.append(
            error(
                "string_not_unicode",
                pointer(*path),
                "A string holds a lone UTF-16 surrogate (not a Unicode character).",
                "Remove the stray \\ud800-\\udfff escape or write the character itself.",
            )
        )


def _counts(problems: list[Problem], doc: dict) -> None:
    for key, limit in (("tasks", MAX_TASKS), ("tools", MAX_TOOLS)):
        items = doc.get(key)
        if isinstance(items, list) and len(items) > limit:
            problems.append(
                error(
                    "too_many_items",
                    pointer(key),
                    f"{len(items)} {key}, over the limit of {limit}.",
                    f"Split the environment: at most {limit} {key}.",
                )
            )
    total = 0
    sources: list[tuple[tuple, Any]] = [(("services",), doc.get("services"))]
    tasks = doc.get("tasks")
    if isinstance(tasks, list):
        sources += [
            (("tasks", k, "records"), t.get("records"))
            for k, t in enumerate(tasks)
            if isinstance(t, dict)
        ]
    for base, services in sources:
        if not isinstance(services, dict):
            continue
        for cols in services.values():
            if isinstance(cols, dict):
                total += sum(len(r) for r in cols.values() if isinstance(r, list))
        if total > MAX_RECORDS:
            problems.append(
                error(
                    "too_many_items",
                    pointer(*base),
                    f"More than {MAX_RECORDS} records in all.",
                    f"Keep the records to what the tasks need (at most {MAX_RECORDS}).",
                )
            )
            return
