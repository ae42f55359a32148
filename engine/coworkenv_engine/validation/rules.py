"""Graders that punish the right behaviour, or let the wrong one slip through (static).

* ``safety_pattern_misses_format``: a safety grader's ``matches`` regex (a leak it guards
  against) matches a value of the task's own data once its separators are taken out, but
  not the value as the data writes it ("4111 1111 1111 1111" against ``\\d{16}``): the
  leak the grader is there for slips through in the data's own format;
* ``update_notice_contradicts``: an exogenous update's notice gives a time or date that none
  of the date-times it writes carries ("moved to 16:30" while it writes 17:00).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from ..problems import Problem, error, pointer
from ..safe_regex import safe_search
from ..spec_model import EnvironmentSpec, TaskSpec
from .known import _DATE, _TIME, _date_forms, _found, _time_forms

_SEPARATORS = re.compile(r"[\s./-]")


def _regexes(check: Any, path: tuple) -> Iterator[tuple[tuple, str]]:
    if not isinstance(check, dict):
        return
    if check.get("kind") == "response" and isinstance(check.get("matches"), str):
        yield (*path, "matches"), check["matches"]
    state = check.get("kind") == "state" and check.get("op") == "matches"
    if state and isinstance(check.get("value"), str):
        yield (*path, "value"), check["value"]
    for key in ("all", "any"):
        for i, sub in enumerate(check.get(key) or []):
            yield from _regexes(sub, (*path, key, i))
    if "not" in check:
        yield from _regexes(check["not"], (*path, "not"))


def _data_values(spec: EnvironmentSpec, task: TaskSpec) -> Iterator[str]:
    stack: list[Any] = [spec.services, task.records]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, str) and len(v) <= 200 and _SEPARATORS.search(v):
            yield v


def safety_pattern_problems(spec: EnvironmentSpec, k: int) -> list[Problem]:
    task = spec.tasks[k]
    out: list[Problem] = []
    values: list[str] | None = None
    for g, grader in enumerate(task.graders):
        if grader.category != "safety":
            continue
        for path, regex in _regexes(grader.check, ()):
            values = list(dict.fromkeys(_data_values(spec, task))) if values is None else values
            slip = next((v for v in values if _slips(regex, v)), None)
            if slip is not None:
                out.append(_misses(pointer("tasks", k, "graders", g, "check", *path), regex, slip))
    return out


def _slips(regex: str, value: str) -> bool:
    try:
        if safe_search(regex, value):
            return False
        return bool(safe_search(regex, _SEPARATORS.sub("", value)))
    except Exception:  # regex_invalid / regex_unsafe report the pattern itself
        return False


def _misses(ptr: str, regex: str, value: str) -> Problem:
    return error(
        "safety_pattern_misses_format",
        ptr,
        f"The safety pattern {regex!r} matches '{_SEPARATORS.sub('', value)}' but not "
        f"'{value}', the form the task's data writes it in: that leak slips through.",
        "Allow the data's separators in the pattern (e.g. [ -]? between digit groups), or "
        "match the value as the records hold it.",
    )


def notice_problems(spec: EnvironmentSpec, k: int) -> list[Problem]:
    task = spec.tasks[k]
    out: list[Problem] = []
    for n, turn in enumerate(task.turns):
        for u, update in enumerate(turn.updates):
            if not update.notice or not update.values:
                continue
            written = [v for v in update.values.values() if isinstance(v, str) and _DATE.match(v)]
            if not written:
                continue
            forms = [f.casefold() for v in written for f in _moment_forms(v)]
            notice = update.notice.casefold()
            said = [m.group(0) for m in _TIME.finditer(notice)]
            said += [m.group(1) for m in _DATE.finditer(notice)]
            wrong = [s for s in said if not _found([s], " ".join(forms))]
            if wrong:
                out.append(
                    error(
                        "update_notice_contradicts",
                        pointer("tasks", k, "turns", n, "updates", u, "notice"),
                        f"The notice says {', '.join(wrong)}, but the update writes "
                        f"{', '.join(written)}: what the agent is told contradicts the state.",
                        "Make the notice give the values the update writes (or fix the values).",
                    )
                )
    return out


def _moment_forms(value: str) -> list[str]:
    forms = _date_forms(value[:10])
    time = _TIME.search(value[10:])
    if time:
        forms += _time_forms(int(time.group(1)), int(time.group(2)))
    return forms
