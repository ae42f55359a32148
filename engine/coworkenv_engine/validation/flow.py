"""Information flow: what the agent can see versus what the task needs it to know.

* a reference solution may only use addresses and record ids the agent can find (in a
  message, a revealed fact, a tool schema, a record some tool reads, or an id the tools
  generate): ``reference_value_unseen``;
* a clarification task's first message must not already state the fact the user reveals
  only when asked: ``clarification_fact_given``.
"""

from __future__ import annotations

import re
from typing import Any

from ..bindings import placeholder_name
from ..problems import Problem, error, pointer
from ..spec_model import EnvironmentSpec, TaskSpec


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


def _strings(value: Any, path: tuple = ()):
    stack = [(value, path)]
    while stack:
        v, p = stack.pop()
        if isinstance(v, str):
            yield p, v
        elif isinstance(v, dict):
            stack.extend((x, (*p, key)) for key, x in v.items())
        elif isinstance(v, list):
            stack.extend((x, (*p, i)) for i, x in enumerate(v))


def _visible_text(spec: EnvironmentSpec, task: TaskSpec) -> str:
    """Everything an agent can see: messages, reveals, tools, records it can read."""
    readable = {
        (t.binding.service, t.binding.collection)
        for t in spec.tools
        if t.binding.op in ("list", "search", "get")
    }
    parts = [task.system, *task.constraints, *task.user.reveals_when_asked, task.user.persona]
    parts += [turn.message for turn in task.turns]
    parts += [u.notice or "" for turn in task.turns for u in turn.updates]
    parts += [repr(t.parameters) + t.description + repr(t.binding.values) for t in spec.tools]
    for source in (spec.services, task.records):
        for service, cols in source.items():
            for name, records in cols.items():
                if (service, name) in readable:
                    parts += [v for _, v in _strings(records)]
    for turn in task.turns:
        for u in turn.updates:
            if (u.service, u.collection) in readable:
                parts += [v for _, v in _strings(u.values)] + [u.id or ""]
    return "\n".join(parts).casefold()


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


def information_flow_problems(spec: EnvironmentSpec, k: int) -> list[Problem]:
    """Reference arguments naming things (addresses, record ids) that the agent cannot find:
    not in a message, a reveal, a tool schema or a record some tool reads, and not an id
    the tools generate."""
    task = spec.tasks[k]
    visible: str | None = None
    generated = {
        re.escape(t.binding.collection) + r"-[0-9]+" for t in spec.tools if t.binding.op == "create"
    }
    generated_re = re.compile("^(" + "|".join(sorted(generated)) + ")$") if generated else None
    out: list[Problem] = []
    for st, step in enumerate(task.reference_solution):
        for c, call in enumerate(step.calls):
            refs = _reference_parameters(spec, call.tool)
            for path, value in _strings(call.arguments):
                if not _ID_LIKE.match(value) or _DATE_LIKE.match(value):
                    continue
                if "@" not in value and (not path or path[0] not in refs):
                    continue  # free text the agent composes (a subject, a title)
                if generated_re is not None and generated_re.match(value):
                    continue
                visible = visible if visible is not None else _visible_text(spec, task)
                if value.casefold() in visible:
                    continue
                out.append(
                    error(
                        "reference_value_unseen",
                        pointer(
                            "tasks", k, "reference_solution", st, "calls", c, "arguments", *path
                        ),
                        f"The reference solution uses '{value}', which appears nowhere the "
                        "agent can see (messages, revealed facts, tool schemas, readable "
                        "records).",
                        "Put the value where the agent can find it (a record a tool reads, "
                        "the request, or user.reveals_when_asked), or use the value that is "
                        "there.",
                    )
                )
    return out
