"""Random mutations of every sample never crash the validator.

Each example takes a sample (or the mini environment), picks any node and deletes,
duplicates, retypes, deepens or enlarges it, writes the text and runs the CLI on it: the
exit code is 0 (valid), 1 (invalid) or 2 (unreadable) — never 3 (an internal error) — and
no report carries ``simulation_crashed`` (an engine bug), also when a short time budget
stops the validation part way. Deepening goes to 5,000 levels and enlarging to 200,000
characters, past every limit, so the bounds are exercised too.
"""

import copy
import io
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coworkenv_engine.cli import main
from coworkenv_engine.validation import validate_spec

from .helpers import SAMPLES, load_json, mini_doc

DOCS = [mini_doc(), *(load_json(p) for p in SAMPLES)]
SENTINEL = "\u0000__mutated__\u0000"


def _paths(value, path=()):
    """Every node's path (a pre-order list; the documents are small and shallow)."""
    out = [path]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*path, i))
    return out


def _get(doc, path):
    for p in path:
        doc = doc[p]
    return doc


RETYPES = [None, 0, -1, 1e308, -(2**63), True, "", "x", [], {}, "\ud800", "2026-03-02T09:00:00"]


def _mutate_in_place(draw, doc):
    """One delete / duplicate / retype / enlarge of a random node; returns the new root."""
    path = draw(st.sampled_from(_paths(doc)))
    op = draw(st.sampled_from(["delete", "duplicate", "retype", "enlarge"]))
    if not path:
        return copy.deepcopy(draw(st.sampled_from(RETYPES))) if op == "retype" else doc
    node, parent = _get(doc, path), _get(doc, path[:-1])
    if op == "delete":
        del parent[path[-1]]
    elif op == "duplicate":
        if isinstance(parent, list):
            parent.insert(path[-1], json.loads(json.dumps(node)))
        else:
            parent[f"{path[-1]}_2"] = json.loads(json.dumps(node))
    elif op == "retype":
        parent[path[-1]] = copy.deepcopy(draw(st.sampled_from(RETYPES)))
    elif isinstance(node, list) and node:
        node.extend(
            [json.loads(json.dumps(node[0])) for _ in range(draw(st.sampled_from([3, 60])))]
        )
    elif isinstance(node, dict):
        text = json.dumps(node)
        node.update({f"k{i}": json.loads(text) for i in range(3)} if len(text) < 5000 else {})
    elif isinstance(node, str):
        parent[path[-1]] = node * draw(st.sampled_from([2, 50]))
    return doc


@st.composite
def mutated_texts(draw):
    """1-3 in-place mutations, then maybe one that only text can hold (very deep or very
    large values, numbers with thousands of digits)."""
    doc = json.loads(json.dumps(draw(st.sampled_from(DOCS))))
    for _ in range(draw(st.integers(1, 3))):
        doc = _mutate_in_place(draw, doc)
    text = json.dumps(doc)
    if not isinstance(doc, (dict, list)) or not draw(st.booleans()):
        return text
    path = draw(st.sampled_from(_paths(doc)))
    if not path:
        return text
    node = _get(doc, path)
    kind = draw(st.sampled_from(["deepen", "long string", "big number"]))
    if kind == "deepen":
        levels = draw(st.sampled_from([3, 60, 5000]))
        replacement = "[" * levels + json.dumps(node) + "]" * levels
    elif kind == "long string":
        replacement = json.dumps("x" * draw(st.sampled_from([1000, 200_000])))
    else:
        replacement = "1" + "0" * draw(st.sampled_from([20, 400, 5000]))
    _get(doc, path[:-1])[path[-1]] = SENTINEL
    return json.dumps(doc).replace(json.dumps(SENTINEL), replacement)


@pytest.fixture(scope="module")
def spec_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(text=mutated_texts(), budget=st.sampled_from(["60", "60", "0.02"]))
def test_mutated_samples_never_crash_the_validator(text, budget, spec_dir):
    """A short time budget stops validation at a random point: still a clean report."""
    path = spec_dir / "spec.json"
    path.write_text(text, encoding="utf-8")
    out = io.StringIO()
    code = main(["validate", str(path), "--json", "--time-budget", budget], out=out)
    assert code in (0, 1, 2), out.getvalue()[-3000:]
    if code in (0, 1):
        report = json.loads(out.getvalue())
        codes = {p["code"] for p in report["problems"]}
        assert "simulation_crashed" not in codes
        assert report["valid"] is (code == 0)
        assert code == 1 or "validation_time_budget_exceeded" not in codes


def test_a_number_too_large_for_a_float_is_validated_not_crashed_on():
    """A 401-digit amount in a record and in a reference call's arguments: Python reads it
    as an int, which no check may turn into a float (OverflowError)."""
    doc = next(load_json(p) for p in SAMPLES if p.stem == "finance-files")
    doc["services"]["spreadsheet"]["rows"][0]["amount"] = 10**400
    calls = doc["tasks"][0]["reference_solution"][0]["calls"]
    next(c for c in calls if "cells" in c["arguments"])["arguments"]["cells"]["amount"] = 10**400
    codes = {p.code for p in validate_spec(doc).problems}
    assert "simulation_crashed" not in codes
