"""One normalized shape for stored transcripts, and the hashes and sizes computed over it.

``normalize_messages`` is lenient: it never raises, keeps what it cannot understand in a
form the linters will report (an unknown role stays an unknown role, arguments that are
not JSON stay the string they were), and only tidies what has one obvious meaning:

- ``content`` given as a list of parts becomes the joined text of its ``text`` parts
  (a user or tool message with ``image_url`` parts keeps its parts: text, then the
  images, e.g. a view tool's ``attachment:sha256:<hex>`` image, which each format renders
  its own way); ``None`` becomes ``""`` except on an assistant message that carries tool
  calls;
- tool-call ``arguments`` given as an object become its JSON text (OpenAI's form);
- every assistant message gets a ``weight``: the stored 0 or 1, or 1 when absent (a stored
  weight that is not 0 or 1 is kept so the linters can refuse it);
- keys no format uses (``name`` on user messages, ``refusal``, ``audio`` …) are dropped;
- a tail with nothing to learn from is trimmed (a reviewer may cut a transcript anywhere):
  trailing user messages, and a trailing assistant step whose calls are not all answered
  (with the results it did get). A transcript may so end with a tool result: the calls
  before it are still trained on.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from coworkenv_engine.attachments import image_urls

ROLES = ("system", "user", "assistant", "tool")


def canonical_json(value: Any) -> str:
    """Sorted keys, no spaces, UTF-8 kept: the text every hash in this app is taken over."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
        return "".join(parts)
    return json.dumps(content, ensure_ascii=False)


def _content_with_images(content: Any) -> Any:
    """A user/tool message's content: its text, or (when it holds images) its parts as
    ``[{"type": "text", ...}, {"type": "image_url", "image_url": {"url"}}, ...]``."""
    if not image_urls(content):
        return _text(content)
    parts: list[dict[str, Any]] = []
    for part in content:
        if isinstance(part, dict) and part.get("type") == "image_url":
            url = image_urls([part])
            if url:
                parts.append({"type": "image_url", "image_url": {"url": url[0]}})
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            parts.append({"type": "text", "text": part["text"]})
    return parts


def _arguments_text(arguments: Any) -> Any:
    if arguments is None:
        return "{}"
    if isinstance(arguments, (dict, list)):
        return json.dumps(arguments, ensure_ascii=False)
    return arguments  # a string (JSON or not: the linters decide) or something to refuse


def _tool_call(call: Any) -> Any:
    if not isinstance(call, dict):
        return call
    function = call.get("function") if isinstance(call.get("function"), dict) else {}
    return {
        "id": call.get("id"),
        "type": call.get("type", "function"),
        "function": {
            "name": function.get("name"),
            "arguments": _arguments_text(function.get("arguments")),
        },
    }


def normalize_messages(transcript: Any) -> list[dict[str, Any]]:
    """The stored transcript as plain OpenAI messages (see the module docstring)."""
    if not isinstance(transcript, list):
        return []
    messages: list[dict[str, Any]] = []
    for raw in transcript:
        if not isinstance(raw, dict):
            messages.append({"role": None, "content": _text(raw)})
            continue
        role = raw.get("role")
        if role == "assistant":
            calls = raw.get("tool_calls") or []
            message: dict[str, Any] = {"role": "assistant"}
            content = _text(raw.get("content"))
            message["content"] = content if (content or not calls) else None
            if calls:
                message["tool_calls"] = (
                    [_tool_call(call) for call in calls] if isinstance(calls, list) else calls
                )
            weight = raw.get("weight", 1)
            message["weight"] = weight if weight is not None else 1
            messages.append(message)
        elif role == "tool":
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": raw.get("tool_call_id"),
                    "content": _content_with_images(raw.get("content")),
                }
            )
        else:
            content = raw.get("content")
            message = {
                "role": role,
                "content": _content_with_images(content) if role == "user" else _text(content),
            }
            if "weight" in raw:
                message["weight"] = raw["weight"]  # the linters refuse it off assistants
            messages.append(message)
    return _trim_tail(messages)


def _trim_tail(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    while messages:
        last = messages[-1]
        if last.get("role") == "user":
            messages.pop()
        elif last.get("role") == "assistant" and last.get("tool_calls"):
            messages.pop()  # its calls have no results
        elif last.get("role") == "tool":
            start = len(messages) - 1
            while start >= 0 and messages[start].get("role") == "tool":
                start -= 1
            opener = messages[start] if start >= 0 else {}
            calls = opener.get("tool_calls") if opener.get("role") == "assistant" else None
            if not isinstance(calls, list):
                break  # malformed: left for the linters to report
            wanted = {c.get("id") for c in calls if isinstance(c, dict)}
            answered = {m.get("tool_call_id") for m in messages[start + 1 :]}
            if wanted <= answered:
                break
            del messages[start:]
        else:
            break
    return messages


def normalize_tools(tools: Any) -> list[dict[str, Any]]:
    """OpenAI function tools ``{"type": "function", "function": {name, description,
    parameters}}``; a bare ``{name, description, parameters}`` is wrapped."""
    if not isinstance(tools, list):
        return []
    out = []
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        function = tool.get("function") if tool.get("type") == "function" else tool
        if not isinstance(function, dict):
            continue
        entry: dict[str, Any] = {"name": function.get("name")}
        if function.get("description"):
            entry["description"] = function["description"]
        entry["parameters"] = function.get("parameters") or {"type": "object", "properties": {}}
        out.append({"type": "function", "function": entry})
    return out


def tool_names(tools: list[dict[str, Any]]) -> set[str]:
    return {
        t["function"]["name"]
        for t in tools
        if isinstance(t.get("function"), dict) and isinstance(t["function"].get("name"), str)
    }


def _canonical_arguments(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments


def transcript_sha256(messages: list[dict[str, Any]]) -> str:
    """What "exact duplicate" means: the same messages once tool-call ids are renumbered by
    position and arguments are compared as JSON values (``{"a": 1}`` equals ``{"a":1}``).
    Weights count: the same text with a turn excluded is a different training example."""
    renamed: dict[Any, str] = {}
    canonical = []
    for message in messages:
        item = dict(message)
        if isinstance(item.get("tool_calls"), list):
            calls = []
            for call in item["tool_calls"]:
                if isinstance(call, dict):
                    new_id = renamed.setdefault(call.get("id"), f"c{len(renamed) + 1}")
                    function = call.get("function") or {}
                    calls.append(
                        {
                            "id": new_id,
                            "name": function.get("name"),
                            "arguments": _canonical_arguments(function.get("arguments")),
                        }
                    )
                else:
                    calls.append(call)
            item["tool_calls"] = calls
        if item.get("role") == "tool":
            item["tool_call_id"] = renamed.get(item.get("tool_call_id"), item.get("tool_call_id"))
        canonical.append(item)
    return hashlib.sha256(canonical_json(canonical).encode()).hexdigest()


def content_sha256(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
    """The hash of one dataset row's content (messages and tools exactly as exported from);
    the version checksum is taken over these."""
    return hashlib.sha256(
        canonical_json({"messages": messages, "tools": tools}).encode()
    ).hexdigest()


def fingerprint(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> tuple[str, int]:
    """``(content_sha256, approx_tokens)`` from one serialisation of the row."""
    text = canonical_json({"messages": messages, "tools": tools})
    return hashlib.sha256(text.encode()).hexdigest(), math.ceil(len(text) / 4)


def approx_tokens(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
    """A deterministic, tokenizer-free estimate: one token per four characters of the row's
    canonical JSON (messages and tools), rounded up. Good for sizing and comparing versions;
    a real tokenizer gives other (usually somewhat lower) counts."""
    return math.ceil(len(canonical_json({"messages": messages, "tools": tools})) / 4)
