"""How a TRL row becomes ``input_ids`` and ``labels``: assistant tokens only, per-turn weights.

No Django and no heavy import at module level: the SFT and GRPO entry points, the vision
collator and the tests share it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class WeightMaskError(ValueError):
    """The chat template's assistant spans do not line up with the assistant messages."""


def read_rows(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def tools_of(row: dict[str, Any]):
    tools = row.get("tools")
    return json.loads(tools) if isinstance(tools, str) else tools


def mask_spans(mask: list[int]) -> list[tuple[int, int]]:
    """``(start, end)`` of each run of 1s in ``mask``."""
    spans: list[tuple[int, int]] = []
    start = None
    for index, bit in enumerate([*mask, 0]):
        if bit and start is None:
            start = index
        elif not bit and start is not None:
            spans.append((start, index))
            start = None
    return spans


def weighted_spans(mask: list[int], messages: list[dict[str, Any]]) -> list[tuple[int, int, Any]]:
    """``(start, end, weight)`` of each assistant span of ``mask``: the i-th span takes the
    i-th assistant message's ``weight`` (1 when it has none); ``WeightMaskError`` when the
    spans and the assistant messages are not one to one."""
    weights = [m.get("weight", 1) for m in messages if m.get("role") == "assistant"]
    spans = mask_spans(mask)
    if len(spans) != len(weights):
        raise WeightMaskError(
            f"The chat template marks {len(spans)} assistant spans for {len(weights)} assistant "
            "messages; per-turn weights cannot be applied with it."
        )
    return [(start, end, weight) for (start, end), weight in zip(spans, weights, strict=True)]


def tokenize_row(
    tokenizer, chat_template: str, row: dict[str, Any], *, context_loss: bool = False
) -> dict[str, Any]:
    """``input_ids`` and ``labels`` of one TRL row: assistant tokens are labels, except the
    tokens of assistant messages whose ``weight`` is 0, which are -100 like the prompt
    (``context_loss``: the prompt's tokens are labels too; excluded turns stay -100).

    The template's ``{% generation %}`` blocks give one contiguous span per assistant message,
    in order; the i-th span takes the i-th assistant message's weight. A template whose spans
    do not match the assistant messages one to one raises ``WeightMaskError`` rather than
    guess. Also returns ``trained_tokens`` and ``excluded_tokens`` (the counts).
    """
    messages = [{k: v for k, v in message.items() if k != "weight"} for message in row["messages"]]
    out = tokenizer.apply_chat_template(
        messages,
        tools=tools_of(row),
        chat_template=chat_template,
        tokenize=True,
        return_dict=True,
        return_assistant_tokens_mask=True,
    )
    input_ids = list(out["input_ids"])
    labels = list(input_ids) if context_loss else [-100] * len(input_ids)
    excluded = 0
    for start, end, weight in weighted_spans(list(out["assistant_masks"]), row["messages"]):
        if weight:
            labels[start:end] = input_ids[start:end]
        else:
            labels[start:end] = [-100] * (end - start)
            excluded += end - start
    return {
        "input_ids": input_ids,
        "labels": labels,
        "trained_tokens": sum(1 for label in labels if label != -100),
        "excluded_tokens": excluded,
    }


def trl_template(name: str) -> str:
    import trl

    return (Path(trl.__file__).parent / "chat_templates" / f"{name}.jinja").read_text()


def training_chat_template(tokenizer) -> str:
    """The tokenizer's template if it already marks generations, else TRL's training
    variant of it (TRL ships one for the common families)."""
    from trl.chat_template_utils import get_training_chat_template

    template = tokenizer.chat_template
    if not template:
        raise ValueError("The tokenizer has no chat template.")
    patched = get_training_chat_template(tokenizer)
    return patched or template


def text_counts(tokenized: list[dict[str, Any]], max_length: int | None) -> dict[str, Any]:
    """What the text path reports at start, in the vision path's terms: tokens of weight-0
    turns, rows longer than ``max_length`` (TRL cuts them, keeping the start) and rows left
    without a trained token (TRL drops them)."""
    limit = max_length or None
    truncated = sum(1 for t in tokenized if limit and len(t["input_ids"]) > limit)
    dropped = sum(1 for t in tokenized if all(x == -100 for x in t["labels"][:limit]))
    return {
        "rows": len(tokenized),
        "counted_rows": len(tokenized),
        "excluded_tokens": sum(t["excluded_tokens"] for t in tokenized),
        "truncated_rows": truncated,
        "dropped_rows": dropped,
        "dropped": {"no_trained_tokens": dropped} if dropped else {},
    }
