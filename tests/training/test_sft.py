"""The entry point's tokenization: assistant tokens are trained, a weight-0 assistant turn
is masked like the prompt (a hand count of its tokens), and a template whose assistant spans
do not line up with the messages is refused rather than guessed."""

import json

import pytest

pytest.importorskip("trl")  # the `train` extra
transformers = pytest.importorskip("transformers")

from apps.training.encoding import (  # noqa: E402
    WeightMaskError,
    tokenize_row,
    training_chat_template,
)
from apps.training.presets import build_text_preset  # noqa: E402

ROW = {
    "messages": [
        {"role": "system", "content": "You are the operations assistant."},
        {"role": "user", "content": "Is the Q3 review booked?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "list_events", "arguments": {"day": "Thursday"}},
                }
            ],
            "weight": 1,
        },
        {"role": "tool", "name": "list_events", "tool_call_id": "call_1", "content": "[]"},
        {"role": "assistant", "content": "Not yet, shall I book it now?", "weight": 0},
        {"role": "user", "content": "Yes, at 15:00."},
        {"role": "assistant", "content": "Booked for Thursday at 15:00.", "weight": 1},
    ],
    "tools": json.dumps(
        [
            {
                "type": "function",
                "function": {
                    "name": "list_events",
                    "description": "List calendar events.",
                    "parameters": {"type": "object", "properties": {"day": {"type": "string"}}},
                },
            }
        ]
    ),
}


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    directory = build_text_preset([ROW], tmp_path_factory.mktemp("preset") / "base", seed=0)
    return transformers.AutoTokenizer.from_pretrained(directory)


def _trained_text(tokenizer, tokenized) -> list[str]:
    """The trained token runs, decoded."""
    runs, current = [], []
    for token, label in zip(tokenized["input_ids"], tokenized["labels"], strict=True):
        if label != -100:
            current.append(token)
        elif current:
            runs.append(tokenizer.decode(current))
            current = []
    if current:
        runs.append(tokenizer.decode(current))
    return runs


def test_weight_zero_turn_contributes_no_trained_tokens(tokenizer):
    template = training_chat_template(tokenizer)
    assert "{% generation %}" in template  # TRL's training variant of Qwen2.5's template
    masked = tokenize_row(tokenizer, template, ROW)
    every = tokenize_row(
        tokenizer,
        template,
        {**ROW, "messages": [{**m, "weight": 1} if "weight" in m else m for m in ROW["messages"]]},
    )
    assert masked["input_ids"] == every["input_ids"]  # the same text; only the labels differ
    # Hand count: the template renders an assistant text turn as "\n" + content + "<|im_end|>\n"
    # inside its generation block.
    excluded_text = "\nNot yet, shall I book it now?<|im_end|>\n"
    hand_count = len(tokenizer(excluded_text, add_special_tokens=False)["input_ids"])
    assert masked["excluded_tokens"] == hand_count
    assert every["trained_tokens"] - masked["trained_tokens"] == hand_count
    trained_labels = sum(1 for label in masked["labels"] if label != -100)
    assert trained_labels == masked["trained_tokens"]
    assert _trained_text(tokenizer, masked) == [
        '\n<tool_call>\n{"name": "list_events", "arguments": {"day": "Thursday"}}\n</tool_call>'
        "<|im_end|>\n",
        "\nBooked for Thursday at 15:00.<|im_end|>\n",
    ]
    assert len(_trained_text(tokenizer, every)) == 3


def test_context_loss_trains_the_prompt_and_tools_but_never_an_excluded_turn(tokenizer):
    template = training_chat_template(tokenizer)
    masked = tokenize_row(tokenizer, template, ROW)
    context = tokenize_row(tokenizer, template, ROW, context_loss=True)
    assert context["input_ids"] == masked["input_ids"]
    assert context["excluded_tokens"] == masked["excluded_tokens"] > 0
    trained = _trained_text(tokenizer, context)
    # everything but the excluded turn: the system, user and tool text are labels too
    assert len(trained) == 2
    assert trained[0].startswith("<|im_start|>system\nYou are the operations assistant.")
    assert trained[0].endswith("<|im_start|>assistant")
    assert trained[1].startswith("<|im_start|>user\nYes, at 15:00.")
    text = "".join(trained)
    assert "Not yet, shall I book it now?" not in text and "<tool_response>" in text
    assert context["trained_tokens"] == len(context["input_ids"]) - context["excluded_tokens"]


def test_template_without_one_span_per_assistant_message_is_refused(tokenizer):
    # A template that puts every assistant turn inside one generation block.
    template = (
        "{% generation %}{% for m in messages %}{{ m.role }}: {{ m.content }}\n"
        "{% endfor %}{% endgeneration %}"
    )
    with pytest.raises(WeightMaskError, match="marks 1 assistant spans for 3 assistant messages"):
        tokenize_row(tokenizer, template, ROW)


def test_rows_cut_before_their_first_trained_token_fail_with_what_to_change(tmp_path):
    from tests.training.conftest import run_sft_entry_point

    train = tmp_path / "train.jsonl"
    train.write_text(json.dumps(ROW) + "\n")
    result, events = run_sft_entry_point(
        tmp_path, "preset:tiny-qwen2", train, {"max_steps": 1, "max_length": 16}
    )
    assert result.returncode == 1
    assert events[-1]["status"] == "failed"
    assert "before its first trained token at max_length=16" in events[-1]["message"]
    assert "raise max_length" in events[-1]["message"]
