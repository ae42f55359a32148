"""LLaMA-Factory ShareGPT rows.

One example per line::

    {"conversations": [{"from": "human", "value": "..."},
                       {"from": "function_call", "value": "{\"name\": ..., \"arguments\": {...}}"},
                       {"from": "observation", "value": "..."},
                       {"from": "gpt", "value": "...", "loss": false}],
     "system": "...",
     "tools": "<JSON string of [{name, description, parameters}]>"}

LLaMA-Factory's rule: counting from 1, ``human``/``observation`` turns sit at odd positions
and ``gpt``/``function_call`` turns at even ones, and the conversation has an even length
(it ends with a model turn); a row that breaks it is skipped with a warning. Real agent
transcripts do not alternate by themselves, so ``sharegpt_row`` maps and merges:

- ``user`` → ``human``; ``assistant`` with text → ``gpt``; ``assistant`` with tool calls →
  ``function_call`` whose value is ``{"name", "arguments": {object}}`` as JSON (a JSON list
  of them for parallel calls), the form LLaMA-Factory's FunctionFormatter parses;
- the tool results of one assistant step → one ``observation`` (several results joined by
  a newline, in call order);
- adjacent turns on the same side are merged: two ``human`` (or ``gpt``) turns join with a
  blank line; a text reply followed by a tool call (or an assistant message with both text
  and calls) becomes the ``function_call`` alone — LLaMA-Factory's own OpenAI converter
  drops such text too, and the ``openai``/``trl`` exports keep it;
- turns before the first ``human`` and after the last model turn carry no training target
  and are dropped (a transcript cut after a tool result ends at the last model turn);
- the first ``system`` message becomes ``system``; a later one is appended to it;
- a model turn built only from excluded assistant messages (weight 0) carries
  ``"loss": false`` (AgentGym's per-turn flag); a merged turn that contains any excluded
  message is excluded as a whole (exclusion wins).

``tools`` lists plain ``{name, description, parameters}`` functions (the form LLaMA-Factory's
tool formatters read in every version).
"""

from __future__ import annotations

import json
from typing import Any

from apps.core.text import noun_for
from apps.datasets.formats.lint import Linter
from apps.datasets.formats.media import IMAGE_TOKEN, Media, sharegpt_images
from coworkenv_engine.attachments import message_text

LAYOUT = (
    'one row per trajectory; excluded turns carry `"loss": false`, which LLaMA-Factory '
    "ignores, so it trains them (use `sharegpt_turns` otherwise)"
)
HUMAN_SIDE = ("human", "observation")
MODEL_SIDE = ("gpt", "function_call")


def _arguments_object(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments


def _calls_value(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "name": (call.get("function") or {}).get("name"),
            "arguments": _arguments_object((call.get("function") or {}).get("arguments")),
        }
        for call in calls
        if isinstance(call, dict)
    ]


def sharegpt_row(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]], media: Media | None = None
) -> dict[str, Any]:
    """``media`` given (a split with images): a message's images become ``<image>`` tokens
    at the end of its value and the row's ``images`` lists their files in token order."""
    images: list[str] = []

    def text(content: Any) -> str:
        if media is None:
            return message_text(content)
        return sharegpt_images(content, media, images)

    system_parts, turns = _role_turns(messages, text)
    conversations = _conversation_items(_trim_untrained_ends(_merge_same_side(turns)))
    row: dict[str, Any] = {
        "conversations": conversations,
        "system": "\n\n".join(system_parts),
        "tools": json.dumps([t["function"] for t in tools], ensure_ascii=False),
    }
    if media is not None:
        kept = sum(turn["value"].count(IMAGE_TOKEN) for turn in conversations)
        row["images"] = images[:kept]  # a dropped trailing turn took its tokens along
    return row


def _role_turns(messages: list[dict[str, Any]], text) -> tuple[list[str], list[list[Any]]]:
    """The system texts, and one turn per message (a step's tool results joined into one
    observation). Each turn: [tag, value (str | list of call objects), excluded]."""
    system_parts: list[str] = []
    turns: list[list[Any]] = []
    for message in messages:
        role = message.get("role")
        if role == "system":
            if message.get("content"):
                system_parts.append(message["content"])
        elif role == "user":
            turns.append(["human", text(message.get("content")), False])
        elif role == "tool":
            content = text(message.get("content"))
            if turns and turns[-1][0] == "observation":
                turns[-1][1] = f"{turns[-1][1]}\n{content}"
            else:
                turns.append(["observation", content, False])
        elif role == "assistant":
            turns.append(_assistant_turn(message))
    return system_parts, turns


def _assistant_turn(message: dict[str, Any]) -> list[Any]:
    excluded = message.get("weight", 1) == 0
    if message.get("tool_calls"):
        return ["function_call", _calls_value(message["tool_calls"]), excluded]
    return ["gpt", message.get("content") or "", excluded]


def _merge_same_side(turns: list[list[Any]]) -> list[list[Any]]:
    merged: list[list[Any]] = []
    for turn in turns:
        if merged and (merged[-1][0] in HUMAN_SIDE) == (turn[0] in HUMAN_SIDE):
            _merge_into(merged[-1], turn)
        else:
            merged.append(list(turn))
    return merged


def _merge_into(last: list[Any], turn: list[Any]) -> None:
    last[2] = last[2] or turn[2]
    if turn[0] == "function_call":
        last[1] = (last[1] if last[0] == "function_call" else []) + turn[1]
        last[0] = "function_call"
    elif last[0] == "function_call":
        pass  # text after a call on the same side cannot happen in a valid transcript
    elif turn[0] == last[0]:
        last[1] = f"{last[1]}\n\n{turn[1]}"
    else:  # observation next to human: keep both texts as the human turn
        last[1] = f"{last[1]}\n\n{turn[1]}"
        last[0] = "human"


def _trim_untrained_ends(merged: list[list[Any]]) -> list[list[Any]]:
    """Drop the turns before the first human-side turn and after the last model turn."""
    while merged and merged[0][0] not in HUMAN_SIDE:
        merged.pop(0)
    while merged and merged[-1][0] not in MODEL_SIDE:
        merged.pop()
    return merged


def _conversation_items(merged: list[list[Any]]) -> list[dict[str, Any]]:
    conversations = []
    for tag, value, excluded in merged:
        if tag == "function_call":
            value = json.dumps(value[0] if len(value) == 1 else value, ensure_ascii=False)
        item: dict[str, Any] = {"from": tag, "value": value}
        if excluded:
            item["loss"] = False
        conversations.append(item)
    return conversations


def dataset_info_entry(*, file_name: str, images: bool = False) -> dict[str, Any]:
    """The ``dataset_info.json`` entry that registers an export with LLaMA-Factory (with
    ``images``: its ``images`` column, paths relative to the dataset folder)."""
    columns = {"messages": "conversations", "system": "system", "tools": "tools"}
    if images:
        columns["images"] = "images"
    return {
        "file_name": file_name,
        "formatting": "sharegpt",
        "columns": columns,
        "tags": {
            "role_tag": "from",
            "content_tag": "value",
            "user_tag": "human",
            "assistant_tag": "gpt",
            "observation_tag": "observation",
            "function_tag": "function_call",
        },
    }


def alternation_problems(conversations: Any) -> list[str]:
    """LLaMA-Factory's ShareGPT rule, as its converter applies it: 0-based even indexes are
    ``human``/``observation``, odd ones ``gpt``/``function_call``, the length is even."""
    if not isinstance(conversations, list) or not conversations:
        return ["`conversations` must be a non-empty list."]
    problems = []
    for index, turn in enumerate(conversations):
        tag = turn.get("from") if isinstance(turn, dict) else None
        allowed = HUMAN_SIDE if index % 2 == 0 else MODEL_SIDE
        if tag not in allowed:
            problems.append(
                f"conversations[{index}] (position {index + 1}) is {tag!r}; "
                f"{' or '.join(allowed)} belongs there."
            )
            break  # LLaMA-Factory stops at the first misplaced turn too
    if len(conversations) % 2:
        problems.append(f"{len(conversations)} turns: the conversation must end with a model turn.")
    return problems


class ShareGptLinter(Linter):
    """Each line: the alternation rule, string values, function calls that parse as
    ``{name, arguments: object}`` (or a list of them), ``system`` a string, ``tools`` a JSON
    string of functions, ``loss`` only true/false/null and only on model turns."""

    format = "sharegpt"
    min_rows_warning = 10

    def check_row(self, row: dict[str, Any], problem) -> None:
        unknown = sorted(set(row) - {"conversations", "system", "tools", "images"})
        if unknown:
            problem(f"Unknown {noun_for(len(unknown), 'key')} {', '.join(unknown)}.")
        conversations = row.get("conversations")
        if "images" in row:
            self._images(row["images"], conversations, problem)
        for message in alternation_problems(conversations):
            problem(message)
        if not isinstance(row.get("system", ""), str):
            problem("`system` must be a string.")
        names = self._tools(row.get("tools"), problem)
        if isinstance(conversations, list):
            self._turns(conversations, names, problem)

    @staticmethod
    def _images(images: Any, conversations: Any, problem) -> None:
        """A list of paths, one per ``<image>`` token in the values."""
        if not isinstance(images, list) or not all(isinstance(i, str) for i in images):
            problem("`images` must be a list of file paths.")
            return
        tokens = sum(
            t["value"].count(IMAGE_TOKEN)
            for t in (conversations if isinstance(conversations, list) else [])
            if isinstance(t, dict) and isinstance(t.get("value"), str)
        )
        if tokens != len(images):
            problem(
                f"{tokens} <image> token{'s' if tokens != 1 else ''} but "
                f"{len(images)} path{'s' if len(images) != 1 else ''} in `images`."
            )

    def _turns(self, conversations: list, names: set[str] | None, problem) -> None:
        trained = 0
        for index, turn in enumerate(conversations):
            if self._turn_trains(turn, f"conversations[{index}]", names, problem):
                trained += 1
        model_turns = [
            t for t in conversations if isinstance(t, dict) and t.get("from") in MODEL_SIDE
        ]
        if model_turns and trained == 0:
            problem("Every model turn has loss false: the example would train nothing.")

    def _turn_trains(self, turn: Any, where: str, names: set[str] | None, problem) -> bool:
        """Check one turn; True when it is a well-formed model turn whose loss is not false."""
        if not isinstance(turn, dict):
            problem(f"{where} is not an object.")
            return False
        value = turn.get("value")
        if not isinstance(value, str):
            problem(f"{where}: value must be a string.")
            return False
        if "loss" in turn:
            if turn["loss"] not in (True, False, None):
                problem(f"{where}: loss must be true, false or null.")
            if turn.get("from") not in MODEL_SIDE:
                problem(f"{where}: loss is only meaningful on gpt/function_call turns.")
        if turn.get("from") == "function_call":
            self._function_call(value, where, names, problem)
        return turn.get("from") in MODEL_SIDE and turn.get("loss") is not False

    @staticmethod
    def _tools(tools: Any, problem) -> set[str] | None:
        if tools is None:
            return None
        if not isinstance(tools, str):
            problem("`tools` must be a JSON string.")
            return None
        try:
            parsed = json.loads(tools) if tools else []
        except ValueError:
            problem("`tools` is not valid JSON.")
            return None
        if not isinstance(parsed, list):
            problem("`tools` must encode a list of functions.")
            return None
        names = set()
        for index, function in enumerate(parsed):
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                problem(f"tools[{index}] must be a function with a name.")
                continue
            names.add(function["name"])
        return names

    @staticmethod
    def _function_call(value: str, where: str, names: set[str] | None, problem) -> None:
        try:
            parsed = json.loads(value)
        except ValueError:
            problem(f"{where}: a function_call value must be JSON.")
            return
        for call in parsed if isinstance(parsed, list) else [parsed]:
            if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                problem(f"{where}: each call needs a name.")
                continue
            if not isinstance(call.get("arguments"), dict):
                problem(f"{where}: the arguments of {call['name']!r} must be an object.")
            if names is not None and call["name"] not in names:
                problem(f"{where}: calls {call['name']!r}, which is not among the row's tools.")
