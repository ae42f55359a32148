"""Data integrity across time: bindings, exogenous updates and the records they create.

* a create binding fills a field its service kind requires from an *optional* parameter
  (a valid call can then create an invalid record);
* an exogenous create uses an id of the form the tools generate (``events-1``): whichever
  comes first makes the other fail;
* records created by exogenous updates obey the library's cross-references, like initial
  records do;
* the update log of every dynamic run is checked: an update that fails at run time (its
  target deleted by the agent, its id taken) is an error, not a silent no-op.
"""

from __future__ import annotations

import re
from typing import Any

from .. import library
from ..bindings import placeholder_name
from ..checks import MAX_DEPTH
from ..problems import Problem, error, pointer
from ..spec_model import EnvironmentSpec


def binding_problems(spec: EnvironmentSpec) -> list[Problem]:
    out: list[Problem] = []
    for t, tool in enumerate(spec.tools):
        b = tool.binding
        if b.op != "create" or not isinstance(b.values, dict):
            continue
        params = tool.parameters if isinstance(tool.parameters, dict) else {}
        required_params = params.get("required") or []
        if not isinstance(required_params, list):
            continue
        for field in library.required_fields(b.service, b.collection):
            name = placeholder_name(b.values.get(field))
            if name is not None and name not in required_params:
                out.append(
                    error(
                        "binding_optional_required_field",
                        pointer("tools", t, "binding", "values", field),
                        f"'{tool.name}' fills {b.service}.{b.collection}.{field}, which the "
                        f"service requires, from the optional parameter '{name}': a valid call "
                        "without it creates a record lacking a required field.",
                        f"Add '{name}' to the tool's parameters.required, or fill the field "
                        "with a fixed value.",
                    )
                )
    return out


def _generated_id(spec: EnvironmentSpec, service: str, collection: str, new_id: Any) -> bool:
    if not isinstance(new_id, str):
        return False
    if not re.fullmatch(re.escape(collection) + r"-[0-9]+", new_id):
        return False
    return any(
        t.binding.op == "create"
        and t.binding.service == service
        and t.binding.collection == collection
        for t in spec.tools
    )


def update_problems(spec: EnvironmentSpec, k: int) -> list[Problem]:
    task = spec.tasks[k]
    out: list[Problem] = []
    created: dict[tuple[str, str], set[str]] = {}
    for j, turn in enumerate(task.turns):
        for u, up in enumerate(turn.updates):
            ptr = pointer("tasks", k, "turns", j, "updates", u)
            if up.op != "create":
                continue
            new_id = (up.values or {}).get("id", up.id)
            if _generated_id(spec, up.service, up.collection, new_id):
                out.append(
                    error(
                        "update_id_collides",
                        ptr + ("/values/id" if "id" in (up.values or {}) else "/id"),
                        f"The update creates '{new_id}', an id of the form the tools give "
                        f"new {up.service}.{up.collection} records: the agent's create and "
                        "this update can take the same id.",
                        f"Use an id the tools never generate (e.g. '{up.collection[:3]}-x{j}').",
                    )
                )
            if isinstance(new_id, str):
                created.setdefault((up.service, up.collection), set()).add(new_id)
    for ref in library.CROSS_REFERENCES:
        known = {
            r["id"]
            for source in (spec.services, task.records)
            for r in source.get(ref.target_service, {}).get(ref.target_collection, [])
        } | created.get((ref.target_service, ref.target_collection), set())
        for j, turn in enumerate(task.turns):
            for u, up in enumerate(turn.updates):
                if (up.service, up.collection) != (ref.service, ref.collection):
                    continue
                value = (up.values or {}).get(ref.field)
                if value is None:
                    continue
                for v in value if isinstance(value, list) else [value]:
                    if not isinstance(v, str) or v not in known:
                        out.append(
                            error(
                                "dangling_reference",
                                pointer("tasks", k, "turns", j, "updates", u, "values", ref.field),
                                f"The update sets {ref.field} '{v}', but "
                                f"{ref.target_service}.{ref.target_collection} has no such id.",
                                f"Use an existing {ref.target_service}.{ref.target_collection} "
                                "id or create that record first.",
                            )
                        )
    return out


def _counts_attempts(check: dict[str, Any], faulty: set[str], depth: int = 0) -> list[tuple]:
    """Relative paths of tool_call leaves that count failed attempts of a faulting tool."""
    if depth > MAX_DEPTH or not isinstance(check, dict):
        return []
    found: list[tuple] = []
    for mode in ("all", "any"):
        for i, child in enumerate(check.get(mode) or ()):
            found += [(mode, i, *p) for p in _counts_attempts(child, faulty, depth + 1)]
    if "not" in check:
        found += [("not", *p) for p in _counts_attempts(check["not"], faulty, depth + 1)]
    if (
        check.get("kind") == "tool_call"
        and check.get("succeeded") is False
        and check.get("tool") in faulty
        and ("max" in check or check.get("called") is False)
    ):
        found.append(())
    return found


def attempt_counting_problems(spec: EnvironmentSpec, k: int) -> list[Problem]:
    """A grader that bounds *attempts* (succeeded: false) of a tool that injects faults:
    a correct retry after a fault breaks it."""
    faulty = {t.name for t in spec.tools if t.faults.rate > 0}
    out: list[Problem] = []
    for g, grader in enumerate(spec.tasks[k].graders):
        for rel in _counts_attempts(grader.check, faulty):
            out.append(
                error(
                    "grader_counts_failed_attempts",
                    pointer("tasks", k, "graders", g, "check", *rel),
                    f"Grader '{grader.id}' bounds the attempts at a tool that injects faults "
                    "(succeeded: false with max/called: false): a correct retry after a fault "
                    "fails it.",
                    "Count successful calls only (drop succeeded: false), or set the tool's "
                    "fault rate to 0.",
                )
            )
    return out
