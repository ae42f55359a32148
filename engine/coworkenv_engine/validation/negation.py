"""A ``not`` over a check that can hold in no reachable state is vacuous (always passes).

What the agent and the world can change is known before anything runs: the collections a
tool binding (create / update / delete) or an exogenous update writes, and, per record
field, the values it can ever take (those of the initial and task records, of updates, of
the bindings' fixed values, and of the parameters that fill it when their schema pins them
with ``enum`` / ``const``; anything else leaves the field open). From that:

* a state check whose query reads only collections nothing writes has one answer in every
  state: it is evaluated on the initial state (a filter that compares a field with a value
  the field can never take is always empty, so the collection it filters may be written);
* a state check comparing a record field (``==``, ``contains`` over a projection,
  ``matches``) with values that field can never take never holds;
* a tool_call check (successful calls) whose argument matcher wants a value the tool's own
  parameter schema refuses matches no successful call;
* a response check mentioning what a query over unwritten collections finds, when it
  finds nothing, fails every reply;
* a regex no text matches (``safe_regex.never_matches``: text after the end, before the
  start, an empty class) fails every reply and every value;
* ``all`` fails when a part can never hold, ``any`` when every part cannot.

Each ``not`` over such a check is ``negation_vacuous`` at the negated check. The query
analysis follows the evaluation context (root -> service -> collection -> record ->
field) like ``queries.py``; a node it does not know makes it answer "may hold".
"""

from __future__ import annotations

import json
from typing import Any

from jmespath import parser as jmespath_parser
from jmespath.exceptions import JMESPathError
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from ..bindings import placeholder_name
from ..checks import MAX_DEPTH, CheckView, _flatten, evaluate, run_query
from ..formats import FORMAT_CHECKER
from ..problems import Problem, error, pointer
from ..safe_regex import UnsafeRegex, never_matches, safe_search
from ..spec_model import EnvironmentSpec, TaskSpec

Key = tuple[str, str]
_TYPE_TAGS = {"string": "s", "number": "n", "integer": "n", "boolean": "b", "array": "j",
              "object": "j"}  # fmt: skip
_ALL = ("*", "*")


def _vkey(value: Any) -> tuple:
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, (int, float)):
        return ("n", value)  # 1 and 1.0 are one key; a huge int is never made a float
    if isinstance(value, str):
        return ("s", value)
    return ("j", json.dumps(value, sort_keys=True, default=str))


class World:
    """What can ever be in a task's state: written collections and each field's values."""

    def __init__(self, spec: EnvironmentSpec, task: TaskSpec):
        self.collections = {s: set(c) for s, c in spec.services.items()}
        self.written: set[Key] = set()
        self.open: set[Key] = set()  # a merge binding: any field, any value
        self.values: dict[tuple[str, str, str], set[tuple] | None] = {}
        # a field filled from an unpinned parameter: the JSON type tags it can then take
        self.open_types: dict[tuple[str, str, str], set[str] | None] = {}
        for source in (spec.services, task.records):
            for service, cols in source.items():
                for name, records in cols.items():
                    for record in records:
                        for f, v in record.items():
                            self._add(service, name, f, v)
        for turn in task.turns:
            for up in turn.updates:
                self.written.add((up.service, up.collection))
                if up.op == "create" and up.id is not None:
                    self._add(up.service, up.collection, "id", up.id)
                for f, v in (up.values or {}).items():
                    self._add(up.service, up.collection, f, v)
        for tool in spec.tools:
            b = tool.binding
            if not b.changes_state:
                continue
            key = (b.service, b.collection)
            self.written.add(key)
            if b.merge:
                self.open.add(key)
            if b.op == "create":
                self.values[(*key, "id")] = None  # generated ids
            props = tool.parameters.get("properties") if isinstance(tool.parameters, dict) else {}
            for f, raw in (b.values or {}).items() if isinstance(b.values, dict) else ():
                self._bind(key, f, raw, props if isinstance(props, dict) else {})

    def _add(self, service: str, collection: str, f: str, value: Any) -> None:
        found = self.values.setdefault((service, collection, f), set())
        if found is not None:
            found.add(_vkey(value))

    def _bind(self, key: Key, f: str, raw: Any, props: dict) -> None:
        name = placeholder_name(raw)
        if isinstance(raw, str) and raw.startswith("$$"):
            return self._add(*key, f, raw[1:])
        if isinstance(raw, str) and raw.startswith("$") and name is None:  # $now
            self.values[(*key, f)] = None
            return None
        if name is None:
            return self._add(*key, f, raw)
        schema = props.get(name)
        pinned = None
        if isinstance(schema, dict) and "const" in schema:
            pinned = [schema["const"]]
        elif isinstance(schema, dict) and isinstance(schema.get("enum"), list):
            pinned = schema["enum"]
        if pinned is None:
            declared = schema.get("type") if isinstance(schema, dict) else None
            tag = _TYPE_TAGS.get(declared) if isinstance(declared, str) else None
            found = self.open_types.setdefault((*key, f), set())
            if tag is None or found is None:
                self.open_types[(*key, f)] = None
            else:
                found.add(tag)
        else:
            for v in pinned:
                self._add(*key, f, v)
        return None

    def domain(self, service: str, collection: str, f: str) -> set[tuple] | None:
        """The values field ``f`` can take (None: any); absent fields are null."""
        if (service, collection) in self.open or (service, collection, f) in self.open_types:
            return None
        return self.values.get((service, collection, f), set())

    def can_hold(self, service: str, collection: str, f: str, value: Any) -> bool:
        """Whether field ``f`` can ever hold ``value`` (by value when the field is closed,
        else by JSON type)."""
        if (service, collection) in self.open:
            return True
        key, found = _vkey(value), self.values.get((service, collection, f))
        if found is None:
            return True
        if key in found:
            return True
        if (service, collection, f) not in self.open_types:
            return False
        types = self.open_types[(service, collection, f)]
        return types is None or key[0] in types


class _Reach:
    """Which collections a query reads, and what its result is (see the module doc)."""

    def __init__(self, world: World):
        self.world = world
        self.touched: list[Key] = []
        self.emptied: set[Key] = set()
        self.unknown = False

    def escalate(self, ctx: Any) -> None:
        if ctx == ("root",):
            self.touched.append(_ALL)
        elif ctx and ctx[0] == "svc":
            self.touched.append((ctx[1], "*"))

    def ev(self, node: Any, ctx: Any) -> Any:
        if not isinstance(node, dict):
            self.unknown = True
            return None
        kind, children = node.get("type"), node.get("children") or []
        if kind == "field":
            return self.field(node.get("value"), ctx)
        if kind in ("current", "identity"):
            return ctx
        if kind in ("literal", "index", "slice"):
            return None
        if kind == "subexpression":
            for child in children:
                ctx = self.ev(child, ctx)
            return ctx
        if kind == "pipe" and len(children) == 2:
            return self.ev(children[1], self.ev(children[0], ctx))
        if kind == "index_expression" and len(children) == 2:
            return self.index_expression(children, ctx)
        if kind == "projection" and len(children) == 2:
            return self.project(self.ev(children[0], ctx), children[1])
        if kind == "filter_projection" and len(children) == 3:
            return self.filter_projection(children, ctx)
        if kind == "expref" and children:
            self.ev(children[0], None)
            return None
        if kind == "value_projection" and len(children) == 2:
            self.escalate(self.ev(children[0], ctx))
            self.ev(children[1], None)
            return None
        if kind in ("flatten", "function_expression", "comparator",
                    "and_expression", "or_expression", "not_expression", "multi_select_list",
                    "multi_select_dict", "key_val_pair"):  # fmt: skip
            for child in children:
                self.escalate(self.ev(child, ctx))
            return None
        self.unknown = True
        return None

    def index_expression(self, children: list[Any], ctx: Any) -> Any:
        """``list[0]`` is one of its records (or values), ``list[1:]`` still the list."""
        left = self.ev(children[0], ctx)
        self.escalate(left)
        step = children[1].get("type") if isinstance(children[1], dict) else None
        if left and left[0] in ("list", "vlist") and step in ("index", "slice"):
            if step == "slice":
                return left
            return ("rec", *left[1:]) if left[0] == "list" else ("val", *left[1:])
        return None

    def filter_projection(self, children: list[Any], ctx: Any) -> Any:
        """``list[?cond]``: a condition no record can meet empties the list instead of
        reading it (when the condition reads nothing else)."""
        mark = len(self.touched)
        left = self.ev(children[0], ctx)
        self.escalate(left)
        if left and left[0] == "list":
            never = self.never_true(children[2], left[1], left[2])
            self.ev(children[2], ("rec", left[1], left[2]))
            if never and set(self.touched[mark:]) == {(left[1], left[2])}:
                del self.touched[mark:]
                self.emptied.add((left[1], left[2]))
        else:
            self.ev(children[2], None)
        return self.project(left, children[1])

    def field(self, name: Any, ctx: Any) -> Any:
        if ctx == ("root",):
            return ("svc", name) if name in self.world.collections else None
        if ctx and ctx[0] == "svc":
            if name in self.world.collections.get(ctx[1], ()):
                self.touched.append((ctx[1], name))
                return ("list", ctx[1], name)
            return None
        if ctx and ctx[0] == "rec":
            return ("val", ctx[1], ctx[2], name)
        return None

    def project(self, left: Any, right: Any) -> Any:
        self.escalate(left)
        if not left or left[0] not in ("list", "vlist"):
            self.ev(right, None)
            return None
        elem = ("rec", *left[1:]) if left[0] == "list" else ("val", *left[1:])
        out = self.ev(right, elem)
        if out and out[0] == "rec":
            return ("list", *out[1:])
        if out and out[0] == "val":
            return ("vlist", *out[1:])
        return None

    def never_true(self, cond: Any, service: str, collection: str) -> bool:
        """A filter condition no record of the collection can ever satisfy."""
        if not isinstance(cond, dict):
            return False
        children = cond.get("children") or []
        if cond.get("type") == "and_expression":
            return any(self.never_true(c, service, collection) for c in children)
        if cond.get("type") == "or_expression":
            return all(self.never_true(c, service, collection) for c in children)
        if cond.get("type") != "comparator" or cond.get("value") != "eq" or len(children) != 2:
            return False
        a, b = children
        if b.get("type") == "field" and a.get("type") == "literal":
            a, b = b, a
        if a.get("type") != "field" or b.get("type") != "literal" or b.get("value") is None:
            return False
        return not self.world.can_hold(service, collection, a.get("value"), b.get("value"))


def _parse(query: Any) -> Any:
    try:
        return jmespath_parser.Parser().parse(query).parsed
    except (JMESPathError, ValueError, TypeError, RecursionError):
        return None


class Negations:
    """Finds the ``not`` checks of a task whose negated check can never hold."""

    def __init__(self, spec: EnvironmentSpec, task: TaskSpec, initial: Any):
        self.spec = spec
        self.world = World(spec, task)
        self.initial = initial  # a callable giving the initial state view (built lazily)
        self._state: Any = None

    def why_never(self, check: Any, depth: int = 0) -> str | None:
        if not isinstance(check, dict) or depth > MAX_DEPTH:
            return None
        if isinstance(check.get("all"), list):
            for part in check["all"]:
                why = self.why_never(part, depth + 1)
                if why:
                    return why
            return None
        if isinstance(check.get("any"), list) and check["any"]:
            whys = [self.why_never(part, depth + 1) for part in check["any"]]
            return "; ".join(w for w in whys if w) if all(whys) else None
        pattern = check.get("matches") if check.get("kind") == "response" else None
        if check.get("kind") == "state" and check.get("op") == "matches":
            pattern = check.get("value")
        if isinstance(pattern, str) and never_matches(pattern):
            return f"no text at all matches the regex {pattern[:80]!r}"
        if check.get("kind") == "state":
            return self._state_never(check)
        if check.get("kind") == "response" and isinstance(check.get("mentions"), str):
            return self._mentions_never(check)
        if check.get("kind") == "tool_call":
            return self._tool_call_never(check)
        return None

    def _reach(self, query: Any) -> tuple[_Reach, Any, bool] | None:
        """The query's reach, its result shape, and whether it reads only what nothing
        writes (None: a query the analysis does not follow)."""
        ast = _parse(query)
        if ast is None:
            return None
        reach = _Reach(self.world)
        result = reach.ev(ast, ("root",))
        reach.escalate(result)
        if reach.unknown:
            return None
        written = self.world.written
        static = all(
            (key == _ALL and not written)
            or (key[1] == "*" and key != _ALL and all(s != key[0] for s, _ in written))
            or (key[1] != "*" and key not in written)
            for key in reach.touched
        )
        return reach, result, static

    def _state_never(self, check: dict) -> str | None:
        found = self._reach(check.get("query"))
        if found is None:
            return None
        reach, result, static = found
        if static:
            return self._constant_never(check, reach)
        return self._field_never(check, result)

    def _mentions_never(self, check: dict) -> str | None:
        """A response check mentioning what a query finds, when the query can find nothing."""
        found = self._reach(check.get("mentions"))
        if found is None or not found[2]:
            return None
        try:
            values = list(_flatten(run_query(check["mentions"], self._state_for(found[0]))))
        except (JMESPathError, ValueError, TypeError, RecursionError):
            return None
        if values:
            return None
        return f"{self._reads(found[0])}; the query finds nothing to mention"

    def _state_for(self, reach: _Reach) -> Any:
        if self._state is None:
            self._state = self.initial()
        state = self._state
        emptied = reach.emptied & self.world.written
        if emptied:
            state = {s: dict(cols) for s, cols in state.items()}
            for s, c in emptied:
                state[s][c] = []
        return state

    def _reads(self, reach: _Reach) -> str:
        unwritten = [*reach.touched, *(reach.emptied - self.world.written)]
        read = sorted({f"{s}.{c}" for s, c in unwritten if c != "*"})
        parts = [f"it reads {', '.join(read)}, which no tool or update writes"] if read else []
        emptied = reach.emptied & self.world.written
        if emptied:
            filtered = ", ".join(sorted(f"{s}.{c}" for s, c in emptied))
            parts.append(f"it filters {filtered} on a value no record can hold")
        return " and ".join(parts) or "it reads nothing the run changes"

    def _constant_never(self, check: dict, reach: _Reach) -> str | None:
        view = CheckView(state=self._state_for(reach), calls=[], replies=[], last_turn=0,
                         messages=[])  # fmt: skip
        status, evidence = evaluate(check, view)
        if status != "failed" or "error" in evidence:
            return None
        return f"{self._reads(reach)}; on what it reads the check fails"

    def _field_never(self, check: dict, result: Any) -> str | None:
        if not result or result[0] not in ("val", "vlist") or "value" not in check:
            return None
        op, value = check.get("op"), check.get("value")
        if check.get("ignore_case"):
            return None
        _, service, collection, f = result
        domain = self.world.domain(service, collection, f)
        if value is None:
            return None
        single = result[0] == "val"
        if (op == "==" and single) or (op == "contains" and not single):
            if self.world.can_hold(service, collection, f, value):
                return None
        elif op == "matches" and isinstance(value, str) and domain is not None:
            texts = [v[1] for v in domain if v[0] == "s"]
            try:
                if any(safe_search(value, t) for t in texts):
                    return None
            except UnsafeRegex:
                return None
        else:
            return None
        held = "values of other types"
        if domain is not None:
            held = ", ".join(sorted(json.dumps(v[1], default=str) for v in domain)[:8])
        return (
            f"{service}.{collection} field '{f}' only ever holds {held or 'nothing'}, "
            f"so '{op}' {json.dumps(value, default=str)[:60]} never holds"
        )

    def _tool_call_never(self, check: dict) -> str | None:
        if check.get("called", True) is False or check.get("succeeded", True) is not True:
            return None
        tool = self.spec.tool(check.get("tool"))
        if tool is None:
            return f"no tool is named '{check.get('tool')}'"
        props = tool.parameters.get("properties") if isinstance(tool.parameters, dict) else None
        matchers = check.get("arguments")
        if not isinstance(props, dict) or not isinstance(matchers, dict):
            return None
        for arg, matcher in matchers.items():
            schema = props.get(arg)
            if isinstance(matcher, dict) and isinstance(matcher.get("op"), str):
                if matcher["op"] != "==" or "value" not in matcher or matcher.get("ignore_case"):
                    continue
                matcher = matcher["value"]
            if not isinstance(schema, dict) or matcher is None:
                continue
            try:
                ok = Draft202012Validator(schema, format_checker=FORMAT_CHECKER).is_valid(matcher)
            except (SchemaError, ValueError, TypeError, RecursionError):
                continue
            if not ok:
                return (
                    f"'{tool.name}' refuses {json.dumps(matcher, default=str)[:60]} for "
                    f"'{arg}' (its parameter schema), so no successful call matches"
                )
        return None


def _nots(check: Any, rel: tuple = (), depth: int = 0):
    if not isinstance(check, dict) or depth > MAX_DEPTH:
        return
    for mode in ("all", "any"):
        parts = check.get(mode)
        for i, part in enumerate(parts if isinstance(parts, list) else ()):
            yield from _nots(part, (*rel, mode, i), depth + 1)
    if "not" in check:
        yield (*rel, "not"), check["not"]
        yield from _nots(check["not"], (*rel, "not"), depth + 1)


def negation_problems(spec: EnvironmentSpec, k: int, initial: Any) -> list[Problem]:
    """``initial``: a callable giving the task's initial state view (built at most once)."""
    task = spec.tasks[k]
    found = [
        (g, rel, inner)
        for g, grader in enumerate(task.graders)
        for rel, inner in _nots(grader.check)
    ]
    if not found:
        return []
    negations = Negations(spec, task, initial)
    out: list[Problem] = []
    for g, rel, inner in found:
        why = negations.why_never(inner)
        if why:
            out.append(
                error(
                    "negation_vacuous",
                    pointer("tasks", k, "graders", g, "check", *rel),
                    f"Grader '{task.graders[g].id}': the check under 'not' can never hold "
                    f"({why}), so the 'not' passes whatever the agent does.",
                    "Negate something the agent could actually do wrong: a value a tool can "
                    "write (see the tool's parameter schema and binding), in a collection "
                    "a tool writes.",
                )
            )
    return out
