"""Information flow: what the agent can see versus what the task needs it to know.

* a reference solution may only use the distinctive values (addresses, record ids, people's
  names, long digit strings and numbers) the agent can have found by the turn of the call:
  in a message of that turn or an earlier one, a revealed fact, a tool schema, a record some
  tool reads (initial, or written by an update applied by then), what the reference's earlier
  calls wrote, or an id the tools generate: ``reference_value_unseen``. Dates are left out
  (the agent computes them from the clock and the request);
* a clarification task's first message must not already state the fact the user reveals
  only when asked: ``clarification_fact_given``.
"""

from __future__ import annotations

import re
from typing import Any

from ..bindings import placeholder_name
from ..problems import Problem, error, pointer
from ..spec_model import EnvironmentSpec, TaskSpec
from .walk import numbers, strings


def _properties(tool: Any) -> dict[str, Any]:
    props = tool.parameters.get("properties") if isinstance(tool.parameters, dict) else None
    return props if isinstance(props, dict) else {}


_FACT_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@/:-]*[0-9@][A-Za-z0-9._@/:-]*")


def clarification_problems(spec: EnvironmentSpec, k: int) -> list[Problem]:
    task = spec.tasks[k]
    if not any("clarif" in c for c in task.capabilities) or not task.user.reveals_when_asked:
        return []
    first = task.turns[0].message.casefold()
    out = []
    for i, fact in enumerate(task.user.reveals_when_asked):
        tokens = [t.rstrip(".:") for t in _FACT_TOKEN.findall(fact)]
        tokens = [t for t in tokens if len(t) >= 2]
        if tokens and all(t.casefold() in first for t in tokens):
            out.append(
                error(
                    "clarification_fact_given",
                    pointer("tasks", k, "turns", 0, "message"),
                    f"The first message already states what the user reveals only when asked "
                    f"({', '.join(tokens)}): the agent has nothing to ask.",
                    f"Remove {', '.join(tokens)} from the first message (keep it in "
                    f"/tasks/{k}/user/reveals_when_asked/{i}), or drop the clarification "
                    "capability.",
                )
            )
    return out


_ID_LIKE = re.compile(r"^(?=.*[A-Za-z])(?=.*[0-9@])[A-Za-z0-9][A-Za-z0-9._@+-]{1,120}$")
_DATE_LIKE = re.compile(r"^\d{4}-\d{2}-\d{2}")
# a string of several digits (an order number, a phone, an account): 5+ digits in all
_DIGITS = re.compile(r"^\+?[0-9][0-9 ./-]{3,40}$")
_DATE_ANY = re.compile(r"^\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}$")
# a person's name (two to four capitalised words) in a parameter that names a person
_NAME = re.compile(r"^[A-Z][a-z]+(?:[ '-][A-Z][a-z]+){1,3}$")
_PERSON_PARAMS = re.compile(
    r"(^|_)(to|cc|bcc|assignee|assignees|owner|attendee|attendees|recipient|recipients|"
    r"contact|requester|approver|reviewer|person|people|manager)$"
)


class _Visible:
    """What the agent can see by each turn, as casefolded text.

    From the start: the system prompt, constraints, persona, the facts the user reveals
    when asked, the tool schemas and the initial records of every collection a tool reads.
    By turn N also: the messages of turns <= N, the exogenous updates applied before them
    (their values in readable collections, their notices), and what the reference's own
    earlier calls wrote (the agent's own words, and the records they create).
    """

    def __init__(self, spec: EnvironmentSpec, task: TaskSpec):
        self.readable = {
            (t.binding.service, t.binding.collection)
            for t in spec.tools
            if t.binding.op in ("list", "search", "get")
        }
        parts = [task.system, *task.constraints, *task.user.reveals_when_asked, task.user.persona]
        parts += [repr(t.parameters) + t.description + repr(t.binding.values) for t in spec.tools]
        for source in (spec.services, task.records):
            for service, cols in source.items():
                for name, records in cols.items():
                    if (service, name) in self.readable:
                        parts += [v for _, v in strings(records)]
                        parts += [repr(v) for _, v in numbers(records)]
        self.text = "\n".join(parts).casefold()
        self.task = task
        self.turn = -1

    def through(self, turn: int) -> str:
        """The text visible by ``turn`` (turns are visited in increasing order)."""
        while self.turn < turn and self.turn + 1 < len(self.task.turns):
            self.turn += 1
            current = self.task.turns[self.turn]
            parts = [current.message]
            for u in current.updates:
                parts.append(u.notice or "")
                if (u.service, u.collection) in self.readable:
                    parts += [v for _, v in strings(u.values)] + [u.id or ""]
                    parts += [repr(v) for _, v in numbers(u.values)]
            self.text += "\n" + "\n".join(parts).casefold()
        return self.text

    def add(self, arguments: Any) -> None:
        """An earlier reference call's arguments: the agent's own, visible from then on."""
        parts = [v for _, v in strings(arguments)] + [repr(v) for _, v in numbers(arguments)]
        self.text += "\n" + "\n".join(parts).casefold()


def _integral(value: float) -> bool:
    """A whole number (an int of any size, never converted to a float that would overflow)."""
    return isinstance(value, int) or value.is_integer()


def _number_forms(value: float) -> list[str]:
    forms = [repr(value), f"{value:,}"]
    if _integral(value):
        forms += [str(int(value)), f"{int(value):,}"]
    return [f.casefold() for f in forms]


def _reference_parameters(spec: EnvironmentSpec, tool_name: str) -> set[str]:
    """Parameters that name existing things: the binding's id / where slots, *_id names."""
    tool = spec.tool(tool_name)
    if tool is None:
        return set()
    b = tool.binding
    slots = [b.id, *(b.where or {}).values()]
    names = {placeholder_name(v) for v in slots} - {None}
    names |= {p for p in _properties(tool) if p == "id" or p.endswith(("_id", "_ids"))}
    return names  # type: ignore[return-value]


def _distinctive(value: str, path: tuple, refs: set[str]) -> bool:
    """A value the agent must have found, not composed: an address or a long digit string
    (a phone, an account number) anywhere; a person's name in a parameter naming a person;
    an id-like token or a shorter digit string in a parameter that names an existing thing.
    Dates are left out: the agent computes them ("next Thursday")."""
    if _DATE_LIKE.match(value) or _DATE_ANY.match(value):
        return False
    if "@" in value and _ID_LIKE.match(value):
        return True
    digits = sum(ch.isdigit() for ch in value) if _DIGITS.match(value) else 0
    if digits >= 7:
        return True
    param = str(path[0]) if path else ""
    if _NAME.match(value) and _PERSON_PARAMS.search(param.casefold()):
        return True
    if param not in refs:
        return False  # free text the agent composes (a subject, a title)
    return bool(_ID_LIKE.match(value)) or digits >= 4


def information_flow_problems(spec: EnvironmentSpec, k: int) -> list[Problem]:
    """Reference arguments naming things (addresses, record ids, people's names, long digit
    strings and numbers) that the agent cannot have seen by the turn of the call: not in a
    message of that turn or before, a reveal, a tool schema, a record some tool reads by
    then (initial, or written by an update applied by then), an earlier call's arguments,
    nor an id the tools generate."""
    task = spec.tasks[k]
    generated = {
        re.escape(t.binding.collection) + r"-[0-9]+" for t in spec.tools if t.binding.op == "create"
    }
    generated_re = re.compile("^(" + "|".join(sorted(generated)) + ")$") if generated else None
    visible: _Visible | None = None
    earlier: list[Any] = []  # arguments of the reference calls already made
    out: list[Problem] = []
    steps = sorted(enumerate(task.reference_solution), key=lambda item: item[1].turn)
    for st, step in steps:
        for c, call in enumerate(step.calls):
            refs = _reference_parameters(spec, call.tool)
            found = [
                (path, value, None)
                for path, value in strings(call.arguments)
                if _distinctive(value, path, refs)
                and not (generated_re is not None and generated_re.match(value))
            ]
            found += [
                (path, value, _number_forms(value))
                for path, value in numbers(call.arguments)
                if (path and path[0] in refs and abs(value) >= 1000)
                or (_integral(value) and abs(value) >= 1_000_000)
            ]
            if found:
                if visible is None:
                    visible = _Visible(spec, task)
                for arguments in earlier:
                    visible.add(arguments)
                earlier = []
                text = visible.through(step.turn)
                for path, value, forms in found:
                    seen = any(f in text for f in forms) if forms else value.casefold() in text
                    if not seen:
                        out.append(_unseen(k, st, c, path, value, step.turn, task))
            earlier.append(call.arguments)
    return out


def _unseen(k: int, st: int, c: int, path: tuple, value: Any, turn: int, task: TaskSpec):
    later = next(
        (
            n
            for n in range(turn + 1, len(task.turns))
            if str(value).casefold() in task.turns[n].message.casefold()
        ),
        None,
    )
    where = f"; the user only says it at turn {later}" if later is not None else ""
    return error(
        "reference_value_unseen",
        pointer("tasks", k, "reference_solution", st, "calls", c, "arguments", *path),
        f"The reference solution uses '{value}' at turn {turn}, but by then it appears nowhere "
        f"the agent can see (messages so far, revealed facts, tool schemas, records a tool "
        f"reads, updates applied so far){where}.",
        "Put the value where the agent can find it by that turn (a record a tool reads, the "
        "request of that turn or an earlier one, or user.reveals_when_asked), move the call "
        "to the turn that gives it, or use the value that is there.",
    )
