"""Semantic faults found without running the task: checks that can never or always hold.

The JMESPath shape analysis (as in ``queries.py``: root -> service -> collection -> record
-> field) is extended with value types: a record field's type is the set of JSON types its
values take in the records, the updates and the bindings' fixed values (a field filled from
a parameter takes the parameter's declared type). A state check whose operator cannot apply
to the query's type (a list compared with ``==`` to a string, ``count`` of a number, the
order of two booleans) always gives the same answer: ``check_type_mismatch``. A check
confined to a window it cannot see (a ``tool_call`` with ``during_turn`` after the grader's
``at_turn``) is ``check_vacuous``. A search binding over fields no record has is
``binding_unknown_field``. A clarification task whose first message already states the fact
the user should only reveal when asked is ``clarification_fact_given``.

This module also gathers the other issue-11 static checks (``semantic_problems``).
"""

from __future__ import annotations

from typing import Any

from jmespath import parser as jmespath_parser
from jmespath.exceptions import JMESPathError

from .. import library
from ..bindings import placeholder_name
from ..bounded_query import QueryBudgetExceeded
from ..bounded_query import search as bounded_search
from ..checks import MAX_DEPTH
from ..problems import Problem, error, pointer
from ..spec_model import EnvironmentSpec, TaskSpec
from ..spec_schema import json_type
from .flow import clarification_problems, information_flow_problems
from .hygiene import identifier_problems, instruction_problems, required_problems
from .integrity import attempt_counting_problems, binding_problems, update_problems
from .known import known_problems
from .negation import negation_problems
from .ranges import range_problems
from .rules import notice_problems, safety_pattern_problems
from .stated import stated_rule_problems

ANY = "any"
_FUNC_TYPES = {
    "length": "number", "abs": "number", "ceil": "number", "floor": "number", "sum": "number",
    "avg": "number", "to_number": "number", "contains": "boolean", "starts_with": "boolean",
    "ends_with": "boolean", "join": "string", "to_string": "string", "type": "string",
    "lower": "string",
    "keys": "array", "values": "array", "sort": "array", "sort_by": "array", "reverse": "array",
    "map": "array", "to_array": "array", "merge": "object",
}  # fmt: skip
_LIST_NODES = {"projection", "filter_projection", "flatten", "slice", "multi_select_list",
               "value_projection"}  # fmt: skip


def _properties(tool: Any) -> dict[str, Any]:
    """A tool's declared parameters, {} when its schema is malformed (reported elsewhere)."""
    props = tool.parameters.get("properties") if isinstance(tool.parameters, dict) else None
    return props if isinstance(props, dict) else {}


def _binding_value_type(value: Any, props: dict[str, Any]) -> str:
    """The JSON type a binding's value writes: a placeholder's is its parameter's."""
    name = placeholder_name(value)
    if name is None:
        return "string" if value == "$now" else json_type(value)
    declared = props.get(name, {})
    t = declared.get("type") if isinstance(declared, dict) else None
    return {"integer": "number"}.get(t, t) if isinstance(t, str) else ANY


class _Types:
    """JSON types each record field takes, per (service, collection)."""

    def __init__(self, spec: EnvironmentSpec, task: TaskSpec):
        self.types: dict[tuple[str, str, str], set[str]] = {}
        self.open: set[tuple[str, str]] = set()
        self._add_records(spec, task)
        self._add_updates(task)
        self._add_bindings(spec)
        self._add_required_fields(spec)

    def _add_records(self, spec: EnvironmentSpec, task: TaskSpec) -> None:
        for source in (spec.services, task.records):
            for service, cols in source.items():
                for name, records in cols.items():
                    for r in records:
                        for f, v in r.items():
                            self.add(service, name, f, json_type(v))

    def _add_updates(self, task: TaskSpec) -> None:
        for turn in task.turns:
            for up in turn.updates:
                for f, v in (up.values or {}).items():
                    self.add(up.service, up.collection, f, json_type(v))

    def _add_bindings(self, spec: EnvironmentSpec) -> None:
        """The fields create / update bindings write; a merge leaves its collection open."""
        for tool in spec.tools:
            b = tool.binding
            if b.merge is not None:
                self.open.add((b.service, b.collection))
            if b.op not in ("create", "update") or not isinstance(b.values, dict):
                continue
            props = _properties(tool)
            for f, v in b.values.items():
                self.add(b.service, b.collection, f, _binding_value_type(v, props))

    def _add_required_fields(self, spec: EnvironmentSpec) -> None:
        for service, cols in spec.services.items():
            for name in cols:
                for f in library.required_fields(service, name):
                    self.types.setdefault((service, name, f), set())

    def add(self, service: str, collection: str, f: str, t: str) -> None:
        self.types.setdefault((service, collection, f), set()).add(t)

    def of(self, service: str, collection: str, f: str) -> str:
        if (service, collection) in self.open:
            return ANY
        found = self.types.get((service, collection, f))
        if not found or ANY in found or len(found - {"null"}) != 1:
            return ANY
        return next(iter(found - {"null"}))

    def fields(self, service: str, collection: str) -> set[str] | None:
        if (service, collection) in self.open:
            return None
        return {f for (s, c, f) in self.types if (s, c) == (service, collection)}


class _Shape:
    """(type, ctx) of a JMESPath node; ctx follows root -> svc -> coll -> rec."""

    def __init__(self, spec: EnvironmentSpec, types: _Types):
        self.services = {s: set(c) for s, c in spec.services.items()}
        self.types = types

    def of(self, node: Any, ctx: tuple | None) -> tuple[str, tuple | None]:
        if not isinstance(node, dict):
            return ANY, None
        kind = node.get("type")
        children = node.get("children") or []
        if kind == "literal":
            return json_type(node.get("value")), None
        if kind in ("comparator", "not_expression"):
            return "boolean", None
        if kind == "function_expression":
            return _FUNC_TYPES.get(node.get("value"), ANY), None
        if kind == "multi_select_dict":
            return "object", None
        if kind in _LIST_NODES:
            return "array", None
        if kind in ("current", "identity"):
            return self._ctx_type(ctx), ctx
        if kind == "field":
            return self.field(node.get("value"), ctx)
        if kind == "subexpression":
            t: str = ANY
            for child in children:
                t, ctx = self.of(child, ctx)
                if ctx is None and child is not children[-1]:
                    return ANY, None
            return t, ctx
        if kind == "pipe" and len(children) == 2:
            _, left = self.of(children[0], ctx)
            return self.of(children[1], left)
        if kind == "index_expression" and len(children) == 2:
            _, left = self.of(children[0], ctx)
            if left and left[0] == "coll" and children[1].get("type") == "index":
                return "object", ("rec", *left[1:])
            return ANY, None
        return ANY, None

    def _ctx_type(self, ctx: tuple | None) -> str:
        if ctx is None:
            return ANY
        return {"root": "object", "svc": "object", "coll": "array", "rec": "object"}[ctx[0]]

    def field(self, name: Any, ctx: tuple | None) -> tuple[str, tuple | None]:
        if ctx == ("root",) and name in self.services:
            return "object", ("svc", name)
        if ctx and ctx[0] == "svc" and name in self.services.get(ctx[1], ()):
            return "array", ("coll", ctx[1], name)
        if ctx and ctx[0] == "rec":
            return self.types.of(ctx[1], ctx[2], name), None
        return ANY, None


def _parse(query: Any) -> Any:
    try:
        return jmespath_parser.Parser().parse(query).parsed
    except (JMESPathError, ValueError, TypeError, RecursionError):
        return None


def _mismatch(op: str, result: str, value: Any, has_value: bool) -> str | None:
    """Why ``op`` over a ``result``-typed query against ``value`` has a fixed answer."""
    if result == ANY:
        return None
    vt = json_type(value) if has_value else None
    if op == "count" and result in ("number", "string", "boolean"):
        return f"count of a {result} is always 1"
    if op in ("exists", "absent") and result == "boolean":
        return f"a boolean always exists ('{op}' has a fixed answer)"
    if op in ("==", "!=") and has_value and vt != "null" and result != vt:
        fixed = "never" if op == "==" else "always"
        return f"a {result} is {fixed} equal to a {vt} ('{op}' has a fixed answer)"
    if op in (">", ">=", "<", "<="):
        if result not in ("number", "string"):
            return f"a {result} has no order ('{op}' is always false)"
        if has_value and vt != result:
            return f"a {result} is never ordered against a {vt} ('{op}' is always false)"
    if op == "contains" and result in ("number", "boolean", "null"):
        return f"a {result} contains nothing ('contains' is always false)"
    if op == "contains" and result == "string" and has_value and vt != "string":
        return f"a string never contains a {vt}"
    if op == "matches" and result in ("number", "boolean", "object", "null"):
        return f"a {result} is never matched by a regex ('matches' is always false)"
    return None


def _leaves(check: Any, rel: tuple = (), depth: int = 0):
    if not isinstance(check, dict) or depth > MAX_DEPTH:
        return
    for mode in ("all", "any"):
        for i, child in enumerate(check.get(mode) or ()):
            yield from _leaves(child, (*rel, mode, i), depth + 1)
    if "not" in check:
        yield from _leaves(check["not"], (*rel, "not"), depth + 1)
    if "kind" in check:
        yield rel, check


def check_type_problems(spec: EnvironmentSpec, k: int) -> list[Problem]:
    task = spec.tasks[k]
    types = _Types(spec, task)
    shape = _Shape(spec, types)
    out: list[Problem] = []
    initial: dict | None = None
    for g, grader in enumerate(task.graders):
        base = ("tasks", k, "graders", g, "check")
        for rel, leaf in _leaves(grader.check):
            ptr = pointer(*base, *rel)
            kind = leaf.get("kind")
            for slot in ("query", "mentions"):
                if isinstance(leaf.get(slot), str):
                    initial = initial if initial is not None else _initial_state(spec, task)
                    out += _budget(leaf[slot], initial, f"{ptr}/{slot}", grader.id)
            if kind == "state":
                ast = _parse(leaf.get("query"))
                if ast is None:
                    continue
                result, _ = shape.of(ast, ("root",))
                why = _mismatch(leaf.get("op"), result, leaf.get("value"), "value" in leaf)
                if why:
                    out.append(
                        error(
                            "check_type_mismatch",
                            ptr,
                            f"Grader '{grader.id}': the query yields a {result} and {why}, "
                            "whatever the agent does.",
                            _type_hint(result),
                        )
                    )
            elif kind == "tool_call":
                out += _argument_types(spec, leaf, ptr, grader.id)
            window = leaf.get("during_turn") if kind == "tool_call" else leaf.get("turn")
            if grader.at_turn is not None and isinstance(window, int) and window > grader.at_turn:
                out.append(
                    error(
                        "check_vacuous",
                        ptr + ("/during_turn" if kind == "tool_call" else "/turn"),
                        f"Grader '{grader.id}' is graded at turn {grader.at_turn} but looks at "
                        f"turn {window}, which it never sees: the check has a fixed answer.",
                        "Make at_turn at least the turn the check looks at, or drop at_turn.",
                    )
                )
    return out


def _initial_state(spec: EnvironmentSpec, task: TaskSpec) -> dict:
    from ..state import WorldState, build_base

    # a read-only view: queries never write
    return WorldState(build_base(spec.services, task.records)).view()


def _budget(query: str, state: dict, ptr: str, grader_id: str) -> list[Problem]:
    try:
        bounded_search(query, state)
    except QueryBudgetExceeded as exc:
        return [
            error(
                "query_budget_exceeded",
                ptr,
                f"Grader '{grader_id}': evaluating the query on the initial state: {exc}.",
                "Select the records and fields the check needs; do not build values with "
                "nested multi-selects ([@, @]) or join()/to_string() over large data.",
            )
        ]
    except JMESPathError:
        return []  # a type error on this state is not a budget problem (the check fails)
    return []


def _type_hint(result: str) -> str:
    if result == "array":
        return (
            "A projection or filter yields a list: compare length(...) with a number, use "
            "'contains' for membership, or select one element ([0]) first."
        )
    return "Compare the query's value with a value of the same JSON type."


def _argument_types(spec: EnvironmentSpec, leaf: dict, ptr: str, grader_id: str) -> list:
    tool = spec.tool(leaf.get("tool"))
    props = tool.parameters.get("properties") if tool is not None else None
    if not isinstance(props, dict):
        return []
    out = []
    for arg, matcher in (leaf.get("arguments") or {}).items():
        declared = props.get(arg)
        if not isinstance(declared, dict) or not isinstance(declared.get("type"), str):
            continue
        t = {"integer": "number"}.get(declared["type"], declared["type"])
        if isinstance(matcher, dict) and isinstance(matcher.get("op"), str):
            op, value, has = matcher["op"], matcher.get("value"), "value" in matcher
        else:
            op, value, has = "==", matcher, True
        why = _mismatch(op, t, value, has)
        if why:
            out.append(
                error(
                    "check_type_mismatch",
                    f"{ptr}/arguments/{arg}",
                    f"Grader '{grader_id}': argument '{arg}' is a {t} and {why}.",
                    f"Match '{arg}' with a {t} value (its declared type).",
                )
            )
    return out


def search_field_problems(spec: EnvironmentSpec) -> list[Problem]:
    out: list[Problem] = []
    universes = [_Types(spec, task) for task in spec.tasks] or []
    for t, tool in enumerate(spec.tools):
        b = tool.binding
        if b.op != "search" or not b.fields:
            continue
        known: set[str] = set()
        for types in universes:
            fields = types.fields(b.service, b.collection)
            if fields is None:
                known = set()
                break
            known |= fields
        else:
            if not known or set(b.fields) & known:
                continue
            out.append(
                error(
                    "binding_unknown_field",
                    pointer("tools", t, "binding", "fields"),
                    f"'{tool.name}' searches fields {', '.join(b.fields)}, which no "
                    f"{b.service}.{b.collection} record has: the search never matches.",
                    "Search fields the records have: " + ", ".join(sorted(known)) + ".",
                )
            )
    return out


def semantic_problems(spec: EnvironmentSpec) -> list[Problem]:
    """Every issue-11 static check (static_problems calls this once)."""
    out: list[Problem] = range_problems(spec)
    out += identifier_problems(spec)
    out += required_problems(spec)
    out += binding_problems(spec)
    out += search_field_problems(spec)
    for k in range(len(spec.tasks)):
        out += update_problems(spec, k)
        out += attempt_counting_problems(spec, k)
        out += check_type_problems(spec, k)
        out += negation_problems(spec, k, lambda t=spec.tasks[k]: _initial_state(spec, t))
        out += clarification_problems(spec, k)
        out += information_flow_problems(spec, k)
        out += known_problems(spec, k)
        out += safety_pattern_problems(spec, k) + notice_problems(spec, k)
        out += stated_rule_problems(spec, k)
    out += instruction_problems(spec)
    return list(dict.fromkeys(out))  # an environment record two tasks need: reported once
