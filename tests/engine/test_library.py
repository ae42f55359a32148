import pytest

from coworkenv_engine import library
from coworkenv_engine.spec import load_spec
from coworkenv_engine.validation import validate_spec

from .helpers import SAMPLES, load_json

KINDS = ["email", "calendar", "files", "kb", "spreadsheet", "tickets", "crm", "contacts"]


def test_library_has_the_eight_standard_kinds():
    assert sorted(library.KINDS) == sorted(KINDS)


def test_required_fields():
    assert library.required_fields("email", "inbox") == (
        "id",
        "from",
        "to",
        "subject",
        "date",
        "body",
    )
    assert library.required_fields("crm", "customers") == ("id", "name", "tier", "status")
    assert library.required_fields("custom", "things") == ("id",)
    assert library.required_fields("email", "archive") == ("id",)


def _env_with_every_kind() -> dict:
    tools = [t for kind in KINDS for t in library.standard_tools(kind)]
    return {
        "schema": "coworkenv.environment/v1",
        "name": "All kinds",
        "services": library.empty_services(*KINDS),
        "tools": tools,
        "tasks": [
            {
                "key": "t",
                "turns": [{"message": "Write a file."}],
                "reference_solution": [
                    {
                        "turn": 0,
                        "calls": [
                            {"tool": "create_file", "arguments": {"path": "a.txt", "content": "hi"}}
                        ],
                    }
                ],
                "graders": [
                    {
                        "id": "g",
                        "category": "completion",
                        "check": {
                            "kind": "state",
                            "query": "files.files[0].content",
                            "op": "==",
                            "value": "hi",
                        },
                    }
                ],
            }
        ],
    }


def test_every_standard_tool_loads_and_binds_statically():
    doc = _env_with_every_kind()
    report = validate_spec(doc, dynamic=False)
    assert report.valid, [p.to_dict() for p in report.errors]
    names = [t["name"] for t in doc["tools"]]
    assert len(names) == len(set(names))
    assert [p for p in report.problems if p.code == "parameter_unused"] == []


def test_every_standard_tool_runs_in_the_simulator():
    from coworkenv_engine.simulator import Episode

    episode = Episode(_env_with_every_kind(), "t", faults=False)
    assert episode.call("create_file", {"path": "a", "content": "b"}).ok
    assert episode.call("append_row", {"sheet": "S", "cells": {"x": 1}}).content == {
        "id": "rows-1",
        "sheet": "S",
        "x": 1,
    }
    assert (
        episode.call("send_email", {"to": "a@b.c", "subject": "s", "body": "b"}).content["date"]
        == "2026-03-02T09:03:00Z"
    )
    assert episode.call("list_tickets", {}).content == {"results": [], "total": 0}


def test_standard_tools_can_be_rebound_and_filtered():
    tools = library.standard_tools("email", service="mail2", names=["send_email"])
    assert [t["name"] for t in tools] == ["send_email"]
    assert tools[0]["binding"]["service"] == "mail2"
    assert library.standard_tools("email")[0]["binding"]["service"] == "email"


def test_samples_together_use_every_kind():
    used = set()
    for path in SAMPLES:
        used |= set(load_json(path)["services"])
    assert set(KINDS) <= used
    assert len(SAMPLES) >= 3


@pytest.mark.parametrize("ref", library.CROSS_REFERENCES, ids=lambda r: f"{r.service}.{r.field}")
def test_cross_references_point_at_standard_collections(ref):
    assert ref.collection in library.KINDS[ref.service].collections
    assert ref.field in library.required_fields(ref.service, ref.collection)
    assert ref.target_collection in library.KINDS[ref.target_service].collections


def test_cross_reference_in_task_records_is_checked():
    doc = load_json(next(p for p in SAMPLES if p.stem == "support-desk"))
    doc["tasks"][0]["records"] = {
        "tickets": {
            "tickets": [
                {
                    "id": "t-900",
                    "customer_id": "c-404",
                    "subject": "x",
                    "status": "open",
                    "priority": "low",
                }
            ]
        }
    }
    report = validate_spec(doc, dynamic=False)
    assert ("dangling_reference", "/tasks/0/records/tickets/tickets/0/customer_id") in {
        (p.code, p.pointer) for p in report.errors
    }


def test_cross_reference_resolves_against_task_records():
    doc = load_json(next(p for p in SAMPLES if p.stem == "support-desk"))
    doc["tasks"][0]["records"] = {
        "crm": {"customers": [{"id": "c-9", "name": "N", "tier": "gold", "status": "active"}]},
        "tickets": {
            "tickets": [
                {
                    "id": "t-9",
                    "customer_id": "c-9",
                    "subject": "x",
                    "status": "open",
                    "priority": "low",
                }
            ]
        },
    }
    load_spec(doc)
