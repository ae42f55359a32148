"""Static validation: everything that can be checked without running the simulator.

Runs on a schema-valid document; ``doc`` gives pointers, ``spec`` the typed view.
"""

from __future__ import annotations

import re
from typing import Any

from .. import library
from ..bindings import placeholder_name
from ..formats import schema_problem, validator_for
from ..limits import Limits
from ..problems import Problem, error, pointer, warning
from ..spec_model import EnvironmentSpec, TaskSpec, ToolSpec, Update
from ..state import json_size
from .attachments import attachment_problems
from .semantic import semantic_problems
from .static_checks import CheckContext, _turns, grader_problems

TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
RESERVED_PARAMETERS = {"now"}


def static_problems(doc: dict[str, Any], spec: EnvironmentSpec) -> list[Problem]:
    out: list[Problem] = []
    collections = {s: set(cols) for s, cols in spec.services.items()}
    _records(out, spec.services, ("services",), collections)
    size = json_size(spec.services)
    if size > Limits().max_state_bytes:
        out.append(
            error(
                "state_too_large",
                "/services",
                f"The records take {size} bytes, over the simulator's {Limits().max_state_bytes}.",
                "Trim the records.",
            )
        )
    seen_tools: dict[str, int] = {}
    for t, tool in enumerate(spec.tools):
        _tool(out, t, tool, collections, seen_tools)
    seen_keys: set[str] = set()
    for k, task in enumerate(spec.tasks):
        if task.key in seen_keys:
            out.append(
                error(
                    "duplicate_id",
                    pointer("tasks", k, "key"),
                    f"Task key '{task.key}' is used twice.",
                    "Give each task its own key.",
                )
            )
        seen_keys.add(task.key)
        _task(out, k, task, spec, collections)
    out.extend(semantic_problems(spec))
    out.extend(attachment_problems(spec))
    return _dedupe(out)


def _dedupe(problems: list[Problem]) -> list[Problem]:
    seen, out = set(), []
    for p in problems:
        key = (p.code, p.pointer, p.message)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


# --------------------------------------------------------------------------- records


def _records(
    out: list[Problem],
    services: dict[str, dict[str, list[dict[str, Any]]]],
    base: tuple,
    collections: dict[str, set[str]],
) -> None:
    for service, cols in services.items():
        if service not in collections:
            out.append(
                error(
                    "unknown_service",
                    pointer(*base, service),
                    f"Service '{service}' is not declared by the environment.",
                    f"Declare it under /services or use one of: {_names(collections)}.",
                )
            )
            continue
        for name, records in cols.items():
            if name not in collections[service]:
                out.append(
                    error(
                        "unknown_collection",
                        pointer(*base, service, name),
                        f"Collection '{service}.{name}' is not declared by the environment.",
                        "Declare it under /services/"
                        + service
                        + " or use one of: "
                        + ", ".join(sorted(collections[service])),
                    )
                )
                continue
            required = library.required_fields(service, name)
            ids: set[str] = set()
            for i, record in enumerate(records):
                if record["id"] in ids:
                    out.append(
                        error(
                            "duplicate_id",
                            pointer(*base, service, name, i, "id"),
                            f"Record id '{record['id']}' appears twice in {service}.{name}.",
                            "Give each record its own id.",
                        )
                    )
                ids.add(record["id"])
                missing = [f for f in required if f not in record]
                if missing:
                    out.append(
                        error(
                            "record_missing_field",
                            pointer(*base, service, name, i),
                            f"{service}.{name} record '{record['id']}' lacks {', '.join(missing)}.",
                            f"A {service}.{name} record needs: {', '.join(required)}.",
                        )
                    )


def _names(collections: dict[str, set[str]]) -> str:
    return ", ".join(sorted(collections)) or "none"


def _where(
    out: list[Problem], ptr: str, service: str, collection: str, collections: dict[str, set[str]]
) -> bool:
    if service not in collections:
        out.append(
            error(
                "unknown_service",
                ptr + "/service",
                f"Service '{service}' does not exist.",
                f"Use one of: {_names(collections)}.",
            )
        )
        return False
    if collection not in collections[service]:
        out.append(
            error(
                "unknown_collection",
                ptr + "/collection",
                f"Collection '{service}.{collection}' does not exist.",
                f"Collections of '{service}': {', '.join(sorted(collections[service]))}.",
            )
        )
        return False
    return True


# --------------------------------------------------------------------------- tools


def _tool(
    out: list[Problem],
    t: int,
    tool: ToolSpec,
    collections: dict[str, set[str]],
    seen: dict[str, int],
) -> None:
    base = pointer("tools", t)
    if not TOOL_NAME.match(tool.name):
        out.append(
            error(
                "tool_name_invalid",
                base + "/name",
                f"Tool name '{tool.name[:80]}' is not a valid function name.",
                "Use 1-64 letters, digits, '_' or '-' (e.g. send_email).",
            )
        )
    if tool.name in seen:
        out.append(
            error(
                "duplicate_id",
                base + "/name",
                f"Tool '{tool.name}' is declared twice (also /tools/{seen[tool.name]}).",
                "Rename or merge them.",
            )
        )
    seen.setdefault(tool.name, t)
    params = tool.parameters
    why = schema_problem(params)
    if why is None and params.get("type") != "object":
        why = 'the top level must be {"type": "object", ...}'
    if why is not None:
        out.append(
            error(
                "tool_parameters_invalid",
                base + "/parameters",
                f"Tool '{tool.name}' parameters are not a valid JSON Schema: {why}",
                'Use {"type": "object", "properties": {...}, "required": [...]}.',
            )
        )
        declared: set[str] = set()
    else:
        declared = set(params.get("properties", {}) or {})
    for name in sorted(declared & RESERVED_PARAMETERS):
        out.append(
            error(
                "reserved_parameter",
                base + f"/parameters/properties/{name}",
                f"Parameter '{name}' is reserved ($now is the simulated clock).",
                "Rename the parameter.",
            )
        )
    b = tool.binding
    _where(out, base + "/binding", b.service, b.collection, collections)
    used: set[str] = set()
    slots: list[tuple[str, Any]] = [
        ("id", b.id),
        ("query", b.query),
        ("merge", b.merge),
        ("limit", b.limit),
    ]
    slots += [(f"values/{k}", v) for k, v in (b.values or {}).items()]
    slots += [(f"where/{k}", v) for k, v in (b.where or {}).items()]
    for slot, value in slots:
        name = placeholder_name(value)
        if name is None:
            continue
        used.add(name)
        if why is None and name not in declared:
            out.append(
                error(
                    "undeclared_parameter",
                    base + "/binding/" + slot,
                    f"Binding of '{tool.name}' uses ${name}, which the parameters do not declare.",
                    f"Declare '{name}' under parameters.properties or use a fixed "
                    f"value (declared: {', '.join(sorted(declared)) or 'none'}).",
                )
            )
    for name in sorted(declared - used):
        out.append(
            warning(
                "parameter_unused",
                base + f"/parameters/properties/{name}",
                f"Parameter '{name}' of '{tool.name}' is not used by its binding.",
                f'Map it in the binding ("${name}") or remove it.',
            )
        )
    if b.op == "create" and b.merge is None:
        required = set(library.required_fields(b.service, b.collection)) - {"id"}
        missing = sorted(required - set(b.values or {}))
        if missing:
            out.append(
                warning(
                    "binding_missing_required_field",
                    base + "/binding/values",
                    f"Records created by '{tool.name}' lack {', '.join(missing)}.",
                    'Fill them from parameters, fixed values or "$now".',
                )
            )


# --------------------------------------------------------------------------- tasks


def _task(
    out: list[Problem],
    k: int,
    task: TaskSpec,
    spec: EnvironmentSpec,
    collections: dict[str, set[str]],
) -> None:
    _records(out, task.records, ("tasks", k, "records"), collections)
    ids, fields = _task_universe(task, spec, collections)
    _references(out, spec, task, k)
    _updates(out, k, task, collections, ids)
    _reference_steps(out, k, task, spec)
    grader_problems(out, k, CheckContext(spec, task, collections, fields))


def _updates(
    out: list[Problem],
    k: int,
    task: TaskSpec,
    collections: dict[str, set[str]],
    ids: dict[tuple[str, str], set[str]],
) -> None:
    """Each exogenous update, turn by turn, against the ids that exist by then (``ids``
    follows the creates and deletes)."""
    for j, turn in enumerate(task.turns):
        for u, up in enumerate(turn.updates):
            ptr = pointer("tasks", k, "turns", j, "updates", u)
            if not _where(out, ptr, up.service, up.collection, collections):
                continue
            key = (up.service, up.collection)
            if up.op == "create":
                _created_record(out, ptr, up, ids[key])
            elif up.id not in ids[key]:
                out.append(
                    error(
                        "update_target_missing",
                        ptr + "/id",
                        f"Turn {j} {up.op}s {up.service}.{up.collection} record "
                        f"'{up.id}', which does not exist at that point.",
                        "Target an existing record id, or create it first.",
                    )
                )
            elif up.op == "delete":
                ids[key].discard(up.id)


def _created_record(out: list[Problem], ptr: str, up: Update, ids: set[str]) -> None:
    """A create update's id is new and its record has the fields its kind requires."""
    new_id = (up.values or {}).get("id", up.id)
    if new_id is not None and new_id in ids:
        out.append(
            error(
                "duplicate_id",
                ptr,
                f"Update creates '{new_id}' in {up.service}.{up.collection}, which already exists.",
                "Use a new id or an update op.",
            )
        )
    missing = [
        f
        for f in library.required_fields(up.service, up.collection)
        if f != "id" and f not in (up.values or {})
    ]
    if missing:
        out.append(
            error(
                "record_missing_field",
                ptr + "/values",
                f"The created record lacks {', '.join(missing)}.",
                "Add the fields the service kind requires.",
            )
        )
    if new_id is not None:
        ids.add(new_id)


def _reference_steps(out: list[Problem], k: int, task: TaskSpec, spec: EnvironmentSpec) -> None:
    """One reference step per existing turn, each call sound."""
    n_turns = len(task.turns)
    seen_turns: set[int] = set()
    for s, step in enumerate(task.reference_solution):
        ptr = pointer("tasks", k, "reference_solution", s)
        if step.turn >= n_turns:
            out.append(
                error(
                    "turn_out_of_range",
                    ptr + "/turn",
                    f"Step for turn {step.turn}, but the task has {_turns(n_turns)}.",
                    f"Use 0..{n_turns - 1}.",
                )
            )
        if step.turn in seen_turns:
            out.append(
                error(
                    "duplicate_reference_turn",
                    ptr + "/turn",
                    f"Turn {step.turn} has two reference steps.",
                    "Merge their calls into one step.",
                )
            )
        seen_turns.add(step.turn)
        for c, call in enumerate(step.calls):
            _reference_call(out, f"{ptr}/calls/{c}", call.tool, call.arguments, spec)


def _task_universe(task: TaskSpec, spec: EnvironmentSpec, collections: dict[str, set[str]]):
    """Ids per collection at the start, and every field a record of a collection can have
    (None = open: a tool merges free-form keys into it)."""
    ids: dict[tuple[str, str], set[str]] = {}
    fields: dict[tuple[str, str], set[str] | None] = {}
    for service, cols in spec.services.items():
        for name, records in cols.items():
            ids[(service, name)] = {r["id"] for r in records}
            fields[(service, name)] = set(library.required_fields(service, name)) | {
                f for r in records for f in r
            }
    for service, cols in task.records.items():
        for name, records in cols.items():
            if (service, name) in ids:
                ids[(service, name)] |= {r["id"] for r in records}
                fields[(service, name)] |= {f for r in records for f in r}  # type: ignore[operator]
    for turn in task.turns:
        for up in turn.updates:
            if fields.get((up.service, up.collection)) is not None:
                fields[(up.service, up.collection)] |= set(up.values or {})  # type: ignore[operator]
    for tool in spec.tools:
        key = (tool.binding.service, tool.binding.collection)
        if key not in fields:
            continue
        if tool.binding.merge is not None:
            fields[key] = None
        elif fields[key] is not None and tool.binding.op in ("create", "update"):
            fields[key] |= set(tool.binding.values or {})  # type: ignore[operator]
    return ids, fields


def _references(out: list[Problem], spec: EnvironmentSpec, task: TaskSpec, k: int) -> None:
    """Library cross-references (e.g. ticket.customer_id -> crm.customers) over the merged
    initial state; env records are reported at their env pointer."""
    for ref in library.CROSS_REFERENCES:
        target = spec.services.get(ref.target_service, {}).get(ref.target_collection)
        if target is None or ref.collection not in spec.services.get(ref.service, {}):
            continue
        known = {r["id"] for r in target}
        known |= {
            r["id"] for r in task.records.get(ref.target_service, {}).get(ref.target_collection, [])
        }
        sources = [
            (("services",), spec.services[ref.service][ref.collection]),
            (("tasks", k, "records"), task.records.get(ref.service, {}).get(ref.collection, [])),
        ]
        for base, records in sources:
            for i, record in enumerate(records):
                value = record.get(ref.field)
                if value is None:
                    continue
                values = value if isinstance(value, list) else [value]
                for v in values:
                    if not isinstance(v, str) or v not in known:
                        out.append(
                            error(
                                "dangling_reference",
                                pointer(*base, ref.service, ref.collection, i, ref.field),
                                f"{ref.service}.{ref.collection} record '{record['id']}' has "
                                f"{ref.field} '{v}', but {ref.target_service}."
                                f"{ref.target_collection} has no such id.",
                                f"Use an existing {ref.target_service}.{ref.target_collection} id "
                                "or add that record.",
                            )
                        )


def _reference_call(
    out: list[Problem], ptr: str, name: str, arguments: dict[str, Any], spec: EnvironmentSpec
) -> None:
    tool = spec.tool(name)
    if tool is None:
        out.append(
            error(
                "unknown_tool",
                ptr + "/tool",
                f"The reference solution calls '{name}', which is not declared.",
                f"Use one of: {', '.join(t.name for t in spec.tools) or 'none'}.",
            )
        )
        return
    if schema_problem(tool.parameters) is not None:
        return
    for e in sorted(
        validator_for(tool.parameters).iter_errors(arguments), key=lambda e: list(e.absolute_path)
    )[:5]:
        out.append(
            error(
                "reference_arguments_invalid",
                pointer(*ptr.strip("/").split("/"), "arguments", *e.absolute_path),
                f"Arguments for '{name}' fail its schema: {e.message}",
                "Make the reference arguments match the tool's parameters.",
            )
        )
