"""Bounds: documents are refused before anything recurses; computed values stay in range;
queries, regexes and mutant replays have a budget."""

import json
import os
import subprocess
import sys

from coworkenv_engine import bounds
from coworkenv_engine.bounded_query import QueryBudgetExceeded, search, value_units
from coworkenv_engine.bounds import DocumentUnreadable, loads_document
from coworkenv_engine.checks import CheckView, evaluate
from coworkenv_engine.safe_regex import check_pattern, safe_search
from coworkenv_engine.simulator import Episode
from coworkenv_engine.spec import load_spec, spec_hash
from coworkenv_engine.validation import validate_spec, validate_text
from coworkenv_engine.validation.faults import (
    MAX_MUTANTS,
    exhaustion_probability,
    mutant_sample,
)

from .helpers import ROOT, mini_doc


def _codes(report):
    return [(p.code, p.pointer) for p in report.errors]


def test_text_ten_thousand_levels_deep_is_refused_before_parsing():
    text = '{"schema": "coworkenv.environment/v1", "metadata": ' + "[" * 10_000 + "]" * 10_000
    doc, problems = loads_document(text + "}")
    assert doc is None
    assert [(p.code, p.pointer) for p in problems] == [("document_too_deep", "")]
    assert "10001 levels" in problems[0].message


def test_brackets_inside_strings_do_not_count_as_depth():
    assert bounds.text_depth('{"a": "[[[[[[[[[[[[[[", "b": ["\\"]]]]"]}') == 2


def test_parsed_document_ten_thousand_levels_deep_is_a_problem_not_a_recursion_error():
    deep: list = []
    for _ in range(10_000):
        deep = [deep]
    doc = mini_doc()
    doc["metadata"] = {"x": deep}
    report = validate_spec(doc)
    assert [p.code for p in report.errors] == ["document_too_deep"]
    assert report.errors[0].pointer.startswith("/metadata/x/0/0/")
    assert report.spec_hash is None


def test_duplicate_keys_are_refused_with_their_pointer():
    text = json.dumps(mini_doc()).replace(
        '"to": "me@acme.test"', '"to": "me@acme.test", "to": "x"', 1
    )
    report = validate_text(text)
    assert _codes(report) == [("duplicate_key", "/services/email/inbox/0/to")]


def test_unreadable_text_raises_document_unreadable():
    for text in ("{nope", b"\xff\xfe{}", "1" * 5000):
        try:
            loads_document(text)
        except DocumentUnreadable:
            continue
        raise AssertionError(f"{text[:10]!r} was read")


def test_oversized_text_is_refused_unparsed(monkeypatch):
    monkeypatch.setattr(bounds, "MAX_DOCUMENT_CHARS", 1000)
    doc, problems = loads_document(json.dumps(mini_doc()))
    assert doc is None and [p.code for p in problems] == ["document_too_large"]


def test_too_many_values_and_records(monkeypatch):
    doc = mini_doc()
    doc["services"]["email"]["sent"] = [
        {"id": f"s{i}", "from": "a", "to": "b", "subject": "", "date": "", "body": ""}
        for i in range(30)
    ]
    monkeypatch.setattr(bounds, "MAX_RECORDS", 20)
    assert _codes(validate_spec(doc, dynamic=False)) == [("too_many_items", "/services")]
    monkeypatch.setattr(bounds, "MAX_NODES", 100)
    assert _codes(validate_spec(doc, dynamic=False)) == [("document_too_large", "")]


def test_lone_surrogate_is_a_problem_and_the_hash_stays_total():
    doc = mini_doc()
    doc["services"]["email"]["inbox"][0]["body"] = "x\ud800y"
    report = validate_spec(doc)
    assert _codes(report) == [("string_not_unicode", "/services/email/inbox/0/body")]
    assert len(spec_hash(doc)) == 64


def test_clock_at_the_end_of_the_calendar_is_out_of_range_not_a_crash():
    doc = mini_doc()
    doc["clock"] = {"start": "9999-12-31T23:59:00Z", "step_seconds": 86400}
    report = validate_spec(doc)
    assert _codes(report) == [("value_out_of_range", "/clock/start")]


def test_huge_weights_are_out_of_range():
    doc = mini_doc()
    for g in doc["tasks"][0]["graders"]:
        g["weight"] = 1e308
    report = validate_spec(doc)
    assert {c for c, _ in _codes(report)} == {"value_out_of_range"}
    assert len(report.errors) == len(doc["tasks"][0]["graders"]) == 6


def test_state_hash_does_not_depend_on_the_machine_time_zone():
    doc = mini_doc()
    doc["clock"] = {"start": "2026-03-02T09:00:00"}  # naive: read as UTC
    code = (
        "from coworkenv_engine.simulator import _iso, _parse_time; "
        "print(_iso(_parse_time('2026-03-02T09:00:00')))"
    )
    outs = set()
    for tz in ("UTC", "America/Los_Angeles", "Asia/Kolkata"):
        out = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={**os.environ, "TZ": tz},
            check=True,
        )
        outs.add(out.stdout.strip())
    assert outs == {"2026-03-02T09:00:00Z"}
    assert _codes(validate_spec(doc)) == [("datetime_without_offset", "/clock/start")]
    doc["clock"] = {"start": "2026-03-02T09:00:00Z"}
    assert Episode(doc, "book").clock_iso() == "2026-03-02T09:00:00Z"


def test_query_that_doubles_a_value_hits_the_budget():
    query = "'ab'" + " | [@, @]" * 60 + " | length(to_string(@))"
    try:
        search(query, {})
    except QueryBudgetExceeded as exc:
        assert "query budget exceeded" in str(exc)
    else:
        raise AssertionError("no budget")
    view = CheckView({}, [], [], 0, [])
    status, evidence = evaluate({"kind": "state", "query": query, "op": "==", "value": 1}, view)
    assert status == "failed" and "query budget exceeded" in evidence["error"]


def test_ordinary_queries_are_unchanged():
    state = {"email": {"inbox": [{"id": "m1", "to": "a"}, {"id": "m2", "to": "b"}]}}
    assert search("email.inbox[?to == 'b'].id", state) == ["m2"]
    assert search("[email.inbox[0].id, length(email.inbox)]", state) == ["m1", 2]
    assert search("join(', ', email.inbox[*].id)", state) == "m1, m2"


def test_value_units_stop_at_the_cap():
    shared: list = ["x" * 64]
    for _ in range(200):
        shared = [shared, shared]  # 2**200 leaves, by reference
    assert value_units(shared, cap=10_000) == 10_001


def test_regex_that_backtracks_cubically_in_re_runs_linearly():
    assert check_pattern("a*a*a*b") is None  # admitted by the guard
    assert safe_search("a*a*a*b", "a" * 10_000) is None  # RE2: linear, no backtracking
    assert safe_search("(?i)dentist", "The DENTIST moved") is not None


def test_lookarounds_and_possessive_quantifiers_are_refused():
    assert "lookarounds" in check_pattern("dentist(?! appointment)")
    assert "lookarounds" in check_pattern("(?<=x)y")
    assert "possessive" in check_pattern("a++b")


def test_fault_probability_follows_the_retry_policy():
    from coworkenv_engine.spec import load_spec

    doc = mini_doc()
    doc["tools"][6]["faults"] = {"rate": 0.5}  # send_email, called once by the reference
    assert abs(exhaustion_probability(load_spec(doc), load_spec(doc).tasks[0]) - 0.5**10) < 1e-15
    doc["tools"][6]["faults"] = {"rate": 0.6}
    report = validate_spec(doc)
    problem = next(p for p in report.errors if p.code == "oracle_fails_under_faults")
    assert problem.pointer == "/tasks/0/reference_solution"
    assert "0.60% of runs" in problem.message


def test_mutants_beyond_the_cap_are_sampled_and_the_report_says_so():
    assert mutant_sample(5) == [0, 1, 2, 3, 4]
    sample = mutant_sample(100)
    assert len(sample) == MAX_MUTANTS and sample[0] == 0 and sample[-1] == 99
    doc = mini_doc()
    calls = doc["tasks"][0]["reference_solution"][0]["calls"]
    for i in range(MAX_MUTANTS + 6):
        calls.append(
            {
                "tool": "send_email",
                "arguments": {"to": "dana@acme.test", "subject": f"n{i}", "body": "16:00"},
            }
        )
    report = validate_spec(doc)
    assert report.valid
    task = report.tasks[0]
    assert (task.mutants_total, task.mutants_replayed) == (MAX_MUTANTS + 8, MAX_MUTANTS)
    sampled = [p for p in report.warnings if p.code == "mutants_sampled"]
    assert [p.pointer for p in sampled] == ["/tasks/0/reference_solution"]


def test_a_spec_over_the_work_budget_is_refused_before_the_simulator_runs(monkeypatch):
    from coworkenv_engine.validation import faults

    assert faults.estimated_work(load_spec(mini_doc())) == [35]  # 7 runs x 5 calls
    monkeypatch.setattr(faults, "MAX_WORK_UNITS", 34)
    report = validate_spec(mini_doc())
    assert [(p.code, p.pointer) for p in report.errors] == [("validation_budget_exceeded", "")]
    assert "about 35 work units" in report.errors[0].message
    assert report.tasks[0].oracle_score is None  # nothing was simulated


def test_memory_stays_bounded_on_a_value_doubling_query():
    import tracemalloc

    doc = mini_doc()
    doc["tasks"][0]["graders"][0]["check"]["query"] = (
        "join('', ['abcdefgh'" + " | [@, @]" * 40 + " | [][][][][][][][][][][][][][][][][]])"
    )
    tracemalloc.start()
    try:
        report = validate_spec(doc)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert ("query_budget_exceeded", "/tasks/0/graders/0/check/query") in _codes(report)
    assert peak < 200 * 2**20  # the unbounded value would be 2**40 strings


def test_lower_makes_a_filter_match_whatever_case_the_agent_wrote():
    sent = {"sent": [{"subject": s} for s in ("Reminder: Customer Advisory Prep", "Lunch")]}
    query = "length(sent[?contains(lower(subject), 'customer advisory prep')])"
    assert search(query, sent) == 1
    assert search("sent[0].subject | lower(@)", sent) == "reminder: customer advisory prep"
