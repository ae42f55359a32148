"""The models built from configs: their sizes, their tokenizers, and reuse on resume."""

import pytest

pytest.importorskip("transformers")

from apps.training.hyperparameters import (
    GRPO_PRESETS,
    PRESETS,
    SMALL_PRESET_MODEL,
    TINY_PRESET_MODEL,
    validate_grpo_hyperparameters,
    validate_hyperparameters,
)
from apps.training.presets import TEXT_MODEL_SIZES, build_text_preset

ROWS = [
    {
        "messages": [
            {"role": "user", "content": f"Archive ticket T-{n} and tell me when done."},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "type": "function",
                        "function": {"name": "archive_ticket", "arguments": {"id": f"T-{n}"}},
                    }
                ],
            },
            {"role": "tool", "content": '{"ok": true}'},
            {"role": "assistant", "content": f"Ticket T-{n} is archived."},
        ],
        "tools": [{"type": "function", "function": {"name": "archive_ticket"}}],
    }
    for n in range(40)
]


def _parameters(directory):
    import transformers

    model = transformers.AutoModelForCausalLM.from_pretrained(directory)
    return sum(p.numel() for p in model.parameters())


def test_the_small_preset_is_a_decoder_of_10_to_40_million_parameters(tmp_path):
    directory = build_text_preset(ROWS, tmp_path / "small", seed=0, model=SMALL_PRESET_MODEL)
    import transformers

    config = transformers.AutoConfig.from_pretrained(directory)
    size = TEXT_MODEL_SIZES[SMALL_PRESET_MODEL]
    assert (config.num_hidden_layers, config.hidden_size) == (size.layers, size.hidden)
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    # a tokenizer trained on 40 short rows stops short of the vocabulary it may grow to
    assert len(tokenizer) <= size.vocab
    at_full_vocabulary = _parameters(directory) + (size.vocab - len(tokenizer)) * size.hidden
    assert 10e6 <= at_full_vocabulary <= 40e6


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "list_rows",
            "description": "List the rows of a sheet.",
            "parameters": {
                "type": "object",
                "properties": {"sheet": {"type": "string"}, "limit": {"type": "integer"}},
                "required": ["sheet"],
            },
        },
    }
]


def test_the_small_preset_lists_each_tool_on_one_line_and_marks_what_it_trains(tmp_path):
    import transformers

    from apps.training.encoding import training_chat_template

    directory = build_text_preset(ROWS, tmp_path / "small", seed=0, model=SMALL_PRESET_MODEL)
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    text = tokenizer.apply_chat_template(ROWS[0]["messages"], tools=TOOLS, tokenize=False)
    assert "\nlist_rows(sheet, limit?): List the rows of a sheet.\n" in text
    assert '"properties"' not in text
    assert (
        '<tool_call>\n{"name": "archive_ticket", "arguments": {"id": "T-0"}}\n</tool_call>' in text
    )
    # its own {% generation %} markers: SFT trains the assistant turns only, unpatched
    template = training_chat_template(tokenizer)
    assert template == tokenizer.chat_template
    encoded = tokenizer.apply_chat_template(
        ROWS[0]["messages"],
        tools=TOOLS,
        chat_template=template,
        return_dict=True,
        return_assistant_tokens_mask=True,
    )
    trained = [
        t for t, m in zip(encoded["input_ids"], encoded["assistant_masks"], strict=True) if m
    ]
    assert tokenizer.decode(trained).endswith("Ticket T-0 is archived.<|im_end|>\n")


def test_the_small_preset_parses_its_tool_calls_as_grpo_does(tmp_path):
    import transformers

    directory = build_text_preset(ROWS, tmp_path / "small", seed=0, model=SMALL_PRESET_MODEL)
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    reply = (
        '<tool_call>\n{"name": "list_rows", "arguments": {"sheet": "A"}}\n</tool_call><|im_end|>'
    )
    parsed = tokenizer.parse_response(reply, prefix="")
    assert parsed["tool_calls"] == [
        {"type": "function", "function": {"name": "list_rows", "arguments": {"sheet": "A"}}}
    ]
    assert tokenizer.parse_response("no call, just words<|im_end|>", prefix="")["content"] == (
        "no call, just words"
    )


@pytest.mark.parametrize("model", [TINY_PRESET_MODEL, SMALL_PRESET_MODEL])
def test_the_presets_tokenizers_spell_numbers_digit_by_digit(tmp_path, model):
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(
        build_text_preset(ROWS, tmp_path / "base", seed=0, model=model)
    )
    # T-12 ... T-39 were in the rows (as whole numbers); 4417 never was: all spelt alike
    for text, digits in (("T-12", ["1", "2"]), ('{"id": "T-4417"}', ["4", "4", "1", "7"])):
        pieces = [tokenizer.decode([i]) for i in tokenizer(text)["input_ids"]]
        assert [p for p in pieces if p.strip().isdigit()] == digits
        assert tokenizer.decode(tokenizer(text)["input_ids"]) == text


def test_the_tiny_preset_stays_the_tests_model(tmp_path):
    directory = build_text_preset(ROWS, tmp_path / "tiny", seed=0)
    assert _parameters(directory) < 1e6


def test_a_built_preset_is_reused_so_a_resumed_run_keeps_its_vocabulary(tmp_path):
    first = build_text_preset(ROWS, tmp_path / "base", seed=0, model=SMALL_PRESET_MODEL)
    before = (first / "tokenizer.json").read_bytes()
    again = build_text_preset(ROWS[:1], tmp_path / "base", seed=1, model=SMALL_PRESET_MODEL)
    assert again == first
    assert (again / "tokenizer.json").read_bytes() == before


def test_the_laptop_presets_name_the_small_model_and_validate():
    assert PRESETS["laptop-cpu"]["base_model"] == SMALL_PRESET_MODEL
    assert GRPO_PRESETS["laptop-cpu"]["base_model"] == SMALL_PRESET_MODEL
    sft = validate_hyperparameters({}, preset="laptop-cpu")
    assert (sft["learning_rate"], sft["epochs"], sft["context_loss"]) == (2e-3, 4.0, False)
    grpo = validate_grpo_hyperparameters({}, preset="laptop-cpu")
    assert (grpo["group_size"], grpo["batch_size"], grpo["learning_rate"]) == (4, 16, 2e-5)
    assert PRESETS["tiny-cpu"]["base_model"] == TINY_PRESET_MODEL
