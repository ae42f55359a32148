"""The compiled argument checks answer exactly what jsonschema answers."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coworkenv_engine.argcheck import compile_check
from coworkenv_engine.formats import compile_validator
from coworkenv_engine.library import KINDS, standard_tools
from coworkenv_engine.simulator import Episode
from coworkenv_engine.spec import load_spec

from .helpers import mini_doc

LIBRARY_SCHEMAS = [t["parameters"] for kind in sorted(KINDS) for t in standard_tools(kind)]
EXTRA_SCHEMAS = [
    {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "minimum": 1, "maximum": 5},
            "x": {"type": ["number", "null"], "exclusiveMinimum": 0, "exclusiveMaximum": 2},
            "flag": {"enum": [True, "yes", 1, None]},
            "c": {"const": 1},
            "s": {"type": "string", "minLength": 2, "maxLength": 4, "format": "date"},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2},
            "when": {"format": "date-time"},
            "mail": {"type": "string", "format": "email"},
            "any": True,
            "never": False,
        },
        "required": ["n"],
        "additionalProperties": {"type": "string"},
    },
    {"properties": {"a": {"type": "boolean"}}, "additionalProperties": False},
    {"type": ["object", "array"], "items": {"type": "integer"}, "required": ["k"]},
]

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-3, 8)
    | st.sampled_from([0.5, 1.0, 2.0, -1.5, 3.0])
    | st.sampled_from(["", "a", "ab", "2026-03-05", "2026-03-05T10:00:00Z", "x@y.test", "yes"])
    | st.text(max_size=6)
)
values = st.recursive(
    scalars,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c, max_size=3),
    max_leaves=6,
)
OWN_KEYS = ["n", "x", "flag", "c", "s", "tags", "when", "mail", "any", "never", "a", "k", "zz"]
keys = st.sampled_from(
    [*OWN_KEYS, *sorted({k for s in LIBRARY_SCHEMAS for k in s.get("properties", {})})]
)
instances = st.dictionaries(keys, values, max_size=6) | values
SCHEMAS = LIBRARY_SCHEMAS + EXTRA_SCHEMAS
# Every schema and every property/items schema inside one, so each keyword meets values of
# every type rather than only when a whole object happens to be valid elsewhere.
_parts = SCHEMAS + [
    sub
    for schema in SCHEMAS
    for prop in schema.get("properties", {}).values()
    for sub in (prop, *([prop["items"]] if isinstance(prop, dict) and "items" in prop else []))
]
PARTS = list({json.dumps(p, sort_keys=True): p for p in _parts}.values())  # distinct


@pytest.mark.parametrize("schema", LIBRARY_SCHEMAS + EXTRA_SCHEMAS)
def test_every_library_and_subset_schema_compiles(schema):
    assert compile_check(schema) is not None


@settings(max_examples=1000, deadline=None)
@given(schema=st.sampled_from(PARTS), instance=values | instances)
def test_compiled_check_agrees_with_jsonschema(schema, instance):
    assert compile_check(schema)(instance) is compile_validator(schema).is_valid(instance)


@pytest.mark.parametrize(
    ("instance", "valid"),
    [
        ({"n": 1}, True),
        ({"n": True}, False),  # a boolean is not an integer
        ({"n": 2.0}, True),  # 2.0 is an integer in draft 2020-12
        ({"n": 9}, False),
        ({"n": 1, "flag": 1}, True),
        ({"n": 1, "flag": False}, False),  # False equals no member (not 0, not None)
        ({"n": 1, "c": 1.0}, True),
        ({"n": 1, "c": True}, False),
        ({"n": 1, "x": 0}, False),
        ({"n": 1, "x": None}, True),
        ({"n": 1, "s": "2026"}, False),  # not a date
        ({"n": 1, "when": "2026-03-05 10:00"}, False),  # no 'T'
        ({"n": 1, "when": 5}, True),  # formats apply to strings only
        ({"n": 1, "tags": []}, False),
        ({"n": 1, "never": 0}, False),
        ({"n": 1, "other": 3}, False),  # additionalProperties is a string schema
        ({"n": 1, "other": "ok"}, True),
        ({}, False),
        ([], False),
    ],
)
def test_compiled_check_edge_cases(instance, valid):
    schema = EXTRA_SCHEMAS[0]
    assert compile_validator(schema).is_valid(instance) is valid
    assert compile_check(schema)(instance) is valid


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/x"}}, "$defs": {"x": {}}},
        {"type": "string", "pattern": "^a"},
        {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        {"type": "array", "prefixItems": [{"type": "string"}]},
        {"enum": [[1], {"a": 1}]},
        {"type": "decimal"},
        {"type": "object", "required": "a"},
    ],
)
def test_other_keywords_fall_back_to_jsonschema(schema):
    assert compile_check(schema) is None


def test_a_tool_outside_the_subset_is_still_checked_with_jsonschema_messages():
    doc = mini_doc()
    tool = next(t for t in doc["tools"] if t["name"] == "send_email")
    tool["parameters"]["properties"]["to"] = {"type": "string", "pattern": "@acme\\.test$"}
    episode = Episode(load_spec(doc), doc["tasks"][0]["key"], faults=False)
    bad = episode.call("send_email", {"to": "x@evil.test", "subject": "s", "body": "b"})
    assert (bad.ok, bad.error_code) == (False, "bad_arguments")
    assert bad.error_message == "'to': 'x@evil.test' does not match '@acme\\\\.test$'"
    ok = episode.call("send_email", {"to": "dana@acme.test", "subject": "s", "body": "b"})
    assert ok.ok
