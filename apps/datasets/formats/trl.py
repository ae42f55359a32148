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

from apps.core.text import noun_for
from apps.datasets.formats.lint import Linter, check_conversation, check_tools


def _arguments_object(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments  # left as a string: the linter reports it
    return arguments


def trl_row(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
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
    return {"messages": out, "tools": json.dumps(tools, ensure_ascii=False)}


class TrlLinter(Linter):
    """Each line: ``messages`` in a legal order with object arguments and named tool
    messages, ``tools`` a JSON string of function tools."""

    format = "trl"
    min_rows_warning = 10

    def check_row(self, row: dict[str, Any], problem) -> None:
        unknown = sorted(set(row) - {"messages", "tools"})
        if unknown:
            problem(
                f"Unknown {noun_for(len(unknown), 'key')} {', '.join(unknown)}; "
                "a row has messages and tools."
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
