"""The reference breaks a rule the task states (static).

A rule in the task's constraints or system prompt that the reference solution itself
breaks: the graders reward the breach, so an agent that follows the rule fails the task
(and the demonstration teaches the breach). ``reference_breaks_rule`` at the call:

* "never email anyone outside acme.test" / "never email external addresses": an email
  the reference sends (a create into the email service) to an address of another domain
  (the rule's, else the domains of the system prompt's own addresses);
* "do not delete ...": a delete call;
* "send at most N emails" / "no more than N ...": more than N reference calls of the tools
  the rule's noun names.

A rule with an exception ("except", "unless", "other than", "only if") is not read.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..problems import Problem, error, pointer
from ..spec_model import EnvironmentSpec, ReferenceCall, TaskSpec
from .walk import texts

_NEVER = r"\b(?:never|do not|don't|must not|may not|cannot|can't|not allowed to)\s+"
_OUTSIDE = re.compile(
    _NEVER + r"(?:\w+\s+){0,2}?(?:e-?mail|send|write|message|share)\b[^.;]*?"
    r"\b(?:outside(?: of)?|external|beyond)\b\s*(?:the\s+)?@?([a-z0-9-]+(?:\.[a-z0-9-]+)+)?",
    re.I,
)
_NO_DELETE = re.compile(_NEVER + r"(?:\w+\s+){0,2}?(?:delete|remove|erase)\b", re.I)
_NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7}
_AT_MOST = re.compile(
    r"\b(?:at most|no more than|a maximum of|never more than)\s+(\d+|"
    + "|".join(_NUMBERS)
    + r")\s+([a-z-]+)",
    re.I,
)
_EXCEPT = re.compile(r"\b(?:except|unless|other than|only if|apart from)\b", re.I)
_ADDRESS = re.compile(r"[\w.+-]+@([a-z0-9-]+(?:\.[a-z0-9-]+)+)", re.I)

Located = tuple[int, int, ReferenceCall]


def _rules(task: TaskSpec) -> Iterator[str]:
    for text in (*task.constraints, task.system):
        for sentence in re.split(r"(?<=[.;!])\s+", text):
            if sentence and not _EXCEPT.search(sentence):
                yield sentence


def _calls(task: TaskSpec) -> Iterator[Located]:
    for s, step in enumerate(task.reference_solution):
        for c, call in enumerate(step.calls):
            yield s, c, call


def _op(spec: EnvironmentSpec, call: ReferenceCall) -> tuple[str, str] | None:
    tool = spec.tool(call.tool)
    return None if tool is None else (tool.binding.op, tool.binding.service)


def _outside(spec: EnvironmentSpec, task: TaskSpec, rule: str) -> Iterator[tuple[Located, str]]:
    m = _OUTSIDE.search(rule)
    if not m:
        return
    homes = {m.group(1).lower()} if m.group(1) else {
        d.lower() for d in _ADDRESS.findall(task.system)
    }  # fmt: skip
    if not homes:
        return
    for s, c, call in _calls(task):
        if _op(spec, call) != ("create", "email"):
            continue
        for text in texts(call.arguments):
            for domain in _ADDRESS.findall(text):
                home = domain.lower()
                if not any(home == h or home.endswith("." + h) for h in homes):
                    yield (s, c, call), f"it emails @{domain}"


def _deletes(spec: EnvironmentSpec, task: TaskSpec, rule: str) -> Iterator[tuple[Located, str]]:
    if not _NO_DELETE.search(rule):
        return
    for s, c, call in _calls(task):
        if (_op(spec, call) or ("", ""))[0] == "delete":
            yield (s, c, call), f"it calls '{call.tool}', a delete"


def _limits(spec: EnvironmentSpec, task: TaskSpec, rule: str) -> Iterator[tuple[Located, str]]:
    for m in _AT_MOST.finditer(rule):
        most = _NUMBERS.get(m.group(1).lower()) or int(m.group(1))
        stem = m.group(2).lower().removesuffix("s").replace("-", "")
        if len(stem) < 4:
            continue
        made = [
            located
            for located in _calls(task)
            if stem in located[2].tool.replace("_", "").lower()
            and (_op(spec, located[2]) or ("",))[0] in ("create", "update", "delete")
        ]
        if len(made) > most:
            yield made[most], f"it makes {len(made)} '{stem}' calls, more than {most}"


def stated_rule_problems(spec: EnvironmentSpec, k: int) -> list[Problem]:
    task = spec.tasks[k]
    out: list[Problem] = []
    for rule in _rules(task):
        for check in (_outside, _deletes, _limits):
            for (s, c, call), how in check(spec, task, rule):
                out.append(
                    error(
                        "reference_breaks_rule",
                        pointer("tasks", k, "reference_solution", s, "calls", c),
                        f"The reference breaks the task's rule '{rule.strip()[:200]}': {how} "
                        f"('{call.tool}'). An agent that follows the rule cannot pass what "
                        "the graders reward.",
                        "Make the reference (and the graders) follow the rule, or state the "
                        "rule with the exception the task needs.",
                    )
                )
    return list(dict.fromkeys(out))
