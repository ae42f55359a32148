"""The export formats and their linters, on real engine transcripts and on broken rows."""

import json
from pathlib import Path

import jsonschema
import pytest

from apps.datasets.formats import (
    FORMATS,
    format_rows,
    normalize_messages,
    normalize_tools,
    openai_row,
    sharegpt_row,
    transcript_sha256,
    trl_row,
)
from apps.datasets.formats.lint import lint_lines
from apps.datasets.formats.openai import OpenAILinter
from apps.datasets.formats.sharegpt import ShareGptLinter
from apps.datasets.formats.trl import TrlLinter
from coworkenv_engine import policies, runner

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "samples").glob("*.json"))

# One line of OpenAI chat fine-tuning JSONL, as the formats reference describes it.
_FUNCTION_TOOL = {
    "type": "object",
    "required": ["type", "function"],
    "additionalProperties": False,
    "properties": {
        "type": {"const": "function"},
        "function": {
            "type": "object",
            "required": ["name", "parameters"],
            "additionalProperties": False,
            "properties": {
                "name": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"},
                "description": {"type": "string"},
                "parameters": {"type": "object", "required": ["type"]},
            },
        },
    },
}
OPENAI_LINE_SCHEMA = {
    "type": "object",
    "required": ["messages"],
    "additionalProperties": False,
    "properties": {
        "messages": {
            "type": "array",
            "minItems": 2,
            "items": {
                "oneOf": [
                    {
                        "type": "object",
                        "required": ["role", "content"],
                        "additionalProperties": False,
                        "properties": {
                            "role": {"enum": ["system", "user"]},
                            "content": {"type": "string"},
                        },
                    },
                    {
                        "type": "object",
                        "required": ["role", "weight"],
                        "additionalProperties": False,
                        "anyOf": [{"required": ["content"]}, {"required": ["tool_calls"]}],
                        "properties": {
                            "role": {"const": "assistant"},
                            "content": {"type": "string"},
                            "weight": {"enum": [0, 1]},
                            "tool_calls": {
                                "type": "array",
                                "minItems": 1,
                                "items": {
                                    "type": "object",
                                    "required": ["id", "type", "function"],
                                    "additionalProperties": False,
                                    "properties": {
                                        "id": {"type": "string", "minLength": 1},
                                        "type": {"const": "function"},
                                        "function": {
                                            "type": "object",
                                            "required": ["name", "arguments"],
                                            "additionalProperties": False,
                                            "properties": {
                                                "name": {"type": "string"},
                                                "arguments": {"type": "string"},
                                            },
                                        },
                                    },
                                },
                            },
                        },
                    },
                    {
                        "type": "object",
                        "required": ["role", "tool_call_id", "content"],
                        "additionalProperties": False,
                        "properties": {
                            "role": {"const": "tool"},
                            "tool_call_id": {"type": "string"},
                            "content": {"type": "string"},
                        },
                    },
                ]
            },
        },
        "tools": {"type": "array", "items": _FUNCTION_TOOL},
        "parallel_tool_calls": {"type": "boolean"},
    },
}


def llamafactory_accepts(row: dict) -> bool:
    """LLaMA-Factory's SharegptDatasetConverter rule, written out independently: turn i
    (0-based) must be human/observation when i is even and gpt/function_call when odd, and
    the number of turns must be even; anything else is skipped as abnormal."""
    odd_tags, even_tags = ("human", "observation"), ("gpt", "function_call")
    messages = row["conversations"]
    if not messages:
        return False
    for index, message in enumerate(messages):
        if message["from"] not in (odd_tags, even_tags)[index % 2]:
            return False
    return len(messages) % 2 == 0


def _engine_rows():
    rows = []
    for path in SAMPLES:
        doc = json.loads(path.read_text())
        for task in doc["tasks"]:
            for faults in (False, True):
                result = runner.run_task(doc, task["key"], policies.OraclePolicy(), faults=faults)
                rows.append((task["key"], result.transcript, result.tools))
    return rows


ENGINE_ROWS = _engine_rows()
# The SFT formats render a row from messages and tools alone; the scored-rollout format
# takes scores too (tests/datasets/test_rollouts.py).
SFT_FORMATS = [fmt for fmt, spec in FORMATS.items() if spec.get("kind", "sft") == "sft"]


@pytest.mark.parametrize("fmt", SFT_FORMATS)
def test_real_transcripts_pass_every_linter(fmt):
    linter = FORMATS[fmt]["linter"]("train")
    rows = 0
    for _key, transcript, tools in ENGINE_ROWS:
        for row in format_rows(fmt, normalize_messages(transcript), normalize_tools(tools)):
            linter.check_line(json.dumps(row))
            rows += 1
    report = linter.finish()
    assert report.rows == rows >= len(ENGINE_ROWS) == 18
    assert (report.error_count, report.errors) == (0, [])


def test_openai_rows_match_the_schema_and_keep_the_transcript():
    for _key, transcript, tools in ENGINE_ROWS:
        row = openai_row(normalize_messages(transcript), normalize_tools(tools))
        jsonschema.validate(row, OPENAI_LINE_SCHEMA)
        assert row["parallel_tool_calls"] is False
        assert row["tools"] == tools
        assistant_calls = [c for m in transcript for c in m.get("tool_calls") or []]
        exported_calls = [c for m in row["messages"] for c in m.get("tool_calls") or []]
        assert exported_calls == assistant_calls
        assert all(m["weight"] == 1 for m in row["messages"] if m["role"] == "assistant")


def test_openai_weights_and_parallel_calls():
    transcript = [
        {"role": "user", "content": "Look both up"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "a",
                    "type": "function",
                    "function": {"name": "get", "arguments": {"id": 1}},
                },
                {
                    "id": "b",
                    "type": "function",
                    "function": {"name": "get", "arguments": '{"id": 2}'},
                },
            ],
            "weight": 0,
        },
        {"role": "tool", "tool_call_id": "a", "content": "one"},
        {"role": "tool", "tool_call_id": "b", "content": "two"},
        {"role": "assistant", "content": "Both found."},
    ]
    tools = [{"type": "function", "function": {"name": "get", "parameters": {"type": "object"}}}]
    row = openai_row(normalize_messages(transcript), normalize_tools(tools))
    assert "parallel_tool_calls" not in row  # parallel calls: OpenAI's default (true)
    assert row["messages"][1] == {
        "role": "assistant",
        "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "get", "arguments": '{"id": 1}'}},
            {"id": "b", "type": "function", "function": {"name": "get", "arguments": '{"id": 2}'}},
        ],
        "weight": 0,
    }
    assert row["messages"][-1] == {"role": "assistant", "content": "Both found.", "weight": 1}
    jsonschema.validate(row, OPENAI_LINE_SCHEMA)
    report = lint_lines(OpenAILinter("validation"), [json.dumps(row)])
    assert report.error_count == 0
    assert report.warnings == [
        {"line": None, "message": "Only 1 examples; at least 10 are recommended."}
    ]


BROKEN_OPENAI = [
    (
        {
            "messages": [
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ],
                },
            ]
        },
        ["Call c1 has no tool result."],
    ),
    (
        {
            "messages": [
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{oops"},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "x"},
                {"role": "assistant", "content": "done"},
            ]
        },
        ["messages[1].tool_calls[0]: arguments do not parse as JSON: '{oops'."],
    ),
    (
        {
            "messages": [
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c9", "content": "x"},
                {"role": "assistant", "content": "done"},
            ]
        },
        [
            "messages[2]: tool_call_id 'c9' does not pair with an open call (c1).",
            "messages[3] (assistant) comes before the result of call c1: every tool call "
            "needs its tool message first.",
        ],
    ),
    (
        {
            "messages": [
                {"role": "user", "content": "hi", "weight": 1},
                {"role": "assistant", "content": "ok", "weight": 0},
            ]
        },
        [
            "messages[0]: `weight` is allowed only on assistant messages, not on user.",
            "No assistant message has weight 1: the example would train nothing.",
        ],
    ),
    (
        {
            "messages": [
                {"role": "assistant", "content": "I start"},
                {"role": "user", "content": "?"},
            ]
        },
        [
            "messages[0]: the conversation must start with a user message.",
            "The conversation must end with an assistant message or a tool result.",
        ],
    ),
    (
        {
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "ok", "weight": 2},
            ],
            "extra": 1,
        },
        [
            "Unknown key extra; allowed: messages, parallel_tool_calls, tools.",
            "messages[1]: weight must be 0 or 1, not 2.",
            "No assistant message has weight 1: the example would train nothing.",
        ],
    ),
    (
        {
            "messages": [
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "nope", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "x"},
                {"role": "assistant", "content": "done"},
            ],
            "tools": [
                {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
            ],
            "parallel_tool_calls": False,
        },
        ["messages[1].tool_calls[0]: calls 'nope', which is not among the row's tools."],
    ),
]


@pytest.mark.parametrize(("row", "expected"), BROKEN_OPENAI)
def test_openai_linter_catches(row, expected):
    linter = OpenAILinter("validation")
    linter.check_line(json.dumps(row), ref=42)
    assert [e["message"] for e in linter.report.errors] == expected
    assert {(e["line"], e["ref"]) for e in linter.report.errors} == {(1, 42)}


def test_openai_train_needs_ten_examples_and_bad_json_is_an_error():
    good = openai_row(normalize_messages(ENGINE_ROWS[0][1]), normalize_tools(ENGINE_ROWS[0][2]))
    report = lint_lines(OpenAILinter("train"), [json.dumps(good)] * 9 + ["{not json"])
    assert [e["line"] for e in report.errors] == [10]
    assert report.errors[0]["message"].startswith("Not valid JSON:")
    report = lint_lines(OpenAILinter("train"), [json.dumps(good)] * 9)
    assert report.errors == [
        {"line": None, "message": "The training file has 9 examples; openai needs at least 10."}
    ]
    assert lint_lines(OpenAILinter("train"), [json.dumps(good)] * 10).ok
    assert lint_lines(OpenAILinter("validation"), []).errors == [
        {"line": None, "message": "The file has no examples."}
    ]


def test_trl_rows_have_object_arguments_named_tool_messages_and_string_tools():
    for _key, transcript, tools in ENGINE_ROWS:
        row = trl_row(normalize_messages(transcript), normalize_tools(tools))
        assert isinstance(row["tools"], str)
        assert json.loads(row["tools"]) == tools
        calls = {}
        for message in row["messages"]:
            for call in message.get("tool_calls") or []:
                assert isinstance(call["function"]["arguments"], dict)
                calls[call["id"]] = call["function"]["name"]
            if message["role"] == "tool":
                assert message["name"] == calls[message["tool_call_id"]]


def test_trl_linter_refuses_string_arguments_and_unnamed_tool_messages():
    row = {
        "messages": [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{}"}}],
            },
            {"role": "tool", "content": "x"},
            {"role": "assistant", "content": "done"},
        ],
        "tools": [],
    }
    linter = TrlLinter("train")
    linter.check_line(json.dumps(row))
    assert [e["message"] for e in linter.report.errors] == [
        "`tools` must be a JSON string (Arrow merges nested tool schemas otherwise).",
        "messages[1].tool_calls[0]: arguments must be an object, not str.",
        "messages[2]: a tool message must carry the called function's name 'f'.",
    ]


def test_sharegpt_rows_obey_llamafactory_alternation():
    for key, transcript, tools in ENGINE_ROWS:
        row = sharegpt_row(normalize_messages(transcript), normalize_tools(tools))
        assert llamafactory_accepts(row), key
        assert row["system"] == transcript[0]["content"]
        assert [t["name"] for t in json.loads(row["tools"])] == [
            t["function"]["name"] for t in tools
        ]
        for turn in row["conversations"]:
            if turn["from"] == "function_call":
                call = json.loads(turn["value"])
                assert isinstance(call["arguments"], dict)


def test_sharegpt_merges_and_splits_awkward_agent_transcripts():
    call = lambda cid, name, args: {  # noqa: E731
        "id": cid,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }
    transcript = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Plan my day."},
        {"role": "user", "content": "And book lunch."},
        # text beside a tool call, then two parallel calls with two results
        {"role": "assistant", "content": "Let me look.", "tool_calls": [call("1", "a", {"x": 1})]},
        {"role": "tool", "tool_call_id": "1", "content": "A"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [call("2", "b", {}), call("3", "c", {"y": [1]})],
            "weight": 0,
        },
        {"role": "tool", "tool_call_id": "2", "content": "B"},
        {"role": "tool", "tool_call_id": "3", "content": "C"},
        # a text reply, then a separate tool-call message (same side: merged)
        {"role": "assistant", "content": "One more thing."},
        {"role": "assistant", "content": None, "tool_calls": [call("4", "a", {"x": 2})]},
        {"role": "tool", "tool_call_id": "4", "content": "A2"},
        {"role": "assistant", "content": "Done."},
        {"role": "assistant", "content": "Anything else?", "weight": 0},
        {"role": "user", "content": "trailing question with no answer"},
    ]
    tools = [
        {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
        for name in "abc"
    ]
    row = sharegpt_row(normalize_messages(transcript), normalize_tools(tools))
    assert row["system"] == "Be brief."
    assert row["conversations"] == [
        {"from": "human", "value": "Plan my day.\n\nAnd book lunch."},
        {"from": "function_call", "value": '{"name": "a", "arguments": {"x": 1}}'},
        {"from": "observation", "value": "A"},
        {
            "from": "function_call",
            "value": '[{"name": "b", "arguments": {}}, {"name": "c", "arguments": {"y": [1]}}]',
            "loss": False,
        },
        {"from": "observation", "value": "B\nC"},
        {"from": "function_call", "value": '{"name": "a", "arguments": {"x": 2}}'},
        {"from": "observation", "value": "A2"},
        {"from": "gpt", "value": "Done.\n\nAnything else?", "loss": False},
    ]
    assert llamafactory_accepts(row)
    linter = ShareGptLinter("train")
    linter.check_line(json.dumps(row))
    assert linter.report.errors == []


def test_sharegpt_linter_mirrors_the_rule():
    rows = [
        {"conversations": [{"from": "gpt", "value": "hi"}, {"from": "human", "value": "x"}]},
        {"conversations": [{"from": "human", "value": "hi"}]},
        {
            "conversations": [
                {"from": "human", "value": "hi"},
                {"from": "function_call", "value": '{"name": "f", "arguments": "{}"}'},
            ],
            "tools": "[]",
        },
        {
            "conversations": [
                {"from": "human", "value": "hi"},
                {"from": "gpt", "value": "yo", "loss": False},
            ]
        },
    ]
    linter = ShareGptLinter("train")
    for row in rows:
        linter.check_line(json.dumps(row))
        assert not llamafactory_accepts(row) or row is rows[2] or row is rows[3]
    assert [(e["line"], e["message"]) for e in linter.report.errors] == [
        (1, "conversations[0] (position 1) is 'gpt'; human or observation belongs there."),
        (2, "1 turns: the conversation must end with a model turn."),
        (3, "conversations[1]: the arguments of 'f' must be an object."),
        (3, "conversations[1]: calls 'f', which is not among the row's tools."),
        (4, "Every model turn has loss false: the example would train nothing."),
    ]


def test_duplicate_hash_ignores_ids_and_argument_spacing_but_not_weights():
    transcript = ENGINE_ROWS[0][1]
    messages = normalize_messages(transcript)
    renamed = json.loads(json.dumps(transcript))
    for message in renamed:
        for call in message.get("tool_calls") or []:
            call["id"] = "X" + call["id"]
            call["function"]["arguments"] = json.dumps(
                json.loads(call["function"]["arguments"]), indent=1
            )
        if message["role"] == "tool":
            message["tool_call_id"] = "X" + message["tool_call_id"]
    assert transcript_sha256(normalize_messages(renamed)) == transcript_sha256(messages)
    weighted = json.loads(json.dumps(transcript))
    weighted[-1]["weight"] = 0
    assert transcript_sha256(normalize_messages(weighted)) != transcript_sha256(messages)
    edited = json.loads(json.dumps(transcript))
    edited[-1]["content"] += "!"
    assert transcript_sha256(normalize_messages(edited)) != transcript_sha256(messages)


def test_a_cut_transcript_keeps_its_answered_steps():
    transcript = ENGINE_ROWS[0][1]  # system, user, (assistant call, tool) x5, assistant reply
    assert [m["role"] for m in transcript][:4] == ["system", "user", "assistant", "tool"]
    # Cut right after the third call (its result dropped): ends on the second call's result.
    cut = normalize_messages(transcript[:7])
    assert [m["role"] for m in cut] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    # A trailing user message and a half-answered parallel step are trimmed too.
    parallel = [
        {"role": "user", "content": "Go"},
        {"role": "assistant", "content": "Sure."},
        {"role": "user", "content": "And both?"},
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                {"id": "b", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "1"},
    ]
    assert [m["content"] for m in normalize_messages(parallel)] == ["Go", "Sure.", "And both?"][:2]
    for fmt in SFT_FORMATS:
        linter = FORMATS[fmt]["linter"]("validation")
        for row in format_rows(fmt, cut, normalize_tools(ENGINE_ROWS[0][2])):
            linter.check_line(json.dumps(row))
        assert linter.report.rows and linter.report.errors == [], fmt
    sharegpt = sharegpt_row(cut, [])
    assert [t["from"] for t in sharegpt["conversations"]] == [
        "human",
        "function_call",
        "observation",
        "function_call",
    ]
