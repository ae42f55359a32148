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
A hub model (``AutoProcessor`` + ``AutoModelForImageTextToText``) trains with the template
``vision_chat_template`` chooses (its own with ``{% generation %}`` markers; that one for
Qwen2-VL / Qwen2.5-VL; TRL's training variant of a family TRL knows; else refused) and
checks on a probe conversation (one span per assistant message, tool calls inside).

Rows are encoded when collated, fitted to ``max_length`` with every image block kept whole
(``fit_to_length``), and counted once per row as they go (``VisionCollator.counts``).
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path
from typing import Any

from apps.training.encoding import read_rows, tools_of, weighted_spans
from apps.training.hyperparameters import TINY_VLM_PRESET_MODEL
from apps.training.vision_templates import vision_chat_template


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
        rows = read_rows(folder / "metadata.jsonl")
        for row in rows:
            if "file_names" in row:
                row["images"] = row.pop("file_names")
        base = folder
    else:
        rows = read_rows(path)
        base = path.parent
    for row in rows:
        if row.get("images"):
            row["images"] = [str((base / name).resolve()) for name in row["images"]]
    return rows


def load_vision(base: str, model_kwargs: dict[str, Any], *, tools: bool = False):
    """``(processor, model, chat template)`` of a vision-language base model (the template as
    ``vision_chat_template`` chooses and checks it)."""
    import transformers

    processor = transformers.AutoProcessor.from_pretrained(base)
    template = vision_chat_template(processor, base, tools=tools)
    tokenizer = processor.tokenizer
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = transformers.AutoModelForImageTextToText.from_pretrained(base, **model_kwargs)
    return processor, model, template


def tiny_vlm_base(base: str) -> bool:
    return base == TINY_VLM_PRESET_MODEL


DROP_IMAGES = "image_tokens_over_max_length"
DROP_NO_LABELS = "no_trained_tokens"
# Tokens that belong to an image's block besides the image tokens themselves (Qwen-VL's
# wrappers, Gemma 3's, Idefics3 / SmolVLM's tile markers): never cut, never labels.
IMAGE_WRAPPER = re.compile(
    r"<(\|vision_(start|end)\||start_of_image|end_of_image|fake_token_around_image|global-img"
    r"|row_\d+_col_\d+)>"
)


def image_token_ids(processor) -> list[int]:
    """The ids of the processor's image token and of the wrappers around it."""
    tokenizer = processor.tokenizer
    ids = set()
    token_id = getattr(processor, "image_token_id", None)
    if token_id is None and getattr(processor, "image_token", None):
        token_id = tokenizer.convert_tokens_to_ids(processor.image_token)
    if token_id is not None:
        ids.add(int(token_id))
    for token, index in tokenizer.get_added_vocab().items():
        if IMAGE_WRAPPER.fullmatch(token):
            ids.add(int(index))
    return sorted(ids)


def fit_to_length(input_ids, protected, max_length: int | None):
    """Truncation of one encoded row to ``max_length`` tokens, after its images were expanded:
    every image block (``protected``: image tokens and their wrappers) is kept whole, and text
    tokens are kept from the start until the length is reached (TRL's ``keep_start`` over the
    text), so the pixel values still match the image tokens one for one. Returns ``(keep,
    reason)``: the boolean mask of kept positions (``None``: nothing cut), or ``reason`` when
    the row must be dropped (its image tokens alone exceed ``max_length``)."""
    import torch

    if max_length is None or len(input_ids) <= max_length:
        return None, ""
    images = int(protected.sum())
    if images > max_length:
        return None, DROP_IMAGES
    text_position = torch.cumsum((~protected).long(), dim=0)
    return protected | (text_position <= max_length - images), ""


class VisionCollator:
    """Rows (by index into ``rows``) → a padded batch: ``input_ids``, ``attention_mask``,
    ``labels`` (assistant tokens of weighted messages only) and the processor's image
    tensors (``pixel_values``, and ``image_grid_thw``/``image_sizes`` when it makes them).

    Rows are encoded when their batch is collated (images read then), fitted to
    ``max_length`` (``fit_to_length``) and counted once per row index, whatever the epoch:
    ``counts()`` gives the tokens of weight-0 turns, the truncated rows and the dropped ones
    by reason (image tokens over ``max_length``; no trained token left, as TRL drops such
    rows on the text path). A dropped row leaves its batch; a batch whose rows are all
    dropped takes the next rows of the same split (``splits``) that fit instead."""

    def __init__(
        self,
        processor,
        template: str,
        rows: list[dict[str, Any]],
        *,
        max_length: int | None = None,
        splits: list[range] | None = None,
    ):
        import torch

        self.processor = processor
        self.template = template
        self.rows = rows
        self.max_length = max_length
        self.splits = splits or [range(len(rows))]
        self.pad_id = processor.tokenizer.pad_token_id
        self.protected_ids = torch.tensor(image_token_ids(processor), dtype=torch.long)
        self.counted: dict[int, tuple[int, bool, str]] = {}  # index: (excluded, cut, dropped)

    def encode(self, row: dict[str, Any]) -> dict[str, Any]:
        import torch
        from PIL import Image

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
            tools=tools_of(row),
            chat_template=self.template,
            tokenize=True,
            return_dict=True,
            return_tensors="pt",
            return_assistant_tokens_mask=True,
            processor_kwargs={"add_special_tokens": False},
        )
        input_ids = out["input_ids"][0]
        mask = [int(bit) for bit in out["assistant_masks"][0]]
        labels = input_ids.clone().fill_(-100)
        excluded = 0
        for start, end, weight in weighted_spans(mask, row["messages"]):
            if weight:
                labels[start:end] = input_ids[start:end]
            else:
                excluded += end - start
        protected = torch.isin(input_ids, self.protected_ids)
        labels[protected] = -100  # image tokens are never labels
        width = len(input_ids)
        extra, per_token = {}, {}
        for key, value in out.items():
            if key in ("input_ids", "attention_mask", "assistant_masks"):
                continue
            if hasattr(value, "shape") and tuple(value.shape) == (1, width):
                per_token[key] = value[0]  # e.g. token_type_ids: cut and padded like the ids
            else:
                extra[key] = value
        return {
            "input_ids": input_ids,
            "labels": labels,
            "protected": protected,
            "per_token": per_token,
            "extra": extra,
            "excluded": excluded,
        }

    def prepare(self, index: int) -> dict[str, Any] | None:
        """The encoded, fitted row ``index``, or ``None`` when it is dropped; counted once."""
        encoded = self.encode(self.rows[index])
        keep, reason = fit_to_length(encoded["input_ids"], encoded["protected"], self.max_length)
        if keep is not None:
            encoded["input_ids"] = encoded["input_ids"][keep]
            encoded["labels"] = encoded["labels"][keep]
            encoded["per_token"] = {k: v[keep] for k, v in encoded["per_token"].items()}
        if not reason and not bool((encoded["labels"] != -100).any()):
            reason = DROP_NO_LABELS
        self.counted.setdefault(index, (encoded["excluded"], keep is not None, reason))
        return None if reason else encoded

    def __call__(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        import torch

        indexes = [example["index"] for example in examples]
        encoded = [e for e in (self.prepare(i) for i in indexes) if e is not None]
        if not encoded and indexes:
            encoded = [self._substitute(indexes[0])]
        width = max(len(e["input_ids"]) for e in encoded)
        batch = {
            "input_ids": torch.full((len(encoded), width), self.pad_id, dtype=torch.long),
            "attention_mask": torch.zeros((len(encoded), width), dtype=torch.long),
            "labels": torch.full((len(encoded), width), -100, dtype=torch.long),
        }
        for key in {k for e in encoded for k in e["per_token"]}:
            dtype = next(e["per_token"][key].dtype for e in encoded if key in e["per_token"])
            batch[key] = torch.zeros((len(encoded), width), dtype=dtype)
        for i, e in enumerate(encoded):
            n = len(e["input_ids"])
            batch["input_ids"][i, :n] = e["input_ids"]
            batch["attention_mask"][i, :n] = 1
            batch["labels"][i, :n] = e["labels"]
            for key, value in e["per_token"].items():
                batch[key][i, :n] = value
        for key in {k for e in encoded for k in e["extra"]}:
            tensors = [e["extra"][key] for e in encoded if key in e["extra"]]
            batch[key] = torch.cat(tensors, dim=0)
        return batch

    def _substitute(self, index: int) -> dict[str, Any]:
        """The next row of ``index``'s split that is not dropped (a batch is never empty)."""
        split = next((s for s in self.splits if index in s), range(len(self.rows)))
        start = split.index(index)
        for step in range(1, len(split)):
            candidate = split[(start + step) % len(split)]
            if self.counted.get(candidate, (0, False, ""))[2]:
                continue
            encoded = self.prepare(candidate)
            if encoded is not None:
                return encoded
        raise ValueError(
            f"Every row of the split is dropped (max_length {self.max_length}): "
            f"{self.counts()['dropped']}."
        )

    def counts(self) -> dict[str, Any]:
        return summarize_counts(self.counted, len(self.rows))

    def excluded_tokens(self) -> int:
        """Every row encoded now (the eager count the lazy one is checked against)."""
        for index in range(len(self.rows)):
            if index not in self.counted:
                self.prepare(index)
        return self.counts()["excluded_tokens"]


def summarize_counts(counted: dict[int, tuple[int, bool, str]], rows: int) -> dict[str, Any]:
    """What ``counted`` (row index → (excluded tokens, truncated, drop reason)), merged over
    processes, reports: the keys the text path reports at start, ``counted_rows`` of ``rows``."""
    dropped: dict[str, int] = {}
    for _, _, reason in counted.values():
        if reason:
            dropped[reason] = dropped.get(reason, 0) + 1
    return {
        "rows": rows,
        "counted_rows": len(counted),
        "excluded_tokens": sum(excluded for excluded, _, _ in counted.values()),
        "truncated_rows": sum(1 for _, cut, _ in counted.values() if cut),
        "dropped_rows": sum(dropped.values()),
        "dropped": dict(sorted(dropped.items())),
    }
