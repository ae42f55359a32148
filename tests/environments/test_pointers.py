"""Pointers to detail-page anchors, and JSON text with line numbers (pure functions)."""

import json

import pytest

from apps.environments.jsontext import (
    JSONTextError,
    locate_in_fields,
    nearest_line,
    parse_json_text,
    value_lines,
)
from apps.environments.pointers import anchor_part, pointer_page, pointer_target


@pytest.mark.parametrize(
    ("pointer", "expected"),
    [
        ("/tasks/1/graders/2/check/query", ("tasks", "task-1-grader-2")),
        ("/tasks/1/graders/2", ("tasks", "task-1-grader-2")),
        ("/tasks/1/graders", ("tasks", "task-1-graders")),
        ("/tools/0/binding", ("tools", "tool-0")),
        ("/tools/3", ("tools", "tool-3")),
        ("/tools", ("tools", "tools")),
        ("/services/email/inbox/3", ("services", "record-email-inbox-3")),
        ("/services/email/inbox/3/from", ("services", "record-email-inbox-3")),
        ("/services/email/inbox", ("services", "collection-email-inbox")),
        ("/services/email", ("services", "service-email")),
        ("/services", ("services", "services")),
        ("/tasks/0/turns/1/updates/0", ("tasks", "task-0-turn-1")),
        ("/tasks/0/turns/1", ("tasks", "task-0-turn-1")),
        ("/tasks/0/turns", ("tasks", "task-0-turns")),
        ("/tasks/2/reference_solution/0/calls/3", ("tasks", "task-2-solution-0-call-3")),
        ("/tasks/2/reference_solution/0/calls/3/arguments", ("tasks", "task-2-solution-0-call-3")),
        ("/tasks/2/reference_solution/1", ("tasks", "task-2-solution-1")),
        ("/tasks/2/reference_solution", ("tasks", "task-2-solution")),
        ("/tasks/0/records/contacts/people/1", ("services", "task-0-record-contacts-people-1")),
        ("/tasks/0/records/contacts/people", ("services", "task-0-collection-contacts-people")),
        ("/tasks/0/records", ("services", "task-0-records")),
        ("/tasks/4/system", ("tasks", "task-4")),
        ("/tasks/4", ("tasks", "task-4")),
        ("/tasks", ("tasks", "tasks")),
        ("/name", ("overview", "about")),
        ("/description", ("overview", "about")),
        ("", ("spec", "")),
        ("/", ("spec", "")),
        ("/schema", ("spec", "")),
        ("/metadata/x", ("spec", "")),
        ("/tasks/first/graders/0", ("spec", "")),
        ("/tools/x", ("spec", "")),
        ("no-slash", ("spec", "")),
    ],
)
def test_pointer_target(pointer, expected):
    assert pointer_target(pointer) == expected


def test_pointer_target_unescapes_tokens():
    assert pointer_target("/services/a~1b/c~0d/0") == ("services", "record-a_b-c_d-0")


def test_anchor_part_keeps_ids_valid():
    assert anchor_part("inbox") == "inbox"
    assert anchor_part("a b#<c>") == "a_b__c_"
    assert anchor_part("") == "_"


@pytest.mark.parametrize(
    ("pointer", "expected"),
    [
        ("/services/email/sent/0", ("page-email-sent", 1)),
        ("/services/email/sent/49", ("page-email-sent", 1)),
        ("/services/email/sent/50/to", ("page-email-sent", 2)),
        ("/services/email/sent", None),
        ("/tasks/0/records/email/sent/70", None),
        ("/tools/0", None),
    ],
)
def test_pointer_page(pointer, expected):
    assert pointer_page(pointer) == expected


def test_parse_json_text_reports_line_column_and_line():
    with pytest.raises(JSONTextError) as caught:
        parse_json_text('{\n  "a": 1,\n  "b": [1, 2,]\n}')
    error = caught.value
    assert (error.line, error.column) == (3, 14)
    assert error.line_text == '  "b": [1, 2,]'
    assert str(error) == "Line 3, column 14: Expecting value."


def test_parse_json_text_empty_and_valid():
    with pytest.raises(JSONTextError, match="Empty input"):
        parse_json_text("  \n")
    assert parse_json_text('{"a": [1]}') == {"a": [1]}


def test_value_lines_maps_pointers_to_lines():
    text = json.dumps({"a": [1, {"b/c": "x"}], "d~": {}, "e": []}, indent=2)
    lines = value_lines(text)
    source = text.splitlines()
    assert lines[""] == 1
    assert source[lines["/a"] - 1].strip() == '"a": ['
    assert source[lines["/a/0"] - 1].strip() == "1,"
    assert source[lines["/a/1/b~1c"] - 1].strip() == '"b/c": "x"'
    assert source[lines["/d~0"] - 1].strip() == '"d~": {},'
    assert source[lines["/e"] - 1].strip() == '"e": []'


def test_value_lines_on_compact_text_and_garbage():
    assert value_lines('{"a": {"b": 1}}') == {"": 1, "/a": 1, "/a/b": 1}
    assert value_lines("{oops") == {"": 1}


def test_nearest_line_falls_back_to_the_closest_ancestor():
    lines = {"": 1, "/tasks": 2, "/tasks/0": 3}
    assert nearest_line(lines, "/tasks/0/graders/5/check") == 3
    assert nearest_line(lines, "/other") == 1
    assert nearest_line({}, "/x") is None


def test_locate_in_fields_places_each_problem_at_its_field_and_line():
    check = '{\n  "kind": "state",\n  "op": "bogus",\n  "value": 1\n}'
    binding = '{\n  "op": "create",\n  "values": {\n    "to": "$to"\n  }\n}'
    problems = [
        {"pointer": "/tools/2/binding/values/to", "severity": "error", "message": "a"},
        {"pointer": "/tasks/0/graders/1/check/op", "severity": "error", "message": "b"},
        {"pointer": "/tasks/0/graders/1/check/missing", "severity": "warning", "message": "c"},
        {"pointer": "/tasks/0/graders/1/weight", "severity": "error", "message": "d"},
    ]
    placed = locate_in_fields(
        problems,
        {
            "check_spec": ("/tasks/0/graders/1/check", check),
            "binding": ("/tools/2/binding", binding),
        },
    )
    assert [(p["message"], p["line"]) for p in placed["check_spec"]] == [("b", 3), ("c", 1)]
    assert [(p["message"], p["line"]) for p in placed["binding"]] == [("a", 4)]


def test_locate_in_fields_prefers_the_deepest_prefix():
    placed = locate_in_fields(
        [{"pointer": "/tasks/0/graders/0/check", "severity": "error", "message": "x"}],
        {
            "graders": ("/tasks/0/graders", '[\n  {\n    "check": {}\n  }\n]'),
            "turns": ("/tasks/0/turns", "[]"),
        },
    )
    assert [(p["message"], p["line"]) for p in placed["graders"]] == [("x", 3)]
    assert placed["turns"] == []
