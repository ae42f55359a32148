"""JMESPath queries compiled once into Python closures, with the interpreter's results.

``bounded_query`` evaluates a query by walking its AST with an interpreter that counts every
node it visits (the work budget). Grading evaluates the same few queries over many states,
and the walk's dispatch (a method lookup and three calls per node) costs more than the work.
Here each AST node becomes one closure, built once per query: the same operations in the
same order as ``jmespath.visitor.TreeInterpreter`` (its comparison, truth and number rules
are imported, not rewritten), and the same count — one step per node evaluated, checked
before the node runs — so a query goes over the budget exactly where the interpreter would.
Node kinds that build values the budget measures (multi-selects) and the rare ones are
handed to the interpreter itself, sharing its step count; so are queries nested deeper than
``MAX_COMPILED_DEPTH`` (the interpreter's own recursion limit stays where it was).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from jmespath.visitor import _equals, _is_actual_number, _is_comparable

# An evaluator: (value, interpreter) -> result; the interpreter holds the step count.
Fn = Callable[[Any, Any], Any]

MAX_COMPILED_DEPTH = 60

_ORDER = {"lt": operator.lt, "gt": operator.gt, "lte": operator.le, "gte": operator.ge}


def _is_false(value: Any) -> bool:
    # TreeInterpreter._is_false, as it is written
    return value == "" or value == [] or value == {} or value is None or value is False


def depth(node: Any) -> int:
    """The nesting depth of an AST (iteratively: a deep tree must not recurse here)."""
    deepest, stack = 0, [(node, 1)]
    while stack:
        n, d = stack.pop()
        deepest = max(deepest, d)
        for child in n.get("children", ()) if isinstance(n, dict) else ():
            if isinstance(child, dict):
                stack.append((child, d + 1))
    return deepest


Step = Callable[[Any], None]


def compile_node(node: dict[str, Any], step: Step) -> Fn:
    """The evaluator of ``node``; ``step(interpreter)`` counts one step (and raises past the
    budget), as the interpreter's ``visit`` does before it dispatches."""
    build = _BUILDERS.get(node["type"])
    if node["type"] == "function_expression" and any(
        c["type"] == "expref" for c in node.get("children", [])
    ):
        build = None
    if build is not None:
        return build(node, step)

    # multi-selects (measured by the budget), exprefs, flatten, slices, value projections:
    # the interpreter's own visit, which counts its steps on the same interpreter
    def interpreted(v, it):
        return it.visit(node, v)

    return interpreted


def _children(node: dict[str, Any], step: Step) -> list[Fn]:
    return [compile_node(c, step) for c in node.get("children", [])]


def _field(node: dict[str, Any], step: Step) -> Fn:
    key = node["value"]

    def field(v, it):
        step(it)
        try:
            return v.get(key)
        except AttributeError:
            return None

    return field


def _chain(node: dict[str, Any], step: Step) -> Fn:
    parts = _children(node, step)

    def chain(v, it):
        step(it)
        for part in parts:
            v = part(v, it)
        return v

    return chain


def _current(node: dict[str, Any], step: Step) -> Fn:
    def current(v, it):
        step(it)
        return v

    return current


def _literal(node: dict[str, Any], step: Step) -> Fn:
    literal = node["value"]

    def constant(v, it):
        step(it)
        return literal

    return constant


def _comparator(node: dict[str, Any], step: Step) -> Fn:
    left, right = _children(node, step)
    op = node["value"]
    if op in ("eq", "ne"):
        negate = op == "ne"

        def equality(v, it):
            step(it)
            same = _equals(left(v, it), right(v, it))
            return not same if negate else same

        return equality
    order = _ORDER[op]

    def ordering(v, it):
        step(it)
        a, b = left(v, it), right(v, it)
        if not (_is_comparable(a) and _is_comparable(b)):
            return None
        return order(a, b)

    return ordering


def _and(node: dict[str, Any], step: Step) -> Fn:
    left, right = _children(node, step)

    def both(v, it):
        step(it)
        matched = left(v, it)
        if _is_false(matched):
            return matched
        return right(v, it)

    return both


def _or(node: dict[str, Any], step: Step) -> Fn:
    left, right = _children(node, step)

    def either(v, it):
        step(it)
        matched = left(v, it)
        if _is_false(matched):
            matched = right(v, it)
        return matched

    return either


def _not(node: dict[str, Any], step: Step) -> Fn:
    (inner,) = _children(node, step)

    def negation(v, it):
        step(it)
        original = inner(v, it)
        if _is_actual_number(original) and original == 0:
            return False
        return not original

    return negation


def _filter_projection(node: dict[str, Any], step: Step) -> Fn:
    base_fn, then, condition = _children(node, step)

    def filtered(v, it):
        step(it)
        base = base_fn(v, it)
        if not isinstance(base, list):
            return None
        collected = []
        for element in base:
            if not _is_false(condition(element, it)):
                current = then(element, it)
                if current is not None:
                    collected.append(current)
        return collected

    return filtered


def _projection(node: dict[str, Any], step: Step) -> Fn:
    base_fn, then = _children(node, step)

    def projected(v, it):
        step(it)
        base = base_fn(v, it)
        if not isinstance(base, list):
            return None
        collected = []
        for element in base:
            current = then(element, it)
            if current is not None:
                collected.append(current)
        return collected

    return projected


def _index(node: dict[str, Any], step: Step) -> Fn:
    position = node["value"]

    def index(v, it):
        step(it)
        if not isinstance(v, list):
            return None
        try:
            return v[position]
        except IndexError:
            return None

    return index


def _function(node: dict[str, Any], step: Step) -> Fn:
    args = _children(node, step)
    name = node["value"]

    def function(v, it):
        step(it)
        return it._functions.call_function(name, [a(v, it) for a in args])

    return function


_BUILDERS: dict[str, Callable[[dict[str, Any], Step], Fn]] = {
    "field": _field,
    "subexpression": _chain,
    "index_expression": _chain,
    "pipe": _chain,
    "current": _current,
    "identity": _current,
    "literal": _literal,
    "comparator": _comparator,
    "and_expression": _and,
    "or_expression": _or,
    "not_expression": _not,
    "filter_projection": _filter_projection,
    "projection": _projection,
    "index": _index,
    "function_expression": _function,
}
