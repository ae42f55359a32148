"""Regular expressions from LLM-written specs, guarded against catastrophic backtracking.

A pattern is refused when it is long, uses back-references or lookarounds, nests an
unbounded quantifier inside another quantifier, repeats a multi-character alternation
without bound, or has many unbounded quantifiers. Matching runs on RE2 (``google-re2``, a
linear-time engine) when it is installed, so no admitted pattern can backtrack on a long
text; without it, ``re`` runs on a clipped subject, which bounds the polynomial cases
(``.*x``) that remain. The admitted patterns are the same either way (RE2 has no
lookarounds or back-references, hence their refusal).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

try:
    import re2 as _re2  # google-re2: linear-time matching
except ImportError:  # pragma: no cover - the engine works without it, on clipped subjects
    _re2 = None

try:  # Python 3.11+: the parser moved to re._parser
    from re import _parser as sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover
    import sre_parse  # type: ignore[no-redef]

MAX_PATTERN_CHARS = 300
MAX_SUBJECT_CHARS = 10_000
MAX_UNBOUNDED = 3
_BIG = 50

_REPEATS = {sre_parse.MAX_REPEAT, sre_parse.MIN_REPEAT}
_POSSESSIVE = getattr(sre_parse, "POSSESSIVE_REPEAT", None)


class UnsafeRegex(ValueError):
    pass


def _children(op, av):
    if op in _REPEATS or op == _POSSESSIVE:
        return [av[2]]
    if op == sre_parse.SUBPATTERN:
        return [av[-1]]
    if op == sre_parse.BRANCH:
        return list(av[1])
    if op in (sre_parse.ASSERT, sre_parse.ASSERT_NOT):
        return [av[1]]
    if op == getattr(sre_parse, "ATOMIC_GROUP", None):
        return [av]
    if op == sre_parse.GROUPREF_EXISTS:
        return [b for b in av[1:] if b is not None]
    return []


def _contains(sub, ops, *, only_unbounded: bool = False, only_variable: bool = False) -> bool:
    for op, av in sub:
        if op in ops:
            if op not in _REPEATS:
                return True
            if only_unbounded and av[1] > _BIG:
                return True
            if only_variable and av[0] != av[1]:
                return True
            if not only_unbounded and not only_variable:
                return True
        kids = _children(op, av)
        if any(
            _contains(c, ops, only_unbounded=only_unbounded, only_variable=only_variable)
            for c in kids
        ):
            return True
    return False


def _walk(sub, counter: list[int]) -> None:
    for op, av in sub:
        if op == sre_parse.GROUPREF or op == sre_parse.GROUPREF_EXISTS:
            raise UnsafeRegex("back-references are not allowed")
        if op in (sre_parse.ASSERT, sre_parse.ASSERT_NOT):
            raise UnsafeRegex("lookarounds ((?=, (?!, (?<=, (?<!) are not allowed")
        if op == _POSSESSIVE or op == getattr(sre_parse, "ATOMIC_GROUP", None):
            raise UnsafeRegex("possessive quantifiers and atomic groups are not allowed")
        if op in _REPEATS:
            _lo, hi, body = av
            unbounded = hi > _BIG
            if unbounded:
                counter[0] += 1
            nested = (
                _contains(body, _REPEATS, only_variable=True)
                if unbounded
                else hi > 1 and _contains(body, _REPEATS, only_unbounded=True)
            )
            if nested:
                raise UnsafeRegex("a quantifier is nested inside another quantifier")
            if unbounded and _contains(body, {sre_parse.BRANCH}):
                raise UnsafeRegex("an alternation of several characters is repeated without bound")
        for child in _children(op, av):
            _walk(child, counter)


def check_pattern(pattern: str) -> str | None:
    """Why ``pattern`` is invalid or unsafe, or None when it may be used."""
    try:
        compile_safe(pattern)
    except UnsafeRegex as exc:
        return str(exc)
    return None


@lru_cache(maxsize=2048)
def compile_safe(pattern: str) -> Any:
    """The compiled pattern (RE2 when available, else ``re``); UnsafeRegex if refused."""
    if not isinstance(pattern, str):
        raise UnsafeRegex("a pattern must be a string")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise UnsafeRegex(f"the pattern is longer than {MAX_PATTERN_CHARS} characters")
    try:
        parsed = sre_parse.parse(pattern)
        compiled = re.compile(pattern)
    except (re.error, OverflowError, RecursionError) as exc:
        raise UnsafeRegex(f"does not compile: {exc}") from None
    counter = [0]
    _walk(parsed, counter)
    if counter[0] > MAX_UNBOUNDED:
        raise UnsafeRegex(f"more than {MAX_UNBOUNDED} unbounded quantifiers")
    if _re2 is not None:
        try:
            return _re2.compile(pattern)
        except Exception as exc:  # re2.error: a construct RE2 does not support
            raise UnsafeRegex(f"uses a construct the linear-time engine lacks: {exc}") from None
    return compiled


def safe_search(pattern: str, text: str) -> Any:
    """The first match in ``text`` (clipped to MAX_SUBJECT_CHARS), or None."""
    return compile_safe(pattern).search(text[:MAX_SUBJECT_CHARS])


_EMPTY_CLASS_PAIRS = (
    {sre_parse.CATEGORY_DIGIT, sre_parse.CATEGORY_NOT_DIGIT},
    {sre_parse.CATEGORY_SPACE, sre_parse.CATEGORY_NOT_SPACE},
    {sre_parse.CATEGORY_WORD, sre_parse.CATEGORY_NOT_WORD},
)


def _empty_class(av) -> bool:
    """``[^\\s\\S]``-style: a negated class holding a category and its complement."""
    if not av or av[0][0] != sre_parse.NEGATE:
        return False
    cats = {a for op, a in av if op == sre_parse.CATEGORY}
    return any(pair <= cats for pair in _EMPTY_CLASS_PAIRS)


def _seq_never(sub, multiline: bool) -> bool:
    """Whether a sequence can match no text: an empty class it must pass, text it must
    consume after the end (``\\Z``, or ``$`` then a character other than a newline), text
    before the start (``\\A``, or ``^`` without MULTILINE), or a part that never matches."""
    consumed, ended, end_nl_ok = False, False, False
    for op, av in sub:
        if op == sre_parse.AT:
            if av == sre_parse.AT_END_STRING or (av == sre_parse.AT_END and not multiline):
                ended, end_nl_ok = True, av == sre_parse.AT_END
            elif consumed and (
                av == sre_parse.AT_BEGINNING_STRING
                or (av == sre_parse.AT_BEGINNING and not multiline)
            ):
                return True
            continue
        try:
            lo = sre_parse.SubPattern(sub.state, [(op, av)]).getwidth()[0]
        except (TypeError, ValueError, AttributeError, OverflowError):
            return False
        if op == sre_parse.IN and _empty_class(av):
            return True
        if op == sre_parse.BRANCH and all(_seq_never(b, multiline) for b in av[1]):
            return True
        if op == sre_parse.SUBPATTERN and _seq_never(av[-1], multiline):
            return True
        if op in _REPEATS and av[0] >= 1 and _seq_never(av[2], multiline):
            return True
        if lo > 0:
            if ended and (not end_nl_ok or (op == sre_parse.LITERAL and av != 10)):
                return True
            ended = False  # '$' then something that may be the final newline: unsure
            consumed = True
    return False


def never_matches(pattern: str) -> bool:
    """Whether no text at all matches ``pattern`` (decided for the plain cases only; False
    when unsure, or when the pattern does not parse)."""
    if not isinstance(pattern, str) or len(pattern) > MAX_PATTERN_CHARS:
        return False
    try:
        sub = sre_parse.parse(pattern)
    except (re.error, RecursionError, OverflowError, ValueError):
        return False
    multiline = bool(sub.state.flags & re.MULTILINE)
    try:
        return _seq_never(sub, multiline)
    except RecursionError:
        return False
