import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coworkenv_engine.problems import CODES
from coworkenv_engine.validation import validate_spec, validate_text

from .helpers import BROKEN, SAMPLES, load_json, mini_doc


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.stem)
def test_every_sample_is_valid_with_full_sensitivity(path):
    doc = load_json(path)
    report = validate_spec(doc)
    assert report.valid, [p.to_dict() for p in report.errors]
    assert report.problems == []  # not even warnings
    assert len(report.tasks) >= 3
    for task in report.tasks:
        assert task.oracle_score == 1.0 and task.oracle_strict and task.deterministic
        assert task.null_score < 0.75 and task.echo_score < 0.75
        assert task.mutants_total >= 1 and task.sensitivity == 1.0


def test_samples_cover_the_required_scenarios():
    docs = [load_json(p) for p in SAMPLES]
    tasks = [t for d in docs for t in d["tasks"]]
    assert any(
        len(t["turns"]) > 1 and "clarify-before-acting" in t.get("capabilities", []) for t in tasks
    )
    assert any(
        u.get("silent") for t in tasks for turn in t["turns"] for u in turn.get("updates", [])
    )
    assert any("outside" in c for t in tasks for c in t.get("constraints", []))
    assert any(tool.get("faults", {}).get("rate", 0) > 0 for d in docs for tool in d["tools"])


def _case_report(case):
    """Cases carry a parsed "spec", or "spec_text" when the fault lives in the text itself
    (duplicate keys, a depth no parser should recurse into); a "time_budget" (seconds) is
    the validation's wall-clock budget."""
    budget = {"time_budget": case["time_budget"]} if "time_budget" in case else {}
    if "spec_text" in case:
        return validate_text(case["spec_text"], **budget)
    return validate_spec(case["spec"], **budget)


def test_broken_spec_catalogue_is_large_and_distinct():
    assert len(BROKEN) >= 90
    expectations = [load_json(p)["expected"] for p in BROKEN]
    assert len(
        {(e["code"], e["pointer"], p.stem) for e, p in zip(expectations, BROKEN, strict=True)}
    ) == len(BROKEN)
    assert all(e["code"] in CODES for e in expectations)
    assert len({e["code"] for e in expectations}) >= 50


@pytest.mark.parametrize("path", BROKEN, ids=lambda p: p.stem)
def test_broken_spec_is_rejected_with_code_and_pointer(path):
    case = load_json(path)
    report = _case_report(case)
    assert not report.valid
    expected = (case["expected"]["code"], case["expected"]["pointer"])
    got = [(p.code, p.pointer) for p in report.errors]
    assert expected in got, got
    assert "simulation_crashed" not in {c for c, _ in got}  # an engine bug, never an input's
    for p in report.problems:
        assert p.message and p.hint, p


def test_report_to_dict_shape():
    report = validate_spec(mini_doc())
    d = report.to_dict()
    assert d["valid"] is True and d["problems"] == []
    assert set(d["tasks"][0]) >= {"key", "oracle_score", "null_score", "echo_score", "sensitivity"}
    assert d["tasks"][0]["key"] == "book" and len(d["spec_hash"]) == 64


def test_static_only_skips_the_simulator():
    report = validate_spec(mini_doc(), dynamic=False)
    assert report.valid and report.tasks[0].oracle_score is None


def test_progress_is_reported():
    calls = []
    validate_spec(load_json(SAMPLES[0]), on_progress=lambda *a: calls.append(a))
    assert calls[0] == (1, 4, "static")
    assert [c[0] for c in calls] == [1, 2, 3, 4] and all(c[1] == 4 for c in calls)


def test_uncaught_mutant_is_a_warning_with_the_call_pointer():
    doc = mini_doc()
    del doc["tasks"][0]["graders"][1]  # nobody checks the email any more
    report = validate_spec(doc)
    assert report.valid
    assert [(p.code, p.severity, p.pointer) for p in report.problems] == [
        ("mutant_not_caught", "warning", "/tasks/0/reference_solution/0/calls/2")
    ]
    assert report.tasks[0].sensitivity == 0.5


def test_grader_satisfied_by_doing_nothing_is_a_warning():
    doc = mini_doc()
    doc["tasks"][0]["graders"].append(
        {
            "id": "no-deletes",
            "category": "completion",
            "check": {
                "kind": "state",
                "query": "calendar.events[?id == 'e1']",
                "op": "count",
                "value": 1,
            },
        }
    )
    report = validate_spec(doc)
    assert report.valid
    assert ("grader_satisfied_by_null", "/tasks/0/graders/6") in {
        (p.code, p.pointer) for p in report.warnings
    }


def test_judge_is_used_when_given():
    doc = mini_doc()
    doc["tasks"][0]["graders"].append(
        {
            "id": "polite",
            "category": "communication",
            "check": {"kind": "judge", "rubric": "Polite?"},
        }
    )
    assert validate_spec(doc).valid  # skipped without a judge
    report = validate_spec(doc, judge=lambda rubric, ctx: 0.0)
    assert ("oracle_not_strict", "/tasks/0/graders/6") in {
        (p.code, p.pointer) for p in report.errors
    }


def test_static_warnings_point_at_parameters():
    doc = mini_doc()
    doc["tools"][0]["parameters"]["properties"]["day"] = {"type": "string"}
    report = validate_spec(doc, dynamic=False)
    assert [(p.code, p.pointer) for p in report.problems] == [
        ("parameter_unused", "/tools/0/parameters/properties/day")
    ]


def test_schema_errors_stop_before_static_checks():
    doc = mini_doc()
    doc["tools"][0]["binding"]["service"] = "nowhere"
    doc["tasks"][0]["graders"][0]["category"] = "style"
    report = validate_spec(doc)
    assert [(p.code, p.pointer) for p in report.problems] == [
        ("schema_invalid", "/tasks/0/graders/0/category")
    ]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "schema",
                    "name",
                    "services",
                    "tools",
                    "tasks",
                    "x",
                    "turns",
                    "graders",
                    "check",
                    "kind",
                    "query",
                ]
            ),
            children,
            max_size=5,
        )
    ),
    max_leaves=20,
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_validate_never_raises_on_any_json_value(value):
    report = validate_spec(value)
    assert not report.valid
    assert report.problems and all(p.severity in ("error", "warning") for p in report.problems)
    report.to_dict()


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*prefix, i))


BASE = mini_doc()
PATHS = [p for p in _paths(BASE) if p]


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(PATHS), json_values)
def test_validate_never_raises_on_a_corrupted_valid_spec(path, replacement):
    doc = copy.deepcopy(BASE)
    target = doc
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = replacement
    report = validate_spec(doc)
    assert isinstance(report.valid, bool)
    assert not any(p.code == "simulation_crashed" for p in report.problems), report.problems
