"""TRL SFTTrainer rows (conversational "messages" format with tools).

One example per line::

    {"messages": [{"role": "user", "content": "..."},
                  {"role": "assistant", "content": "", "tool_calls": [{"id", "type": "function",
                   "function": {"name", "arguments": {<object>}}}], "weight": 1},
                  {"role": "tool", "name": "<function>", "tool_call_id", "content": "..."},
                  {"role": "assistant", "content": "...", "weight": 1}],
     "tools": "<JSON string of the OpenAI function tools>"}

- ``arguments`` are objects, as chat templates expect (they render them with ``tojson``);
- tool messages carry the called function's ``name`` (and keep ``tool_call_id``);
- an assistant message that only calls tools has ``content: ""`` (not null: some templates
  print ``None``);
- ``tools`` is a JSON *string*: Arrow would otherwise merge every row's tool schemas into
  one struct and fill the missing fields with nulls. TRL's SFTTrainer ``json.loads`` a
  string ``tools`` column before applying the chat template.

Excluded turns: TRL's messages format has no per-turn loss weight (``assistant_only_loss``
trains every assistant turn). Each assistant message keeps its ``weight`` (0 or 1), which
chat templates ignore; a training script that honours reviewer exclusions masks weight-0
turns itself (or uses the ``openai`` export, which carries the same weights natively).
"""

from __future__ import annotations

import json
from typing import Any

from apps.core.text import count_of, noun_for
from apps.datasets.formats.lint import Linter, check_conversation, check_tools
from apps.datasets.formats.media import Media, has_images, structured, text_only, trl_images

LAYOUT = (
    "one row per trajectory (messages); SFTTrainer trains every assistant turn, excluded "
    "ones too, unless a collator masks the `weight: 0` messages (use `trl_turns` otherwise)"
)
PARQUET_LAYOUT = (
    "the `trl` rows in one Parquet file, `images` an Image feature holding the pictures "
    "(`datasets.load_dataset('parquet', data_files=URL)` reads it from the export URL); "
    "weights as in `trl`"
)


def _arguments_object(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments  # left as a string: the linter reports it
    return arguments


def trl_row(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]], media: Media | None = None
) -> dict[str, Any]:
    """``media`` given (a split with images): the row is in TRL's vision form, every
    ``content`` a list of parts, images after their tool results as ``{"type": "image"}``
    in a user message, and an ``images`` column of file paths (``[]`` when none)."""
    images: list[str] | None = None
    if media is not None:
        messages, images = trl_images(messages, media)
    elif has_images(messages):
        messages = text_only(messages)
    names: dict[Any, Any] = {}
    out = []
    for message in messages:
        role = message.get("role")
        if role == "assistant":
            item: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
            if message.get("tool_calls"):
                calls = []
                for call in message["tool_calls"]:
                    function = call.get("function") or {}
                    names[call.get("id")] = function.get("name")
                    calls.append(
                        {
                            "id": call.get("id"),
                            "type": "function",
                            "function": {
                                "name": function.get("name"),
                                "arguments": _arguments_object(function.get("arguments")),
                            },
                        }
                    )
                item["tool_calls"] = calls
            item["weight"] = message.get("weight", 1)
        elif role == "tool":
            item = {
                "role": "tool",
                "name": names.get(message.get("tool_call_id")),
                "tool_call_id": message.get("tool_call_id"),
                "content": message.get("content", ""),
            }
        else:
            item = {"role": role, "content": message.get("content", "")}
            if "weight" in message:
                item["weight"] = message["weight"]
        out.append(item)
    row: dict[str, Any] = {"messages": out, "tools": json.dumps(tools, ensure_ascii=False)}
    if images is not None:
        for item in out:
            item["content"] = structured(item["content"])
        row["images"] = images
    return row


class TrlLinter(Linter):
    """Each line: ``messages`` in a legal order with object arguments and named tool
    messages, ``tools`` a JSON string of function tools."""

    format = "trl"
    min_rows_warning = 10

    def check_row(self, row: dict[str, Any], problem) -> None:
        unknown = sorted(set(row) - {"messages", "tools", "images"})
        if unknown:
            problem(
                f"Unknown {noun_for(len(unknown), 'key')} {', '.join(unknown)}; "
                "a row has messages, tools and (with images) images."
            )
        if "images" in row:
            images = row["images"]
            if not isinstance(images, list) or not all(isinstance(i, str) for i in images):
                problem("`images` must be a list of file paths.")
            else:
                slots = sum(
                    1
                    for m in row.get("messages") or []
                    if isinstance(m, dict) and isinstance(m.get("content"), list)
                    for p in m["content"]
                    if isinstance(p, dict) and p.get("type") == "image"
                )
                if slots != len(images):
                    problem(
                        f"{count_of(slots, 'image placeholder')} but "
                        f"{count_of(len(images), 'image')} in `images`."
                    )
        tools = row.get("tools")
        names = None
        if not isinstance(tools, str):
            problem("`tools` must be a JSON string (Arrow merges nested tool schemas otherwise).")
        else:
            try:
                names = check_tools(json.loads(tools), problem)
            except ValueError:
                problem("`tools` is not valid JSON.")
        check_conversation(row.get("messages"), problem, arguments_as="object", tools=names)


class TrlParquetLinter(TrlLinter):
    """The ``trl`` rules: the Parquet file holds the same rows (services/bundles.py)."""

    format = "trl_parquet"
