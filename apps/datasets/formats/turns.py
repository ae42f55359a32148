"""One row per trained turn: layouts in which an excluded turn is never a label.

TRL's messages format trains every assistant turn and LLaMA-Factory ignores ``"loss":
false``, so a reviewer's exclusion (``weight: 0``) is lost in both. These layouts make it
structural instead: each assistant message with weight 1 becomes its own row, whose target
is that message alone and whose context is everything before it (excluded turns included,
as context only). A transcript with three trained assistant messages gives three rows.

- ``trl_turns``: TRL's conversational prompt-completion format, ``{"prompt": [messages],
  "completion": [the assistant message], "tools": "<JSON string>"}``, messages as in the
  ``trl`` export without ``weight``. SFTTrainer's ``completion_only_loss`` (its default for
  prompt-completion rows) labels the completion's tokens only.
- ``sharegpt_turns``: LLaMA-Factory ShareGPT rows (as ``sharegpt``) that end with the trained
  turn; trained with ``mask_history: true`` LLaMA-Factory labels the last turn only. A row
  whose last turn had to merge an excluded message (two assistant texts in a row) is left
  out, so exclusion still wins.

Images are written as text in both (the bundles of ``trl`` and ``sharegpt`` carry them).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from apps.core.text import noun_for
from apps.datasets.formats.lint import Linter, check_conversation, check_tools
from apps.datasets.formats.media import Media
from apps.datasets.formats.sharegpt import ShareGptLinter, sharegpt_row
from apps.datasets.formats.trl import trl_row

TRL_LAYOUT = (
    "prompt-completion: one row per trained assistant message, the message as `completion` "
    "and everything before it as `prompt`; excluded turns appear only in prompts, which "
    "SFTTrainer never labels (completion_only_loss)"
)
SHAREGPT_LAYOUT = (
    "one ShareGPT row per trained model turn, ending with it; train with `mask_history: "
    "true` so LLaMA-Factory labels only that last turn and never an excluded one"
)


def trained_indexes(messages: list[dict[str, Any]]) -> Iterator[int]:
    for index, message in enumerate(messages):
        if message.get("role") == "assistant" and message.get("weight", 1) != 0:
            yield index


def trl_turn_rows(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]], media: Media | None = None
) -> list[dict[str, Any]]:
    """The prompt-completion rows of one transcript (``media`` is not used: text only)."""
    rendered = trl_row(messages, tools)
    plain = [{k: v for k, v in m.items() if k != "weight"} for m in rendered["messages"]]
    return [
        {"prompt": plain[:index], "completion": [plain[index]], "tools": rendered["tools"]}
        for index in trained_indexes(messages)
    ]


def sharegpt_turn_rows(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]], media: Media | None = None
) -> list[dict[str, Any]]:
    """The ShareGPT rows of one transcript that each end with one trained model turn."""
    rows = []
    for index in trained_indexes(messages):
        row = sharegpt_row(messages[: index + 1], tools)
        conversations = row["conversations"]
        if conversations and "loss" not in conversations[-1]:
            rows.append(row)
    return rows


class TrlTurnsLinter(Linter):
    """Each line: ``prompt`` a legal conversation prefix, ``completion`` one assistant
    message (its calls answered by the next row's prompt), ``tools`` a JSON string."""

    format = "trl_turns"
    min_rows_warning = 10

    def check_row(self, row: dict[str, Any], problem) -> None:
        unknown = sorted(set(row) - {"prompt", "completion", "tools"})
        if unknown:
            problem(
                f"Unknown {noun_for(len(unknown), 'key')} {', '.join(unknown)}; "
                "a row has prompt, completion and tools."
            )
        names = None
        tools = row.get("tools")
        if not isinstance(tools, str):
            problem("`tools` must be a JSON string (Arrow merges nested tool schemas otherwise).")
        else:
            try:
                names = check_tools(json.loads(tools), problem)
            except ValueError:
                problem("`tools` is not valid JSON.")
        prompt, completion = row.get("prompt"), row.get("completion")
        if not isinstance(prompt, list) or not prompt:
            problem("`prompt` must be a non-empty list of messages.")
            return
        if (
            not isinstance(completion, list)
            or len(completion) != 1
            or not isinstance(completion[0], dict)
            or completion[0].get("role") != "assistant"
        ):
            problem("`completion` must be a list of exactly one assistant message.")
            return
        if any(isinstance(m, dict) and "weight" in m for m in prompt + completion):
            problem("`weight` has no place here: the completion is the target.")
        check_conversation(
            prompt + completion, problem, arguments_as="object", tools=names, open_end=True
        )


class ShareGptTurnsLinter(ShareGptLinter):
    """The ShareGPT rules, and a last turn that is trained (not ``loss: false``)."""

    format = "sharegpt_turns"

    def check_row(self, row: dict[str, Any], problem) -> None:
        super().check_row(row, problem)
        conversations = row.get("conversations")
        if isinstance(conversations, list) and conversations:
            last = conversations[-1]
            if isinstance(last, dict) and last.get("loss") is False:
                problem("The last turn is the target: it cannot have loss false.")
