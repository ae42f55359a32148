"""Compiled queries (query_compiler.py) give the bounded interpreter's results, errors and
step counts: on the queries the samples and the generators grade with, and on random
queries over random JSON (hypothesis)."""

from __future__ import annotations

import json
from pathlib import Path

import jmespath
import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from jmespath.exceptions import JMESPathError

from coworkenv_engine import bounded_query
from coworkenv_engine.bounded_query import _Interpreter, compile_query, compiled_query

ROOT = Path(__file__).resolve().parents[2]


def interpreted(query: str, data):
    it = _Interpreter()
    try:
        return ("ok", it.visit(compile_query(query).parsed, data), it.steps)
    except JMESPathError as exc:
        return ("error", str(exc), it.steps)


def compiled(query: str, data):
    it = _Interpreter()
    try:
        return ("ok", compiled_query(query)(data, it), it.steps)
    except JMESPathError as exc:
        return ("error", str(exc), it.steps)


def same(query: str, data) -> None:
    a, b = interpreted(query, data), compiled(query, data)
    assert json.dumps(a, sort_keys=True, default=repr) == json.dumps(
        b, sort_keys=True, default=repr
    ), query
    # True/1 and False/0 compare equal in Python: the types must match as well
    assert repr(a) == repr(b), query


def _queries(node, out):
    if isinstance(node, dict):
        if isinstance(node.get("query"), str):
            out.add(node["query"])
        for v in node.values():
            _queries(v, out)
    elif isinstance(node, list):
        for v in node:
            _queries(v, out)
    return out


STATE = {
    "crm": {
        "deals": [
            {"id": "d1", "stage": "won", "amount": 10, "flag": True, "tags": ["a", "b"]},
            {"id": "d2", "stage": "lost", "amount": 0, "flag": False, "tags": []},
            {"id": "d3", "stage": "won", "amount": 1, "flag": 1, "owner": None},
            {"id": "d4", "stage": "", "amount": 2.5, "flag": 0, "nested": {"x": [1, 2]}},
        ]
    },
    "email": {"sent": [{"id": "s1", "to": ["a@x.io"], "subject": "Hi"}]},
}

HAND_WRITTEN = [
    "crm.deals[?stage=='won']",
    "crm.deals[?stage=='won'].amount",
    "crm.deals[?amount > `0`] | length(@)",
    "crm.deals[?flag == `true`].id",
    "crm.deals[?flag == `1`].id",
    "crm.deals[?amount == `0`].id",
    "crm.deals[?!flag].id",
    "crm.deals[?!amount].id",
    "crm.deals[?stage != 'won' && amount >= `1`].id",
    "crm.deals[?stage == 'won' || amount < `1`].id",
    "crm.deals[?contains(tags, 'a')].id",
    "crm.deals[*].id",
    "crm.deals[0].id",
    "crm.deals[-1].nested.x[1]",
    "crm.deals[5]",
    "crm.deals[?owner == null].id",
    "crm.deals[?stage > 'a']",
    "length(crm.deals[?stage=='won']) == `2`",
    "sort_by(crm.deals, &amount)[].id",
    "max_by(crm.deals, &amount).id",
    "crm.deals[].tags[]",
    "crm.deals[1:3].id",
    "crm.*",
    "crm.deals[?stage=='won'].{id: id, a: amount}",
    "crm.deals[?stage=='won'].[id, amount]",
    "email.sent[?contains(to, 'a@x.io')] | [0].subject",
    "join(', ', crm.deals[].id)",
    "to_string(crm.deals[0])",
    "@",
    "`[1, 2]`",
    "crm.deals[?nested.x[0] == `1`].id",
    "not_a_function(crm)",
    "length(`5`)",
]


@pytest.mark.parametrize("query", HAND_WRITTEN)
def test_hand_written_queries_match_the_interpreter(query):
    same(query, STATE)
    same(query, None)
    same(query, {"crm": "text"})


def test_the_queries_the_samples_grade_with_match_the_interpreter():
    queries: set[str] = set()
    for path in sorted((ROOT / "samples").glob("*.json")):
        _queries(json.loads(path.read_text("utf-8")), queries)
    assert len(queries) > 10
    for path in sorted((ROOT / "samples").glob("*.json")):
        doc = json.loads(path.read_text("utf-8"))
        for query in sorted(queries):
            same(query, doc["services"])


@pytest.mark.parametrize("budget", [3, 8, 15, 30, 60])
def test_the_budget_stops_a_compiled_query_at_the_same_step(monkeypatch, budget):
    monkeypatch.setattr(bounded_query, "MAX_STEPS", budget)
    outcomes = []
    for query in HAND_WRITTEN[:20]:
        a, b = interpreted(query, STATE), compiled(query, STATE)
        assert repr(a) == repr(b), query
        outcomes.append(a[0])
    if budget <= 15:
        assert "error" in outcomes


def test_a_deep_query_is_left_to_the_interpreter():
    query = "a" + ".a" * 200
    assert compiled(query, {"a": None}) == interpreted(query, {"a": None})


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 3),
    st.floats(-2, 3, allow_nan=False),
    st.sampled_from(["", "won", "a", "b"]),
)
_json = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(["a", "b", "id", "stage"]), inner, max_size=4),
    ),
    max_leaves=20,
)
_field = st.sampled_from(["a", "b", "id", "stage"])
_literal = st.sampled_from(["`0`", "`1`", "`true`", "`false`", "'won'", "''", "`null`", "`2.5`"])


@st.composite
def _expr(draw, depth=0):
    if depth > 2:
        return draw(st.one_of(_field, _literal, st.just("@")))
    sub = _expr(depth + 1)
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return f"{draw(_field)}.{draw(sub)}"
    if kind == 1:
        op = draw(st.sampled_from(["==", "!=", "<", ">=", "&&", "||"]))
        return f"{draw(sub)} {op} {draw(sub)}"
    if kind == 2:
        return f"!{draw(_field)}"
    if kind == 3:
        return f"{draw(_field)}[?{draw(sub)}]"
    if kind == 4:
        return f"{draw(_field)}[*].{draw(_field)}"
    if kind == 5:
        return f"length({draw(_field)})"
    if kind == 6:
        return f"{draw(_field)}[{draw(st.integers(-2, 2))}]"
    if kind == 7:
        return f"{draw(sub)} | {draw(_field)}"
    if kind == 8:
        return f"[{draw(_field)}, {draw(sub)}]"
    return draw(st.one_of(_field, _literal))


@hsettings(max_examples=300, deadline=None)
@given(query=_expr(), data=_json)
def test_random_queries_match_the_interpreter(query, data):
    try:
        jmespath.compile(query)
    except JMESPathError:
        return
    same(query, data)
