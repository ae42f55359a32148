"""The input gate's pure functions: storable text, bounded JSON, ids from addresses."""

import json

import pytest

from apps.core.safeinput import (
    MAX_JSON_DEPTH,
    UnsafeInput,
    json_check,
    json_loads,
    parse_id,
    query_fault,
    text_fault,
)


@pytest.mark.parametrize(
    ("text", "fault"),
    [
        ("plain", None),
        ("emoji \U0001f600 and é", None),
        ("\ufffd", None),
        ("a\x00", "contains a NUL character (\\u0000), which cannot be stored"),
        (
            "\udc00",
            "contains a lone UTF-16 surrogate (\\udc00), which is not valid Unicode text",
        ),
    ],
)
def test_text_fault(text, fault):
    assert text_fault(text) == fault


def test_a_surrogate_pair_in_json_is_one_character_and_fine():
    assert json_loads('"\\ud83d\\ude00"') == "\U0001f600"


def test_json_check_points_at_the_value_with_escaped_tokens():
    with pytest.raises(UnsafeInput) as caught:
        json_check({"a/b": [{"c~d": "x\x00"}]})
    assert (caught.value.pointer, caught.value.code) == ("/a~1b/0/c~0d", "text_not_storable")


def test_json_check_refuses_a_bad_key_at_its_parent():
    with pytest.raises(UnsafeInput) as caught:
        json_check({"ok": {"\ud800": 1}})
    assert caught.value.pointer == "/ok"
    assert caught.value.message.startswith("A key at /ok contains a lone UTF-16 surrogate")


def test_depth_is_counted_in_containers():
    json_check(json.loads("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH))
    with pytest.raises(UnsafeInput) as caught:
        json_check(json.loads("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1)))
    assert caught.value.code == "json_too_deep"
    assert caught.value.pointer == "/0" * MAX_JSON_DEPTH


def test_json_loads_refuses_nan_and_recursion_depth():
    with pytest.raises(ValueError, match="NaN is not a JSON value"):
        json_loads("[NaN]")
    with pytest.raises(UnsafeInput) as caught:
        json_loads("[" * 200_000 + "]" * 200_000)
    assert caught.value.code == "json_too_deep"


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("12", 12),
        (12, 12),
        ("0", 0),
        ("\u00b2", None),
        ("\u0663", None),
        ("-1", None),
        ("1.0", None),
        ("", None),
        (str(2**63 - 1), 2**63 - 1),
        (str(2**63), None),
    ],
)
def test_parse_id(value, parsed):
    assert parse_id(value) == parsed


def test_query_fault_names_the_parameter():
    assert query_fault([("q", "ok"), ("domain", "a\x00")]) == (
        "The value of 'domain'",
        "contains a NUL character (\\u0000), which cannot be stored",
    )
    assert query_fault([("a\x00", "x")])[0] == "A parameter name"
    assert query_fault([("q", "fine")]) is None


def test_a_huge_key_or_name_is_not_echoed_whole():
    with pytest.raises(UnsafeInput) as caught:
        json_check({"k" * 100_000: "\x00"})
    assert caught.value.pointer == "/" + "k" * 199 + "…"
    assert len(caught.value.message) < 400
    what, _ = query_fault([("n" * 100_000, "\x00")])
    assert what == "The value of '" + "n" * 200 + "…'"
