import copy
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coworkenv_engine import spec as S
from coworkenv_engine.problems import SpecError

from .helpers import BROKEN, SAMPLES, load_json, mini_doc


def test_schema_is_a_valid_draft_2020_12_schema_and_a_fresh_copy():
    from jsonschema import Draft202012Validator

    schema = S.spec_json_schema()
    Draft202012Validator.check_schema(schema)
    assert schema["properties"]["schema"] == {"const": S.SCHEMA_ID}
    schema["title"] = "mutated"
    assert S.spec_json_schema()["title"] != "mutated"


def test_load_spec_builds_typed_objects(doc):
    spec = S.load_spec(doc)
    assert spec.name == "Mini" and spec.domain == "" and spec.clock == S.Clock()
    task = spec.task("book")
    assert task.split == "train" and len(task.turns) == 2
    assert task.turns[1].updates[0].silent is True
    assert task.graders[1].weight == 1.0 and task.graders[0].weight == 2
    assert spec.tool("send_email").binding.op == "create"
    assert spec.tool("nope") is None
    with pytest.raises(KeyError):
        spec.task("nope")


def test_load_spec_raises_spec_error_with_pointers(doc):
    doc["tasks"][0]["graders"][0]["weight"] = "heavy"
    with pytest.raises(SpecError) as exc:
        S.load_spec(doc)
    assert [(p.code, p.pointer) for p in exc.value.problems] == [
        ("schema_invalid", "/tasks/0/graders/0/weight")
    ]


def test_load_spec_also_rejects_static_errors(doc):
    doc["tools"][0]["binding"]["service"] = "agenda"
    with pytest.raises(SpecError) as exc:
        S.load_spec(doc)
    assert exc.value.problems[0].code == "unknown_service"
    assert exc.value.problems[0].pointer == "/tools/0/binding/service"


def test_parse_spec_skips_static_checks(doc):
    doc["tools"][0]["binding"]["service"] = "agenda"
    assert S.parse_spec(doc).tools[0].binding.service == "agenda"


@pytest.mark.parametrize("garbage", [None, 3, "x", [], [1, 2]])
def test_non_object_documents_are_not_an_object(garbage):
    with pytest.raises(SpecError) as exc:
        S.load_spec(garbage)
    assert exc.value.problems[0].code == "not_an_object"


def test_canonical_dump_fills_defaults_and_is_idempotent(doc):
    dumped = S.canonical_dump(doc)
    assert dumped["domain"] == "" and dumped["clock"] == {
        "start": "2026-03-02T09:00:00Z",
        "step_seconds": 60,
    }
    assert dumped["tools"][0]["faults"] == {
        "rate": 0,
        "kinds": ["rate_limit", "server_error", "timeout"],
    }
    task = dumped["tasks"][0]
    assert task["split"] == "train" and task["user"] == {"persona": "", "reveals_when_asked": []}
    assert task["graders"][1]["weight"] == 1 and task["graders"][1]["at_turn"] is None
    assert S.canonical_dump(dumped) == dumped
    assert list(dumped)[:3] == ["schema", "name", "domain"]


def test_hash_ignores_omitted_defaults_key_order_and_integral_floats(doc):
    h = S.spec_hash(doc)
    explicit = S.canonical_dump(doc)
    assert S.spec_hash(explicit) == h
    reordered = json.loads(json.dumps(doc, sort_keys=True))
    assert S.spec_hash(reordered) == h
    floats = copy.deepcopy(doc)
    floats["tasks"][0]["graders"][0]["weight"] = 2.0
    assert S.spec_hash(floats) == h
    changed = copy.deepcopy(doc)
    changed["tasks"][0]["graders"][0]["weight"] = 3
    assert S.spec_hash(changed) != h


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_canonical_hash_of_a_canonical_document_is_its_spec_hash(doc, seed):
    from apps.synthesis.generators import generate_environment

    for document in (doc, generate_environment(seed=seed, capabilities=["resolve-conflicts"])):
        canonical = S.canonical_dump(document)
        assert S.canonical_hash(canonical) == S.spec_hash(document) == S.spec_hash(canonical)


def test_spec_hash_of_invalid_document_hashes_raw_canonical_json():
    assert S.spec_hash({"b": 1, "a": 2.0}) == S.spec_hash({"a": 2, "b": 1})
    assert len(S.spec_hash([1, 2])) == 64


def test_canonical_json_is_compact_sorted_and_unicode():
    assert S.canonical_json({"b": [1.0, "é"], "a": None}) == '{"a":null,"b":[1,"é"]}'
    with pytest.raises(ValueError):
        S.canonical_json(float("nan"))


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.stem)
def test_samples_round_trip_through_canonical_dump(path):
    doc = load_json(path)
    spec = S.load_spec(doc)
    assert S.canonical_dump(spec) == S.canonical_dump(doc)
    assert S.spec_hash(S.canonical_dump(doc)) == S.spec_hash(doc)
    assert S.canonical_dump(S.load_spec(S.canonical_dump(doc))) == S.canonical_dump(spec)


def test_openai_tools_format(spec):
    tools = spec.openai_tools()
    assert tools[0] == {
        "type": "function",
        "function": {
            "name": "list_events",
            "description": "List calendar events.",
            "parameters": {"type": "object", "properties": {}, "required": []},
        },
    }
    tools[0]["function"]["parameters"]["x"] = 1
    assert "x" not in spec.tools[0].parameters


def test_system_prompt_lists_constraints(spec):
    assert spec.task("book").system_prompt() == (
        "You are the assistant of me@acme.test.\n\nConstraints:\n- Never email outside acme.test."
    )


def test_load_spec_passes_through_a_loaded_spec(spec):
    assert S.load_spec(spec) is spec


def test_mini_doc_is_not_shared_between_calls():
    a, b = mini_doc(), mini_doc()
    a["name"] = "x"
    assert b["name"] == "Mini"


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), {1, 2}, object()])
def test_non_json_values_are_schema_problems_with_pointers(doc, bad):
    doc["tools"][0]["binding"]["where"] = {"title": bad}
    with pytest.raises(SpecError) as exc:
        S.load_spec(doc)
    assert [(p.code, p.pointer) for p in exc.value.problems] == [
        ("schema_invalid", "/tools/0/binding/where/title")
    ]


def _both_ways(document):
    """load_canonical's answer and the two-pass one it replaces: (canonical, spec) or the
    problems each raised."""

    def outcome(load):
        try:
            return load()
        except SpecError as exc:
            return [(p.code, p.pointer) for p in exc.problems]
        except RecursionError:
            return "recursion"

    def two_passes():
        canonical = S.canonical_dump(document)
        return canonical, S.load_spec(canonical)

    return outcome(lambda: S.load_canonical(document)), outcome(two_passes)


@pytest.mark.parametrize("path", SAMPLES + BROKEN, ids=lambda p: p.stem)
def test_load_canonical_equals_load_spec_of_the_canonical_dump(path):
    document = load_json(path)
    document = document.get("spec", document) if path in BROKEN else document
    one_pass, two_passes = _both_ways(document)
    assert one_pass == two_passes


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    capability=st.sampled_from(
        [
            "clarify-before-acting",
            "exact-output-contract",
            "extract-from-documents",
            "multi-day-follow-up",
            "notice-silent-changes",
            "recover-from-tool-errors",
            "resolve-conflicts",
        ]
    ),
    weight=st.sampled_from([1, 2.0, 0.5, 3]),
)
def test_load_canonical_equals_two_passes_on_generated_environments(seed, capability, weight):
    from apps.synthesis.generators import generate_environment

    document = generate_environment(seed=seed, capabilities=[capability])
    document["tasks"][0]["graders"][0]["weight"] = weight  # floats normalised the same way
    one_pass, two_passes = _both_ways(document)
    assert one_pass == two_passes
    assert isinstance(one_pass, tuple)


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.stem)
def test_a_certified_document_loads_as_the_whole_way_without_the_checks(path, monkeypatch):
    document = load_json(path)
    canonical, spec = S.load_canonical(document)
    certified = S.canonical_hash(canonical)

    def no_pass(doc):
        raise AssertionError("the schema pass ran for a certified document")

    monkeypatch.setattr(S, "parse_spec", no_pass)
    assert S.load_canonical(document, certified_hash=certified) == (canonical, spec)


@pytest.mark.parametrize(
    "path", [p for p in BROKEN if "spec" in load_json(p)], ids=lambda p: p.stem
)
def test_a_document_other_than_the_certified_one_goes_the_whole_way(path, doc):
    """A broken spec offered with a valid document's hash (rows changed since that
    validation) is refused exactly as without the hash."""
    broken = load_json(path)["spec"]  # (the cases of unparsable text have no document)
    certified = S.canonical_hash(S.canonical_dump(doc))
    outcome = []
    for kwargs in ({}, {"certified_hash": certified}):
        try:
            S.load_canonical(broken, **kwargs)
            outcome.append("loaded")
        except SpecError as exc:
            outcome.append([(p.code, p.pointer) for p in exc.problems])
        except RecursionError:
            outcome.append("recursion")
    assert outcome[0] == outcome[1]
