"""The one-row-per-trained-turn layouts keep a reviewer's exclusion out of the labels.

TRL: the `trl_turns` rows go through SFTTrainer's own dataset preparation and collator
(a tiny Qwen2 and tokenizer built here, no hub): every weight-0 token is a -100 label, and
the labels are exactly the completions. The `trl` rows under `assistant_only_loss` label the
excluded turn (the limitation these rows remove). LLaMA-Factory cannot be installed beside
this project's pins (it caps transformers, trl and datasets below ours), so `sharegpt_turns`
is checked against its documented rules: alternation, and with `mask_history: true` only the
last turn of a row is a target.
"""

import json

import pytest

from apps.datasets.formats import FORMATS, normalize_messages, normalize_tools
from apps.datasets.formats.sharegpt import alternation_problems
from apps.datasets.formats.turns import (
    ShareGptTurnsLinter,
    TrlTurnsLinter,
    sharegpt_turn_rows,
    trl_turn_rows,
)

EXCLUDED = "Not yet, shall I book it now?"
TRANSCRIPT = [
    {"role": "system", "content": "You are the operations assistant."},
    {"role": "user", "content": "Is the Q3 review booked?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "list_events", "arguments": '{"day": "Thursday"}'},
            }
        ],
        "weight": 1,
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "[]"},
    {"role": "assistant", "content": EXCLUDED, "weight": 0},
    {"role": "user", "content": "Yes, at 15:00."},
    {"role": "assistant", "content": "Booked for Thursday at 15:00.", "weight": 1},
]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "list_events",
            "description": "List calendar events.",
            "parameters": {"type": "object", "properties": {"day": {"type": "string"}}},
        },
    }
]


def _rows(fmt):
    return FORMATS[fmt]["rows"](normalize_messages(TRANSCRIPT), normalize_tools(TOOLS))


def test_trl_turns_rows_are_prompt_completion_pairs():
    rows = _rows("trl_turns")
    assert [row["completion"][0].get("content") for row in rows] == [
        "",
        "Booked for Thursday at 15:00.",
    ]
    assert rows[0]["completion"][0]["tool_calls"][0]["function"]["arguments"] == {"day": "Thursday"}
    first, second = rows
    assert [m["role"] for m in first["prompt"]] == ["system", "user"]
    # The excluded reply is context of the next row, never a completion.
    assert {"role": "assistant", "content": EXCLUDED} in second["prompt"]
    assert second["prompt"][3] == {
        "role": "tool",
        "name": "list_events",
        "tool_call_id": "call_1",
        "content": "[]",
    }
    linter = TrlTurnsLinter("validation")
    for row in rows:
        linter.check_line(json.dumps(row))
    assert (linter.report.rows, linter.report.errors) == (2, [])


def test_trl_turns_linter_names_what_is_wrong():
    row = _rows("trl_turns")[1]
    bad = {
        **row,
        "prompt": [{**m, "weight": 0} if m["role"] == "assistant" else m for m in row["prompt"]],
        "completion": row["completion"] * 2,
    }
    linter = TrlTurnsLinter("validation")
    linter.check_line(json.dumps(bad))
    linter.check_line(json.dumps({**row, "completion": [{**row["completion"][0], "weight": 1}]}))
    linter.check_line(json.dumps({**row, "prompt": row["prompt"][:3]}))
    messages = [e["message"] for e in linter.report.errors]
    assert messages[0] == "`completion` must be a list of exactly one assistant message."
    assert messages[1] == "`weight` has no place here: the completion is the target."
    assert any("comes before the result of call call_1" in m for m in messages[2:])


def test_a_transcript_without_trained_turns_gives_no_row():
    untrained = [{**m, "weight": 0} if m["role"] == "assistant" else m for m in TRANSCRIPT]
    messages, tools = normalize_messages(untrained), normalize_tools(TOOLS)
    assert trl_turn_rows(messages, tools) == []
    assert sharegpt_turn_rows(messages, tools) == []


def test_sharegpt_turns_rows_end_with_their_trained_turn():
    rows = _rows("sharegpt_turns")
    assert [[t["from"] for t in row["conversations"]] for row in rows] == [
        ["human", "function_call"],
        ["human", "function_call", "observation", "gpt", "human", "gpt"],
    ]
    for row in rows:
        assert alternation_problems(row["conversations"]) == []
        assert "loss" not in row["conversations"][-1]  # mask_history's one target
    assert json.loads(rows[0]["conversations"][-1]["value"]) == {
        "name": "list_events",
        "arguments": {"day": "Thursday"},
    }
    context = rows[1]["conversations"][3]
    assert context == {"from": "gpt", "value": EXCLUDED, "loss": False}
    linter = ShareGptTurnsLinter("validation")
    for row in rows:
        linter.check_line(json.dumps(row))
    assert (linter.report.rows, linter.report.errors) == (2, [])


def test_sharegpt_turns_leaves_out_a_target_merged_with_an_excluded_reply():
    doubled = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": EXCLUDED, "weight": 0},
        {"role": "assistant", "content": "Hello, how can I help?", "weight": 1},
    ]
    assert sharegpt_turn_rows(normalize_messages(doubled), []) == []
    linter = ShareGptTurnsLinter("validation")
    row = {
        "conversations": [
            {"from": "human", "value": "Hi"},
            {"from": "gpt", "value": EXCLUDED, "loss": False},
        ],
        "system": "",
        "tools": "[]",
    }
    linter.check_line(json.dumps(row))
    assert "The last turn is the target: it cannot have loss false." in [
        e["message"] for e in linter.report.errors
    ]


def test_every_sft_format_says_its_layout():
    for fmt, spec in FORMATS.items():
        assert spec["layout"].strip(), fmt
    assert "prompt-completion" in FORMATS["trl_turns"]["layout"]
    assert "mask_history" in FORMATS["sharegpt_turns"]["layout"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    pytest.importorskip("trl")  # the `train` extra
    transformers = pytest.importorskip("transformers")
    from apps.training.presets import build_text_preset

    trl_row = FORMATS["trl"]["row"](normalize_messages(TRANSCRIPT), normalize_tools(TOOLS))
    directory = build_text_preset([trl_row], tmp_path_factory.mktemp("preset") / "base", seed=0)
    return directory, transformers.AutoTokenizer.from_pretrained(directory), trl_row


def _labelled(tiny, tmp_path, rows, **config):
    import datasets
    import trl

    directory, tokenizer, _ = tiny
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    dataset = datasets.load_dataset(
        "json", data_files=str(path), split="train", cache_dir=str(tmp_path / "cache")
    )
    trainer = trl.SFTTrainer(
        model=str(directory),
        args=trl.SFTConfig(
            output_dir=str(tmp_path / "out"), report_to=[], bf16=False, use_cpu=True, **config
        ),
        train_dataset=dataset,
        processing_class=tokenizer,
    )
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(len(dataset))])
    texts = []
    for ids, labels in zip(batch["input_ids"].tolist(), batch["labels"].tolist(), strict=True):
        texts.append(
            tokenizer.decode([t for t, label in zip(ids, labels, strict=True) if label != -100])
        )
    return texts, batch


def test_sfttrainer_labels_only_the_completions_of_trl_turns(tiny, tmp_path):
    _, tokenizer, _ = tiny
    texts, batch = _labelled(tiny, tmp_path, _rows("trl_turns"))
    assert texts == [
        '<tool_call>\n{"name": "list_events", "arguments": {"day": "Thursday"}}\n</tool_call>'
        "<|im_end|>\n",
        "Booked for Thursday at 15:00.<|im_end|>\n",
    ]
    # The excluded reply's tokens are in the second row's input, every one of them -100.
    excluded = tokenizer(EXCLUDED, add_special_tokens=False)["input_ids"]
    ids, labels = batch["input_ids"][1].tolist(), batch["labels"][1].tolist()
    start = next(i for i in range(len(ids)) if ids[i : i + len(excluded)] == excluded)
    assert labels[start : start + len(excluded)] == [-100] * len(excluded)


def test_sfttrainer_labels_the_excluded_turn_of_a_messages_row(tiny, tmp_path):
    """Why the turns layout exists: the `trl` row trains the weight-0 reply."""
    _, _, trl_row = tiny
    texts, _ = _labelled(tiny, tmp_path, [trl_row], assistant_only_loss=True)
    assert EXCLUDED in texts[0]
