"""One walk over a spec's nested values (dicts and lists), shared by the checks."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def leaves(value: Any, path: tuple = ()) -> Iterator[tuple[tuple, Any]]:
    """``(path, v)`` of every value inside ``value`` that is neither a dict nor a list,
    in document order."""
    stack = [(value, path)]
    while stack:
        v, p = stack.pop()
        if isinstance(v, dict):
            stack.extend(reversed([(x, (*p, key)) for key, x in v.items()]))
        elif isinstance(v, list):
            stack.extend(reversed([(x, (*p, i)) for i, x in enumerate(v)]))
        else:
            yield p, v


def strings(value: Any, path: tuple = ()) -> Iterator[tuple[tuple, str]]:
    return ((p, v) for p, v in leaves(value, path) if isinstance(v, str))


def numbers(value: Any, path: tuple = ()) -> Iterator[tuple[tuple, int | float]]:
    return (
        (p, v)
        for p, v in leaves(value, path)
        if isinstance(v, (int, float)) and not isinstance(v, bool)
    )


def texts(value: Any) -> Iterator[str]:
    """Every string inside ``value``."""
    return (v for _, v in strings(value))
