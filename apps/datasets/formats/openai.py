"""OpenAI chat fine-tuning JSONL.

One example per line::

    {"messages": [{"role": "system", ...}, {"role": "user", ...},
                  {"role": "assistant", "tool_calls": [{"id", "type": "function",
                   "function": {"name", "arguments": "<JSON string>"}}], "weight": 1},
                  {"role": "tool", "tool_call_id", "content"},
                  {"role": "assistant", "content": "...", "weight": 1}],
     "tools": [{"type": "function", "function": {...}}],
     "parallel_tool_calls": false}

- every assistant message carries ``weight`` (0 excludes that turn from the loss, as a
  reviewer's "exclude from training" asks);
- ``content`` is left out of an assistant message that only calls tools;
- images a view tool returned follow that step's tool results in a ``user`` message of
  ``image_url`` parts with ``data:`` URLs (OpenAI's vision fine-tuning form);
- ``tools`` is given when the demonstration had tools; ``parallel_tool_calls: false`` is
  added when it had tools and no assistant message makes more than one call at once, so a
  model trained on it learns one call per step (rows with parallel calls leave the key out,
  i.e. OpenAI's default ``true``).

The linter refuses a training file with fewer than 10 examples (OpenAI's minimum) and warns
below that for validation.
"""

from __future__ import annotations

from typing import Any

from apps.core.text import noun_for
from apps.datasets.formats.lint import Linter, check_conversation, check_tools
from apps.datasets.formats.media import Media, has_images, openai_images, text_only

ALLOWED_KEYS = {"messages", "tools", "parallel_tool_calls"}
LAYOUT = (
    "one row per trajectory; every assistant message carries `weight`, and OpenAI "
    "fine-tuning trains only the weight-1 ones"
)
MIN_EXAMPLES = 10


def openai_row(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]], media: Media | None = None
) -> dict[str, Any]:
    """``media`` given: a view tool's images follow its results in a user message as
    ``image_url`` parts with ``data:`` URLs (without it they are left out)."""
    if has_images(messages):
        messages = openai_images(messages, media) if media is not None else text_only(messages)
    out = []
    for message in messages:
        role = message.get("role")
        if role == "assistant":
            item: dict[str, Any] = {"role": "assistant"}
            if message.get("content") is not None:
                item["content"] = message["content"]
            if message.get("tool_calls"):
                item["tool_calls"] = message["tool_calls"]
            item["weight"] = message.get("weight", 1)
        elif role == "tool":
            item = {
                "role": "tool",
                "tool_call_id": message.get("tool_call_id"),
                "content": message.get("content", ""),
            }
        else:
            item = {"role": role, "content": message.get("content", "")}
            if "weight" in message:
                item["weight"] = message["weight"]
        out.append(item)
    row: dict[str, Any] = {"messages": out}
    if tools:
        row["tools"] = tools
        parallel = any(len(m.get("tool_calls") or []) > 1 for m in messages)
        if not parallel:
            row["parallel_tool_calls"] = False
    return row


class OpenAILinter(Linter):
    """Checks each line as OpenAI's file validation would, and more: every call has a
    result, ids pair up, arguments parse as JSON objects, roles come in a legal order,
    weights (0/1) only on assistant messages, calls name declared tools."""

    format = "openai"
    min_rows_train = MIN_EXAMPLES
    min_rows_warning = MIN_EXAMPLES

    def check_row(self, row: dict[str, Any], problem) -> None:
        unknown = sorted(set(row) - ALLOWED_KEYS)
        if unknown:
            problem(
                f"Unknown {noun_for(len(unknown), 'key')} {', '.join(unknown)}; "
                f"allowed: {', '.join(sorted(ALLOWED_KEYS))}."
            )
        names = None
        if "tools" in row:
            names = check_tools(row["tools"], problem)
        parallel = check_conversation(
            row.get("messages"), problem, arguments_as="string", tools=names
        )
        if "parallel_tool_calls" in row:
            if not isinstance(row["parallel_tool_calls"], bool):
                problem("parallel_tool_calls must be true or false.")
            elif row["parallel_tool_calls"] is False and parallel:
                problem(
                    "parallel_tool_calls is false but an assistant message makes several calls."
                )
