"""The models built from configs, with tokenizers trained on the job's own rows (no download).

``preset:tiny-qwen2`` (a 2-layer Qwen2, hidden 64, Qwen2.5's chat template; the tests'),
``preset:small-qwen2`` (8 layers, hidden 256, an 8,192-token tokenizer: ~10M parameters, what
a laptop's CPU trains to use tools in under an hour; its template lists each tool on one
line, ``chat_templates/chatml_compact_tools_training.jinja``) and
``preset:tiny-llava`` (a LLaVA with a 1-layer CLIP vision tower, 32x32 pixels, 8x8 patches:
16 image tokens per image, over the same tiny Qwen2). What the tests and CPU smoke runs train.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from apps.training.encoding import trl_template
from apps.training.hyperparameters import SMALL_PRESET_MODEL, TINY_PRESET_MODEL


@dataclass(frozen=True)
class TextModelSize:
    """A Qwen2 decoder's shape, and the vocabulary of the tokenizer trained for it."""

    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    vocab: int
    compact_tools: bool = False  # CoworkEnv's one-line tool list instead of Qwen2.5's schemas


TEXT_MODEL_SIZES = {
    TINY_PRESET_MODEL: TextModelSize(
        hidden=64, intermediate=128, layers=2, heads=4, kv_heads=2, vocab=2000
    ),
    SMALL_PRESET_MODEL: TextModelSize(
        hidden=256, intermediate=1088, layers=8, heads=4, kv_heads=2, vocab=8192, compact_tools=True
    ),
}

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
VISION_TEMPLATE = Path(__file__).parent / "chat_templates" / "chatml_vision_training.jinja"
COMPACT_TOOLS_TEMPLATE = (
    Path(__file__).parent / "chat_templates" / "chatml_compact_tools_training.jinja"
)
IMAGE_PAD = "<|image_pad|>"
VISION_TOKENS = ["<|vision_start|>", "<|vision_end|>", IMAGE_PAD]
TINY_IMAGE_SIZE = 32
TINY_PATCH_SIZE = 8


def build_text_preset(
    rows: list[dict[str, Any]], directory: Path, seed: int, *, model: str = TINY_PRESET_MODEL
) -> Path:
    """The preset ``model`` (``TEXT_MODEL_SIZES``) and a byte-level BPE tokenizer trained on
    ``rows`` (the job's train and eval files), with Qwen2.5's chat template, saved to
    ``directory`` (reused when it exists: a resumed run must see the same vocabulary)."""
    if (directory / "config.json").exists():
        return directory
    import transformers

    size = TEXT_MODEL_SIZES[model]

    def texts():
        for row in rows:
            yield (
                row.get("tools")
                if isinstance(row.get("tools"), str)
                else json.dumps(row.get("tools"))
            )
            for message in row["messages"]:
                yield json.dumps(message, ensure_ascii=False)

    tokenizer = train_bpe_tokenizer(texts(), SPECIAL_TOKENS, vocab_size=size.vocab)
    if size.compact_tools:
        from trl.chat_template_utils import qwen3_template

        tokenizer.chat_template = COMPACT_TOOLS_TEMPLATE.read_text()
        # TRL recognises Qwen's own templates only: GRPO parses tool calls with this one
        tokenizer.response_template = qwen3_template
    else:
        tokenizer.chat_template = trl_template("qwen2_5")
    return save_preset_model(
        transformers.Qwen2ForCausalLM, qwen2_config(tokenizer, size), seed, tokenizer, directory
    )


def train_bpe_tokenizer(texts, special_tokens: list[str], *, vocab_size: int = 2000):
    """A byte-level BPE tokenizer trained on ``texts`` that spells numbers digit by digit,
    ChatML's end of turn as its EOS and ``<|endoftext|>`` as its padding (the presets')."""
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    bpe = Tokenizer(models.BPE())
    # One token a digit, as Qwen's tokenizers do: an id or amount of a held-out environment
    # is then spelt with tokens every row trained, not with merges of numbers seen once.
    bpe.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False),
        ]
    )
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(
        texts,
        trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=special_tokens,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        ),
    )
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )


def qwen2_config(tokenizer, size: TextModelSize):
    """A Qwen2 decoder of ``size`` over ``tokenizer``."""
    import transformers

    return transformers.Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=size.hidden,
        intermediate_size=size.intermediate,
        num_hidden_layers=size.layers,
        num_attention_heads=size.heads,
        num_key_value_heads=size.kv_heads,
        max_position_embeddings=32768,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )


def save_preset_model(model_class, config, seed: int, tokenizer, directory: Path, saver=None):
    """``model_class(config)`` initialised from ``seed``, stopping and padding as ``tokenizer``
    does, saved to ``directory`` with ``saver`` (its tokenizer or processor)."""
    import torch

    torch.manual_seed(seed)
    model = model_class(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    directory.mkdir(parents=True, exist_ok=True)
    (saver or tokenizer).save_pretrained(directory)
    model.save_pretrained(directory)
    return directory


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or [] if isinstance(part, dict))


def build_tiny_vlm_preset(rows: list[dict[str, Any]], directory: Path, seed: int) -> Path:
    """The tiny LLaVA and its processor, saved to ``directory`` (reused when it exists: a
    resumed run must see the same vocabulary)."""
    if (directory / "config.json").exists():
        return directory
    import transformers

    def texts():
        for row in rows:
            tools = row.get("tools")
            yield tools if isinstance(tools, str) else json.dumps(tools)
            for message in row["messages"]:
                yield _text_of(message.get("content"))
                if message.get("tool_calls"):
                    yield json.dumps(message["tool_calls"], ensure_ascii=False)

    tokenizer = train_bpe_tokenizer(texts(), [*SPECIAL_TOKENS, *VISION_TOKENS])
    template = VISION_TEMPLATE.read_text()
    tokenizer.chat_template = template
    image_processor = transformers.CLIPImageProcessorPil(
        size={"shortest_edge": TINY_IMAGE_SIZE},
        crop_size={"height": TINY_IMAGE_SIZE, "width": TINY_IMAGE_SIZE},
    )
    processor = transformers.LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        chat_template=template,
        patch_size=TINY_PATCH_SIZE,
        vision_feature_select_strategy="default",
        image_token=IMAGE_PAD,
        num_additional_image_tokens=1,
    )
    config = transformers.LlavaConfig(
        vision_config=transformers.CLIPVisionConfig(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            image_size=TINY_IMAGE_SIZE,
            patch_size=TINY_PATCH_SIZE,
            projection_dim=32,
        ),
        text_config=qwen2_config(tokenizer, TEXT_MODEL_SIZES[TINY_PRESET_MODEL]),
        image_token_id=tokenizer.convert_tokens_to_ids(IMAGE_PAD),
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
        tie_word_embeddings=True,
    )
    return save_preset_model(
        transformers.LlavaForConditionalGeneration, config, seed, tokenizer, directory, processor
    )
