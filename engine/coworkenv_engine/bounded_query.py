"""JMESPath evaluation with a work budget.

A query over a bounded state can still build an unbounded value: a multi-select
``[@, @]`` doubles whatever it is given, and piping it into itself 60 times describes a
value of 2**60 nodes (shared by reference, until ``join`` or ``to_string`` materialises
it). The interpreter here counts every AST node it visits and measures the values that
multi-selects and string-building functions produce — a measure that stops at the cap, so
measuring is itself bounded — and raises ``QueryBudgetExceeded`` (a ``JMESPathError``:
the check fails with evidence) when a query goes past its budget.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import jmespath
from jmespath import functions
from jmespath.exceptions import JMESPathError
from jmespath.visitor import Options, TreeInterpreter

from .query_compiler import MAX_COMPILED_DEPTH, compile_node, depth

MAX_STEPS = 1_000_000
MAX_VALUE_UNITS = 500_000  # one per value, plus one per 16 characters of a string
BUDGET_MARK = "query budget exceeded"


class QueryBudgetExceeded(JMESPathError):
    pass


def value_units(value: Any, cap: int = MAX_VALUE_UNITS) -> int:
    """Size of ``value`` (shared parts counted each time they occur), at most ``cap + 1``."""
    units = 0
    stack = [value]
    while stack:
        v = stack.pop()
        units += 1
        if isinstance(v, str):
            units += len(v) >> 4
        elif isinstance(v, dict):
            stack.extend(v.values())
            units += len(v)
        elif isinstance(v, list):
            stack.extend(v)
        if units > cap:
            return cap + 1
    return units


class _Functions(functions.Functions):
    """Built-ins whose output is a new string: bounded before they build it."""

    @functions.signature({"types": ["string"]}, {"types": ["array-string"]})
    def _func_join(self, separator, array):
        if value_units(array) + len(array) * (len(separator) >> 4) > MAX_VALUE_UNITS:
            raise QueryBudgetExceeded(f"{BUDGET_MARK}: join() builds too long a string")
        return separator.join(array)

    @functions.signature({"types": ["string"]})
    def _func_lower(self, text):
        """``lower(s)``: CoworkEnv's one addition to JMESPath, for a match the case of which
        is the agent's to choose: ``contains(lower(subject), 'advisory prep')``."""
        return text.lower()

    @functions.signature({"types": []})
    def _func_to_string(self, arg):
        if value_units(arg) > MAX_VALUE_UNITS:
            raise QueryBudgetExceeded(f"{BUDGET_MARK}: to_string() builds too long a string")
        return super()._func_to_string(arg)


_OPTIONS = Options(custom_functions=_Functions())


class _Interpreter(TreeInterpreter):
    def __init__(self) -> None:
        super().__init__(_OPTIONS)
        self.steps = 0

    def visit(self, node, *args, **kwargs):
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise QueryBudgetExceeded(f"{BUDGET_MARK}: more than {MAX_STEPS} evaluation steps")
        return super().visit(node, *args, **kwargs)

    def _charge(self, value: Any) -> Any:
        units = value_units(value)
        self.steps += units
        if units > MAX_VALUE_UNITS or self.steps > MAX_STEPS:
            raise QueryBudgetExceeded(f"{BUDGET_MARK}: the query builds too large a value")
        return value

    def visit_multi_select_list(self, node, value):
        return self._charge(super().visit_multi_select_list(node, value))

    def visit_multi_select_dict(self, node, value):
        return self._charge(super().visit_multi_select_dict(node, value))


@lru_cache(maxsize=4096)
def compile_query(query: str):
    return jmespath.compile(query)


def _step(interpreter: _Interpreter) -> None:
    """One step of a compiled query: ``_Interpreter.visit``'s count and check."""
    interpreter.steps += 1
    if interpreter.steps > MAX_STEPS:
        raise QueryBudgetExceeded(f"{BUDGET_MARK}: more than {MAX_STEPS} evaluation steps")


@lru_cache(maxsize=4096)
def compiled_query(query: str):
    """``query`` as closures (query_compiler.py): the interpreter's results and step
    count, without its per-node dispatch."""
    parsed = compile_query(query).parsed
    if depth(parsed) > MAX_COMPILED_DEPTH:
        return lambda value, interpreter: interpreter.visit(parsed, value)
    return compile_node(parsed, _step)


def search(query: str, data: Any) -> Any:
    """Evaluate ``query`` over ``data``; raises JMESPathError (incl. the budget's)."""
    return compiled_query(query)(data, _Interpreter())
