"""Random mutations of every sample never crash the validator.

Each example takes a sample (or the mini environment), picks any node and deletes,
duplicates, retypes, deepens or enlarges it, writes the text and runs the CLI on it: the
exit code is 0 (valid), 1 (invalid) or 2 (unreadable) — never 3 (an internal error) — and
no report carries ``simulation_crashed`` (an engine bug). Deepening goes to 5,000 levels
and enlarging to 200,000 characters, past every limit, so the bounds are exercised too.
"""

import io
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.environments.engine.cli import main

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


@st.composite
def mutated_texts(draw):
    doc = json.loads(json.dumps(draw(st.sampled_from(DOCS))))
    path = draw(st.sampled_from(_paths(doc)))
    op = draw(st.sampled_from(["delete", "duplicate", "retype", "deepen", "enlarge"]))
    node = _get(doc, path)
    if not path:
        op = "retype" if op == "delete" else op
    parent = _get(doc, path[:-1]) if path else None
    replacement = None
    if op == "delete":
        del parent[path[-1]]
    elif op == "duplicate":
        if isinstance(parent, list):
            parent.insert(path[-1], json.loads(json.dumps(node)))
        elif isinstance(parent, dict):
            parent[f"{path[-1]}_2"] = json.loads(json.dumps(node))
    elif op == "retype":
        value = draw(st.sampled_from(RETYPES))
        if path:
            parent[path[-1]] = value
        else:
            doc = value
    elif op == "deepen":
        levels = draw(st.sampled_from([1, 3, 60, 5000]))
        replacement = "[" * levels + json.dumps(node) + "]" * levels
    else:  # enlarge
        if isinstance(node, list) and node:
            node.extend([node[0]] * draw(st.sampled_from([10, 500])))
        elif isinstance(node, str):
            replacement = json.dumps(node * (200_000 // max(1, len(node)) + 1))
        elif isinstance(node, dict):
            copy = json.dumps(node)
            node.update({f"k{i}": json.loads(copy) for i in range(3)} if len(copy) < 5000 else {})
        else:
            replacement = "1" + "0" * draw(st.sampled_from([20, 400, 5000]))
    if replacement is not None:
        if path:
            parent[path[-1]] = SENTINEL
            text = json.dumps(doc).replace(json.dumps(SENTINEL), replacement)
        else:
            text = replacement
    else:
        text = json.dumps(doc)
    return text


@pytest.fixture(scope="module")
def spec_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(text=mutated_texts())
def test_mutated_samples_never_crash_the_validator(text, spec_dir):
    path = spec_dir / "spec.json"
    path.write_text(text, encoding="utf-8")
    out = io.StringIO()
    code = main(["validate", str(path), "--json"], out=out)
    assert code in (0, 1, 2), out.getvalue()[-3000:]
    if code in (0, 1):
        report = json.loads(out.getvalue())
        assert "simulation_crashed" not in {p["code"] for p in report["problems"]}
        assert report["valid"] is (code == 0)
