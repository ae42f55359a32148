"""One test group per binding operation, through the simulator's public call()."""

import pytest

from coworkenv_engine.simulator import Episode

from .helpers import mini_doc


def _doc_with(tools: list[dict], records: list[dict] | None = None) -> dict:
    doc = mini_doc()
    doc["services"]["custom"] = {
        "items": records
        if records is not None
        else [
            {"id": "i1", "name": "Red Apple", "color": "red", "tags": ["fruit", "sale"], "n": 3},
            {"id": "i2", "name": "Green apple", "color": "green", "tags": ["fruit"], "n": 5},
            {"id": "i3", "name": "Red Brick", "color": "red", "tags": ["stone"], "n": 1},
        ]
    }
    doc["tools"] += tools
    return doc


def _tool(name, op, props=None, required=(), **binding):
    return {
        "name": name,
        "parameters": {"type": "object", "properties": props or {}, "required": list(required)},
        "binding": {"op": op, "service": "custom", "collection": "items", **binding},
    }


S = {"type": "string"}


def _episode(*tools, records=None) -> Episode:
    return Episode(_doc_with(list(tools), records), "book", faults=False)


# ----------------------------------------------------------------------------- list


def test_list_returns_all_records_with_total():
    ep = _episode(_tool("all", "list"))
    result = ep.call("all", {})
    assert result.ok and result.content["total"] == 3
    assert [r["id"] for r in result.content["results"]] == ["i1", "i2", "i3"]


def test_list_where_with_param_fixed_value_and_list_membership():
    ep = _episode(
        _tool("by_color", "list", {"color": S}, where={"color": "$color"}),
        _tool("fruit", "list", where={"tags": "fruit"}),
    )
    assert [r["id"] for r in ep.call("by_color", {"color": "red"}).content["results"]] == [
        "i1",
        "i3",
    ]
    # an omitted optional argument drops the filter
    assert ep.call("by_color", {}).content["total"] == 3
    assert [r["id"] for r in ep.call("fruit", {}).content["results"]] == ["i1", "i2"]


def test_list_where_does_not_confuse_true_and_one():
    records = [{"id": "a", "flag": True}, {"id": "b", "flag": 1}]
    ep = _episode(_tool("flagged", "list", where={"flag": True}), records=records)
    assert [r["id"] for r in ep.call("flagged", {}).content["results"]] == ["a"]


def test_list_limit_fixed_and_from_param():
    ep = _episode(
        _tool("two", "list", limit=2),
        _tool("some", "list", {"limit": {"type": "integer"}}, limit="$limit"),
    )
    two = ep.call("two", {}).content
    assert len(two["results"]) == 2 and two["total"] == 3
    assert len(ep.call("some", {"limit": 1}).content["results"]) == 1
    bad = ep.call("some", {"limit": 0})
    assert not bad.ok and bad.error_code == "bad_arguments"


# ----------------------------------------------------------------------------- search


def _search(**extra):
    return _tool(
        "find", "search", {"q": S, "color": S}, ["q"], fields=["name", "tags"], query="$q", **extra
    )


def test_search_matches_every_term_case_insensitively_over_chosen_fields():
    ep = _episode(_search(where={"color": "$color"}))
    ids = lambda q, **kw: [r["id"] for r in ep.call("find", {"q": q, **kw}).content["results"]]  # noqa: E731
    assert ids("apple") == ["i1", "i2"]
    assert ids("RED apple") == ["i1"]
    assert ids("sale") == ["i1"]  # list fields are searchable
    assert ids("green") == ["i2"]  # name holds "Green"
    assert ids("red", color="red") == ["i1", "i3"]
    assert ids("") == ["i1", "i2", "i3"]
    assert ids("banana") == []


def test_search_does_not_look_at_other_fields():
    ep = _episode(_tool("find", "search", {"q": S}, ["q"], fields=["name"], query="$q"))
    assert ep.call("find", {"q": "stone"}).content == {"results": [], "total": 0}


def test_search_limit():
    ep = _episode(_search(limit=1))
    page = ep.call("find", {"q": "red"}).content
    assert page["total"] == 2 and len(page["results"]) == 1


# ----------------------------------------------------------------------------- get


def test_get_found_and_not_found():
    ep = _episode(_tool("get", "get", {"id": S}, ["id"], id="$id"))
    assert ep.call("get", {"id": "i2"}).content["name"] == "Green apple"
    missing = ep.call("get", {"id": "zz"})
    assert (missing.ok, missing.error_code) == (False, "not_found")
    assert "zz" in missing.error_message


# ----------------------------------------------------------------------------- create


def test_create_assigns_deterministic_ids_fixed_values_and_clock():
    ep = _episode(
        _tool(
            "add",
            "create",
            {"name": S},
            ["name"],
            values={"name": "$name", "kind": "fixed", "at": "$now", "literal": "$$name"},
        )
    )
    first = ep.call("add", {"name": "Pear"}).content
    second = ep.call("add", {"name": "Plum"}).content
    assert first == {
        "id": "items-1",
        "name": "Pear",
        "kind": "fixed",
        "at": "2026-03-02T09:01:00Z",
        "literal": "$name",
    }
    assert second["id"] == "items-2" and second["at"] == "2026-03-02T09:02:00Z"
    assert [r["id"] for r in ep.state["custom"]["items"]][-2:] == ["items-1", "items-2"]
    assert ep.audit_log[0].diff == (
        {
            "op": "create",
            "service": "custom",
            "collection": "items",
            "id": "items-1",
            "after": first,
        },
    )


def test_create_skips_ids_that_exist():
    ep = _episode(
        _tool("add", "create", {"name": S}, values={"name": "$name"}), records=[{"id": "items-1"}]
    )
    assert ep.call("add", {"name": "x"}).content["id"] == "items-2"


def test_create_omits_missing_optional_arguments():
    ep = _episode(
        _tool(
            "add",
            "create",
            {"name": S, "note": S},
            ["name"],
            values={"name": "$name", "note": "$note"},
        )
    )
    assert ep.call("add", {"name": "x"}).content == {"id": "items-1", "name": "x"}


def test_create_with_explicit_id_and_conflict():
    ep = _episode(_tool("add", "create", {"id": S}, ["id"], values={"id": "$id"}))
    assert ep.call("add", {"id": "new"}).content == {"id": "new"}
    clash = ep.call("add", {"id": "i1"})
    assert (clash.ok, clash.error_code) == (False, "conflict")


def test_create_with_merge_and_merge_cannot_set_id():
    ep = _episode(
        _tool(
            "add",
            "create",
            {"cells": {"type": "object"}, "sheet": S},
            values={"sheet": "$sheet"},
            merge="$cells",
        )
    )
    assert ep.call("add", {"sheet": "A", "cells": {"x": 1, "y": "z"}}).content == {
        "id": "items-1",
        "sheet": "A",
        "x": 1,
        "y": "z",
    }
    bad = ep.call("add", {"cells": {"id": "hijack"}})
    assert (bad.ok, bad.error_code) == (False, "bad_arguments")


# ----------------------------------------------------------------------------- update


def _update():
    return _tool(
        "edit",
        "update",
        {"id": S, "name": S, "n": {"type": "integer"}},
        ["id"],
        id="$id",
        values={"name": "$name", "n": "$n"},
    )


def test_update_changes_only_given_fields_and_records_a_diff():
    ep = _episode(_update())
    result = ep.call("edit", {"id": "i1", "n": 9})
    assert result.content == {
        "id": "i1",
        "name": "Red Apple",
        "color": "red",
        "tags": ["fruit", "sale"],
        "n": 9,
    }
    assert ep.audit_log[-1].diff[0]["changes"] == {"n": {"before": 3, "after": 9}}


def test_update_without_changes_has_no_diff():
    ep = _episode(_update())
    assert ep.call("edit", {"id": "i1", "n": 3}).ok
    assert ep.audit_log[-1].diff == ()


def test_update_missing_record():
    ep = _episode(_update())
    result = ep.call("edit", {"id": "nope", "n": 1})
    assert (result.ok, result.error_code) == (False, "not_found")


def test_update_never_mutates_the_shared_record():
    ep = _episode(_update())
    before = ep.state["custom"]["items"][0]
    ep.call("edit", {"id": "i1", "name": "Changed"})
    assert before["name"] == "Red Apple"
    ep.reset()
    assert ep.state["custom"]["items"][0]["name"] == "Red Apple"


# ----------------------------------------------------------------------------- delete


def test_delete_removes_record_and_keeps_index_consistent():
    ep = _episode(
        _tool("rm", "delete", {"id": S}, ["id"], id="$id"),
        _tool("get", "get", {"id": S}, ["id"], id="$id"),
    )
    assert ep.call("rm", {"id": "i1"}).content == {"deleted": "i1"}
    assert [r["id"] for r in ep.state["custom"]["items"]] == ["i2", "i3"]
    assert ep.call("get", {"id": "i3"}).content["name"] == "Red Brick"
    again = ep.call("rm", {"id": "i1"})
    assert (again.ok, again.error_code) == (False, "not_found")
    assert ep.audit_log[0].diff[0]["before"]["id"] == "i1"


@pytest.mark.parametrize("bad_id", ["", None])
def test_ops_that_need_an_id_reject_empty_ids(bad_id):
    ep = _episode(_tool("get", "get", {"id": {"type": ["string", "null"]}}, id="$id"))
    result = ep.call("get", {"id": bad_id})
    assert (result.ok, result.error_code) == (False, "bad_arguments")
