"""Graders that punish the right behaviour, or let the wrong one slip through (static).

* ``safety_pattern_misses_format``: a safety check's regex or substring (a leak it guards
  against: a response, a state check, a tool_call argument matcher) catches a value of the
  task's own data once its separators are taken out or written another way, but not the
  value as the data writes it ("4111 1111 1111 1111" against ``\\d{16}``, "(555) 123-4567"
  against ``\\d{3}-\\d{3}-\\d{4}``): the leak the grader is there for slips through;
* ``update_notice_contradicts``: an exogenous update's notice gives a time or date that none
  of the date-times it writes carries ("moved to 16:30" while it writes 17:00), or names
  another record of the collection ("e2 moved" while it moves e1) or a value another record
  or the target before holds in a field it writes, instead of the value written.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from ..bindings import normalize_text
from ..problems import Problem, error, pointer
from ..safe_regex import safe_search
from ..spec_model import EnvironmentSpec, TaskSpec, Update
from .known import _DATE, _TIME, _date_forms, _found, _time_forms
from .walk import texts

_SEPARATORS = re.compile(r"[\s./()+-]")
_RUN = re.compile(r"[\s./()+-]+")
_DIGITS = re.compile(r"\d")


def _patterns(check: Any, path: tuple) -> Iterator[tuple[tuple, str, str]]:
    """(pointer parts, "regex" or "text", pattern) of each leak a check looks for."""
    if not isinstance(check, dict):
        return
    kind = check.get("kind")
    if kind == "response":
        for key, how in (("matches", "regex"), ("contains", "text")):
            if isinstance(check.get(key), str):
                yield (*path, key), how, check[key]
    if kind == "state" and isinstance(check.get("value"), str):
        how = {"matches": "regex", "contains": "text"}.get(check.get("op"))
        if how:
            yield (*path, "value"), how, check["value"]
    if kind == "tool_call" and isinstance(check.get("arguments"), dict):
        for name, matcher in check["arguments"].items():
            if isinstance(matcher, dict) and isinstance(matcher.get("value"), str):
                how = {"matches": "regex", "contains": "text"}.get(matcher.get("op"))
                if how:
                    yield (*path, "arguments", name, "value"), how, matcher["value"]
    for key in ("all", "any"):
        for i, sub in enumerate(check.get(key) or []):
            yield from _patterns(sub, (*path, key, i))
    if "not" in check:
        yield from _patterns(check["not"], (*path, "not"))


def _data_values(spec: EnvironmentSpec, task: TaskSpec) -> Iterator[str]:
    for v in texts([spec.services, task.records]):
        if len(v) <= 200 and _SEPARATORS.search(v):
            yield v


def safety_pattern_problems(spec: EnvironmentSpec, k: int) -> list[Problem]:
    task = spec.tasks[k]
    out: list[Problem] = []
    values: list[str] | None = None
    for g, grader in enumerate(task.graders):
        if grader.category != "safety":
            continue
        for path, how, pattern in _patterns(grader.check, ()):
            values = list(dict.fromkeys(_data_values(spec, task))) if values is None else values
            slips = _slips_regex if how == "regex" else _slips_text
            hit = next(((v, f) for v in values if (f := slips(pattern, v))), None)
            if hit is not None:
                ptr = pointer("tasks", k, "graders", g, "check", *path)
                out.append(_misses(ptr, pattern, *hit))
    return out


def _reformats(value: str) -> list[str]:
    """The value with its separators taken out, or all written as one space or dash."""
    return list(dict.fromkeys(_RUN.sub(sep, value) for sep in ("", " ", "-")))


def _slips_regex(regex: str, value: str) -> str | None:
    """The reformatted value the regex catches, when it misses ``value`` as written."""
    try:
        if safe_search(regex, value):
            return None
        return next((f for f in _reformats(value) if safe_search(regex, f)), None)
    except Exception:  # regex_invalid / regex_unsafe report the pattern itself
        return None


def _slips_text(text: str, value: str) -> str | None:
    """The same for a substring a check looks for (case-folded, as checks compare it)."""
    needle = normalize_text(text)
    if len(_DIGITS.findall(needle)) < 4 or needle in normalize_text(value):
        return None
    return next((f for f in _reformats(value) if needle in normalize_text(f)), None)


def _misses(ptr: str, pattern: str, value: str, caught: str) -> Problem:
    return error(
        "safety_pattern_misses_format",
        ptr,
        f"The safety check {pattern!r} catches '{caught}' but not '{value}', the form the "
        "task's data writes it in: that leak slips through.",
        "Allow the data's separators in the pattern (e.g. [ -]? between digit groups), or "
        "match the value as the records hold it.",
    )


def notice_problems(spec: EnvironmentSpec, k: int) -> list[Problem]:
    task = spec.tasks[k]
    out: list[Problem] = []
    for n, turn in enumerate(task.turns):
        for u, update in enumerate(turn.updates):
            if not update.notice:
                continue
            wrong = _wrong_moments(update) + _wrong_names(spec, task, update)
            if wrong:
                written = [update.id] if update.id else []
                written += [str(v) for v in (update.values or {}).values()]
                out.append(
                    error(
                        "update_notice_contradicts",
                        pointer("tasks", k, "turns", n, "updates", u, "notice"),
                        f"The notice says {', '.join(wrong)}, but the update writes "
                        f"{', '.join(written)[:300]}: what the agent is told contradicts "
                        "the state.",
                        "Make the notice give the record and values the update writes (or "
                        "fix the values).",
                    )
                )
    return out


def _wrong_moments(update: Update) -> list[str]:
    """The times and dates the notice gives that no date-time the update writes carries."""
    values = update.values or {}
    written = [v for v in values.values() if isinstance(v, str) and _DATE.match(v)]
    if not written:
        return []
    forms = " ".join(f.casefold() for v in written for f in _moment_forms(v))
    notice = (update.notice or "").casefold()
    said = [m.group(0) for m in _TIME.finditer(notice)]
    said += [m.group(1) for m in _DATE.finditer(notice)]
    return [s for s in said if not _found([s], forms)]


def _wrong_names(spec: EnvironmentSpec, task: TaskSpec, update: Update) -> list[str]:
    """Another record's id of the collection, or a value another record (or the target
    before) holds in a field the update writes, that the notice names instead of the
    update's own."""
    records = [
        r
        for source in (spec.services, task.records)
        for r in source.get(update.service, {}).get(update.collection, [])
        if isinstance(r, dict)
    ]
    notice = (update.notice or "").casefold()
    wrong = []
    fields = [("id", update.id)] if update.id else []
    fields += [(f, v) for f, v in (update.values or {}).items() if _nameable(v)]
    for name, value in fields:
        if _names(notice, value):
            continue
        others = [o for r in records if _nameable(o := r.get(name)) and o != value]
        wrong += sorted({str(o) for o in others if _names(notice, o)})
    return wrong


def _nameable(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return abs(value) >= 10  # a small count is too common a word to read as a value
    return isinstance(value, str) and 2 <= len(value) <= 40 and not _DATE.match(value)


def _names(notice: str, value: Any) -> bool:
    whole = isinstance(value, float) and value.is_integer()
    return _found([str(int(value) if whole else value).casefold()], notice)


def _moment_forms(value: str) -> list[str]:
    forms = _date_forms(value[:10])
    time = _TIME.search(value[10:])
    if time:
        forms += _time_forms(int(time.group(1)), int(time.group(2)))
    return forms
