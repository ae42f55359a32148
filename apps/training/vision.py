"""Vision-language SFT for the entry point (``apps.training.sft``): rows with images.

No Django here. A row in TRL's vision form (what a version whose demonstrations show images
exports as ``trl``: every ``content`` a list of parts, ``{"type": "image"}`` placeholders in
order, an ``images`` column of files) is trained with TRL's ``SFTTrainer`` and a processor
(tokenizer + image processor) through ``VisionCollator``, which does what TRL's own vision
collator does (the processor's chat template expands each image into its image tokens and
computes the pixel values) and two things it does not: the rows' ``tools`` go into the
template, and **per-turn weights** are honoured exactly as on the text path (the i-th
assistant span of the ``{% generation %}`` mask takes the i-th assistant message's weight;
weight 0 is masked out of the labels).

``preset:tiny-llava`` is built here from configs, with no download: a LLaVA whose vision
tower is a 1-layer CLIP (32x32 pixels, 8x8 patches: 16 image tokens per image) and whose
language model is a 2-layer Qwen2, a byte-level BPE tokenizer trained on the job's rows,
and ``CLIPImageProcessorPil`` with its defaults at that size. The chat template
(``chat_templates/chatml_vision_training.jinja``) renders an image as Qwen2-VL's
``<|vision_start|><|image_pad|><|vision_end|>``; the processor expands ``<|image_pad|>``.
A hub model (``AutoProcessor`` + ``AutoModelForImageTextToText``) keeps its own template
when it marks generations, else gets that one (right for Qwen2-VL / Qwen2.5-VL).
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

from apps.training.hyperparameters import TINY_VLM_PRESET_MODEL

VISION_TEMPLATE = Path(__file__).parent / "chat_templates" / "chatml_vision_training.jinja"
IMAGE_PAD = "<|image_pad|>"
VISION_TOKENS = ["<|vision_start|>", "<|vision_end|>", IMAGE_PAD]
TINY_IMAGE_SIZE = 32
TINY_PATCH_SIZE = 8


def has_images(rows: list[dict[str, Any]]) -> bool:
    return any(row.get("images") for row in rows)


def read_bundle_or_rows(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSONL file, or of a TRL bundle zip (``metadata.jsonl`` + ``images/``,
    extracted beside it); each row's ``images`` become absolute paths (they are relative to
    the data file, as the export writes them)."""
    if zipfile.is_zipfile(path):
        folder = path.with_name(path.stem + "-bundle")
        if not (folder / "metadata.jsonl").exists():
            with zipfile.ZipFile(path) as archive:
                archive.extractall(folder)
        rows = _jsonl(folder / "metadata.jsonl")
        for row in rows:
            if "file_names" in row:
                row["images"] = row.pop("file_names")
        base = folder
    else:
        rows = _jsonl(path)
        base = path.parent
    for row in rows:
        if row.get("images"):
            row["images"] = [str((base / name).resolve()) for name in row["images"]]
    return rows


def _jsonl(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or [] if isinstance(part, dict))


def build_tiny_vlm_preset(rows: list[dict[str, Any]], directory: Path, seed: int) -> Path:
    """The tiny LLaVA and its processor, saved to ``directory`` (reused when it exists: a
    resumed run must see the same vocabulary)."""
    if (directory / "config.json").exists():
        return directory
    import torch
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from apps.training.sft import SPECIAL_TOKENS

    def texts():
        for row in rows:
            tools = row.get("tools")
            yield tools if isinstance(tools, str) else json.dumps(tools)
            for message in row["messages"]:
                yield _text_of(message.get("content"))
                if message.get("tool_calls"):
                    yield json.dumps(message["tool_calls"], ensure_ascii=False)

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(
        texts(),
        trainers.BpeTrainer(
            vocab_size=2000,
            special_tokens=[*SPECIAL_TOKENS, *VISION_TOKENS],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        ),
    )
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
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
        text_config=transformers.Qwen2Config(
            vocab_size=len(tokenizer),
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=32768,
            tie_word_embeddings=True,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
            bos_token_id=None,
        ),
        image_token_id=tokenizer.convert_tokens_to_ids(IMAGE_PAD),
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    model = transformers.LlavaForConditionalGeneration(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    directory.mkdir(parents=True, exist_ok=True)
    processor.save_pretrained(directory)
    model.save_pretrained(directory)
    return directory


def load_vision(base: str, model_kwargs: dict[str, Any]):
    """``(processor, model, chat template)`` of a vision-language base model."""
    import transformers

    processor = transformers.AutoProcessor.from_pretrained(base)
    template = processor.chat_template or ""
    if "generation" not in template:
        template = VISION_TEMPLATE.read_text()
    tokenizer = processor.tokenizer
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = transformers.AutoModelForImageTextToText.from_pretrained(base, **model_kwargs)
    return processor, model, template


def tiny_vlm_base(base: str) -> bool:
    return base == TINY_VLM_PRESET_MODEL


class VisionCollator:
    """Rows (by index into ``rows``) → a padded batch: ``input_ids``, ``attention_mask``,
    ``labels`` (assistant tokens of weighted messages only) and the processor's image
    tensors (``pixel_values``, and ``image_grid_thw``/``image_sizes`` when it makes them)."""

    def __init__(self, processor, template: str, rows: list[dict[str, Any]]):
        self.processor = processor
        self.template = template
        self.rows = rows
        self.pad_id = processor.tokenizer.pad_token_id

    def encode(self, row: dict[str, Any]) -> dict[str, Any]:
        from PIL import Image

        from apps.training.sft import WeightMaskError, _spans, _tools_of

        images = []
        for path in row.get("images") or []:
            with Image.open(path) as image:
                images.append(image.convert("RGB"))
        messages, placed = [], 0
        for message in row["messages"]:
            item = {k: v for k, v in message.items() if k != "weight"}
            if isinstance(item.get("content"), list):
                parts = []
                for part in item["content"]:
                    if isinstance(part, dict) and part.get("type") == "image":
                        if placed >= len(images):
                            raise ValueError("A row has more image placeholders than images.")
                        part = {"type": "image", "image": images[placed]}
                        placed += 1
                    parts.append(part)
                item["content"] = parts
            messages.append(item)
        if placed != len(images):
            raise ValueError(f"A row names {len(images)} images for {placed} placeholders.")
        out = self.processor.apply_chat_template(
            [messages],
            tools=_tools_of(row),
            chat_template=self.template,
            tokenize=True,
            return_dict=True,
            return_tensors="pt",
            return_assistant_tokens_mask=True,
            processor_kwargs={"add_special_tokens": False},
        )
        input_ids = out["input_ids"][0]
        mask = [int(bit) for bit in out["assistant_masks"][0]]
        weights = [m.get("weight", 1) for m in row["messages"] if m.get("role") == "assistant"]
        spans = _spans(mask)
        if len(spans) != len(weights):
            raise WeightMaskError(
                f"The chat template marks {len(spans)} assistant spans for {len(weights)} "
                "assistant messages; per-turn weights cannot be applied with it."
            )
        labels = input_ids.clone().fill_(-100)
        excluded = 0
        for (start, end), weight in zip(spans, weights, strict=True):
            if weight:
                labels[start:end] = input_ids[start:end]
            else:
                excluded += end - start
        extra = {k: v for k, v in out.items() if k not in ("input_ids", "attention_mask")}
        extra.pop("assistant_masks", None)
        return {"input_ids": input_ids, "labels": labels, "extra": extra, "excluded": excluded}

    def __call__(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        import torch

        encoded = [self.encode(self.rows[example["index"]]) for example in examples]
        width = max(len(e["input_ids"]) for e in encoded)
        batch = {
            "input_ids": torch.full((len(encoded), width), self.pad_id, dtype=torch.long),
            "attention_mask": torch.zeros((len(encoded), width), dtype=torch.long),
            "labels": torch.full((len(encoded), width), -100, dtype=torch.long),
        }
        for i, e in enumerate(encoded):
            n = len(e["input_ids"])
            batch["input_ids"][i, :n] = e["input_ids"]
            batch["attention_mask"][i, :n] = 1
            batch["labels"][i, :n] = e["labels"]
        for key in {k for e in encoded for k in e["extra"]}:
            tensors = [e["extra"][key] for e in encoded if key in e["extra"]]
            batch[key] = torch.cat(tensors, dim=0)
        return batch

    def excluded_tokens(self) -> int:
        return sum(self.encode(row)["excluded"] for row in self.rows)
