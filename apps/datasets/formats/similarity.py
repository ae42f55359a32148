"""Normalised forms of a transcript, for finding near-duplicates and leakage (no Django).

Two teacher runs of one task often differ only by what the simulated services did to them:
an injected fault (``rate_limit``, ``server_error``, ``timeout``) made the teacher call the
tool again, which shifts every later record id (``comments-2`` instead of ``comments-1``)
and every timestamp. Exact de-duplication sees two examples; a model learns one twice.

- ``collapse_retries`` drops every tool call whose result was such an injected fault, with
  its result, and an assistant step left with nothing in it: the transcript as if the
  service had answered the first time.
- ``mask_ids_dates`` replaces record ids (``t-101``, ``call_3``, ``FIN-22``, UUIDs, long hex)
  with ``<id>`` and ISO dates and date-times with ``<date>``.
- ``near_signature`` hashes the collapsed, masked form (tool-call ids renumbered, arguments
  compared as JSON values, weights kept): rows with the same near signature are
  near-duplicates. ``retry_signature`` and ``masked_signature`` apply one of the two
  normalisations only; they tell *why* two rows are the same (see ``near_duplicate_reason``).
- ``leak_keys`` are texts with names and numbers masked as well (the first user message,
  and every assistant reply of at least ``MIN_REPLY_WORDS`` words): two rows sharing a key
  came from one template, and the split keeps them on one side.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from typing import Any

from apps.datasets.formats.transcript import canonical_json

TRANSIENT_ERRORS = frozenset({"rate_limit", "server_error", "timeout"})
MIN_REPLY_WORDS = 6
MIN_PROMPT_WORDS = 4

_DATE = re.compile(
    r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?\b"
)
_UUID = re.compile(r"\b[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}\b")
_HEX = re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b")
_ID = re.compile(r"\b[A-Za-z][A-Za-z0-9]*(?:[-_][A-Za-z0-9]+)*[-_]\d+[A-Za-z0-9]*\b")
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")
_NAME = re.compile(r"\b[A-Z][\w'\u2019-]*")
_SPACE = re.compile(r"\s+")


def mask_ids_dates(text: str) -> str:
    text = _DATE.sub("<date>", text)
    text = _UUID.sub("<id>", text)
    text = _HEX.sub("<id>", text)
    return _ID.sub("<id>", text)


def mask_names_numbers(text: str) -> str:
    """Ids and dates, then e-mail addresses, numbers and capitalised words (names) masked;
    lower-cased, whitespace folded."""
    text = _EMAIL.sub("<email>", mask_ids_dates(text))
    text = _NUMBER.sub("<n>", text)
    text = _NAME.sub("<name>", text)
    return _SPACE.sub(" ", text).strip().lower()


def _fault_code(content: Any) -> str | None:
    if not isinstance(content, str) or '"error"' not in content:
        return None
    try:
        data = json.loads(content)
    except ValueError:
        return None
    error = data.get("error") if isinstance(data, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return code if code in TRANSIENT_ERRORS else None


def collapse_retries(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages without the tool calls an injected fault answered (see the module
    docstring). Other failures (a bad argument, a missing record) are the teacher's own
    doing and stay."""
    faulted = {
        m.get("tool_call_id")
        for m in messages
        if m.get("role") == "tool" and _fault_code(m.get("content")) is not None
    }
    if not faulted:
        return messages
    out = []
    for message in messages:
        if message.get("role") == "tool" and message.get("tool_call_id") in faulted:
            continue
        calls = message.get("tool_calls")
        if message.get("role") == "assistant" and isinstance(calls, list):
            kept = [c for c in calls if not (isinstance(c, dict) and c.get("id") in faulted)]
            if len(kept) != len(calls):
                if not kept and not message.get("content"):
                    continue
                message = {**message, "tool_calls": kept}
        out.append(message)
    return out


def _canonical(messages: list[dict[str, Any]], *, mask: bool) -> str:
    """Tool-call ids renumbered by position, arguments parsed, texts masked if ``mask``."""
    renamed: dict[Any, str] = {}

    def text(value: Any) -> Any:
        return mask_ids_dates(value) if mask and isinstance(value, str) else value

    def value_masked(value: Any) -> Any:
        if isinstance(value, str):
            return text(value)
        if isinstance(value, list):
            return [value_masked(v) for v in value]
        if isinstance(value, dict):
            return {k: value_masked(v) for k, v in value.items()}
        return value

    out = []
    for message in messages:
        item: dict[str, Any] = {
            "role": message.get("role"),
            "content": text(message.get("content")),
        }
        if message.get("role") == "assistant":
            item["weight"] = message.get("weight", 1)
        calls = message.get("tool_calls")
        if isinstance(calls, list):
            item["calls"] = []
            for call in calls:
                if not isinstance(call, dict):
                    item["calls"].append(call)
                    continue
                renamed.setdefault(call.get("id"), f"c{len(renamed) + 1}")
                function = call.get("function") or {}
                arguments = function.get("arguments")
                if isinstance(arguments, str):
                    with contextlib.suppress(ValueError):
                        arguments = json.loads(arguments)
                item["calls"].append(
                    {"name": function.get("name"), "arguments": value_masked(arguments)}
                )
        if message.get("role") == "tool":
            item["call"] = renamed.get(message.get("tool_call_id"), message.get("tool_call_id"))
        out.append(item)
    return canonical_json(out)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def near_signature(messages: list[dict[str, Any]]) -> str:
    return _sha(_canonical(collapse_retries(messages), mask=True))


def retry_signature(messages: list[dict[str, Any]]) -> str:
    return _sha(_canonical(collapse_retries(messages), mask=False))


def masked_signature(messages: list[dict[str, Any]]) -> str:
    return _sha(_canonical(messages, mask=True))


def near_duplicate_reason(kept: tuple[str, str], removed: tuple[str, str]) -> str:
    """Why two rows with the same near signature are one example, from their
    ``(retry_signature, masked_signature)`` pairs."""
    if kept[0] == removed[0]:
        return "the same once retries after injected faults are collapsed"
    if kept[1] == removed[1]:
        return "the same once ids and dates are masked"
    return "the same once retries after injected faults are collapsed and ids and dates masked"


def leak_keys(messages: list[dict[str, Any]]) -> set[str]:
    """The masked prompt (first user message) and masked assistant replies of a row."""
    keys: set[str] = set()
    prompt = next((m for m in messages if m.get("role") == "user"), None)
    if prompt is not None and isinstance(prompt.get("content"), str):
        masked = mask_names_numbers(prompt["content"])
        if len(masked.split()) >= MIN_PROMPT_WORDS:
            keys.add("prompt:" + masked)
    for message in messages:
        if message.get("role") == "assistant" and isinstance(message.get("content"), str):
            masked = mask_names_numbers(message["content"])
            if len(masked.split()) >= MIN_REPLY_WORDS:
                keys.add("reply:" + masked)
    return keys
