"""Static analysis of JMESPath queries against the shape of a task's state.

The analysis follows the evaluation context through the parsed AST: at the root a field
names a service, under a service a collection, under a projection / filter / index of a
collection a record. It reports services and collections that do not exist and record
fields that no record (initial, exogenous or tool-created) can have. Anything it cannot
follow (multi-selects, functions other than sort_by/min_by/max_by/map) it leaves alone, so
it never rejects a query that could be right.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jmespath import parser as jmespath_parser
from jmespath.exceptions import JMESPathError

ROOT = ("root",)
Ctx = tuple | None


@dataclass
class QueryIssue:
    code: str
    message: str
    hint: str


@dataclass
class _Analyzer:
    collections: dict[str, set[str]]
    fields_of: Callable[[str, str], set[str] | None]
    issues: list[QueryIssue] = field(default_factory=list)

    def issue(self, code: str, message: str, hint: str) -> None:
        if all(i.message != message for i in self.issues):
            self.issues.append(QueryIssue(code, message, hint))

    def ev(self, node: Any, ctx: Ctx) -> Ctx:
        if not isinstance(node, dict):
            return None
        kind = node.get("type")
        children = node.get("children", [])
        if kind == "field":
            return self.field(node["value"], ctx)
        if kind in ("current", "identity"):
            return ctx
        if kind == "subexpression":
            for child in children:
                ctx = self.ev(child, ctx)
            return ctx
        if kind == "pipe":
            return self.ev(children[1], self.ev(children[0], ctx))
        if kind == "index_expression":
            return self.index_expression(children, ctx)
        if kind in ("projection", "filter_projection"):
            return self.projection(kind, children, ctx)
        if kind == "flatten":
            inner = self.ev(children[0], ctx)
            return inner if inner and inner[0] == "coll" else None
        if kind == "value_projection":
            self.ev(children[0], ctx)
            self.ev(children[1], None)
            return None
        if kind == "function_expression":
            return self.function(node["value"], children, ctx)
        if kind == "expref":
            self.ev(children[0], None)
            return None
        for child in children:
            self.ev(child, ctx)
        return None

    def index_expression(self, children: list[Any], ctx: Ctx) -> Ctx:
        """``coll[0]`` is a record of the collection, ``coll[1:]`` still the collection."""
        left = self.ev(children[0], ctx)
        if left and left[0] == "coll":
            is_index = isinstance(children[1], dict) and children[1].get("type") == "index"
            return ("rec", *left[1:]) if is_index else left
        return None

    def projection(self, kind: str, children: list[Any], ctx: Ctx) -> Ctx:
        """``coll[*].x`` / ``coll[?cond].x``: the condition and the right side read records;
        only ``coll[*]`` (an identity right side) is still the collection."""
        left = self.ev(children[0], ctx)
        element = ("rec", *left[1:]) if left and left[0] == "coll" else None
        if kind == "filter_projection":
            self.ev(children[2], element)
        right = children[1]
        self.ev(right, element)
        if left and left[0] == "coll" and right.get("type") == "identity":
            return left
        return None

    def function(self, name: str, args: list[Any], ctx: Ctx) -> Ctx:
        plain = [a for a in args if isinstance(a, dict) and a.get("type") != "expref"]
        refs = [a for a in args if isinstance(a, dict) and a.get("type") == "expref"]
        results = [self.ev(a, ctx) for a in plain]
        list_ctx = next((r for r in results if r and r[0] == "coll"), None)
        element = ("rec", *list_ctx[1:]) if list_ctx else None
        for ref in refs:
            self.ev(ref["children"][0], element if name in _ELEMENT_FUNCS else None)
        if name == "sort_by" and list_ctx:
            return list_ctx
        if name in ("max_by", "min_by") and list_ctx:
            return element
        return None

    def field(self, name: str, ctx: Ctx) -> Ctx:
        if ctx == ROOT:
            if name not in self.collections:
                known = ", ".join(sorted(self.collections)) or "none"
                self.issue(
                    "unknown_service",
                    f"The query reads service '{name}', which does not exist.",
                    f"Use one of the services: {known}.",
                )
                return None
            return ("svc", name)
        if ctx and ctx[0] == "svc":
            service = ctx[1]
            if name not in self.collections[service]:
                known = ", ".join(sorted(self.collections[service])) or "none"
                self.issue(
                    "unknown_collection",
                    f"The query reads collection '{service}.{name}', which does not exist.",
                    f"Collections of '{service}': {known}.",
                )
                return None
            return ("coll", service, name)
        if ctx and ctx[0] == "rec":
            known_fields = self.fields_of(ctx[1], ctx[2])
            if known_fields is not None and name not in known_fields:
                self.issue(
                    "query_unknown_field",
                    f"The query reads field '{name}' of "
                    f"{ctx[1]}.{ctx[2]} records, but no record has that field.",
                    "Fields seen in that collection: " + ", ".join(sorted(known_fields)) + ".",
                )
            return None
        return None


_ELEMENT_FUNCS = {"sort_by", "max_by", "min_by", "map"}


def analyze_query(
    query: str,
    collections: dict[str, set[str]],
    fields_of: Callable[[str, str], set[str] | None],
) -> list[QueryIssue]:
    """Issues with ``query``; a compile failure is one ``jmespath_invalid`` issue."""
    try:
        ast = jmespath_parser.Parser().parse(query).parsed
    except (JMESPathError, ValueError, TypeError, RecursionError) as exc:
        return [
            QueryIssue(
                "jmespath_invalid",
                f"The JMESPath does not compile: {exc}".strip(),
                "Check the syntax: quote string literals with '...', use "
                "`...` for JSON literals, [?cond] for filters.",
            )
        ]
    analyzer = _Analyzer(collections, fields_of)
    try:
        analyzer.ev(ast, ROOT)
    except RecursionError:
        return [QueryIssue("jmespath_invalid", "The query nests too deeply.", "Simplify it.")]
    return analyzer.issues
