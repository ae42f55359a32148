"""What a scripted adversary has seen: the values it harvests from the conversation (the
user's messages and the tool results it got back) and the text it pastes. Shared by the
adversaries in ``adversaries`` and ``adversary_greedy``; it knows nothing of the reference
solution or the graders."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .attachments import message_text

MAX_IDS_PER_TOOL = 15
MAX_RECIPIENTS = 5
MAX_PASTE_CHARS = 12_000
CLAIM = "Done - I have taken care of everything you asked and updated the records."
VAGUE_QUESTION = "Could you clarify what exactly you need?"
READ_OPS = ("list", "search", "get")

_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_ID_PARAM = re.compile(r"(^|_)id$")
_RECIPIENT = ("to", "email", "recipient", "recipients", "attendees", "assignee", "owner")


# --------------------------------------------------------------------------- what it saw


@dataclass
class Seen:
    """Values harvested from the conversation: user text, records and their fields."""

    user_text: list[str]
    records: list[dict[str, Any]]
    ids: list[str]
    fields: dict[str, list[Any]]

    def scalars(self) -> list[str]:
        out: list[str] = []
        for text in self.user_text:
            out.append(text)
        for record in self.records:
            out.extend(_scalars(record))
        return list(dict.fromkeys(out))

    @property
    def emails(self) -> list[str]:
        found = [m for t in self.user_text for m in _EMAIL.findall(t)]
        return list(dict.fromkeys(found))


def _scalars(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for v in value.values():
            yield from _scalars(v)
    elif isinstance(value, list):
        for v in value:
            yield from _scalars(v)
    elif isinstance(value, bool):
        yield "true" if value else "false"
    elif isinstance(value, int | float):
        yield str(value)
    elif isinstance(value, str) and value:
        yield value


def _records_in(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, dict) and isinstance(content.get("results"), list):
        return [r for r in content["results"] if isinstance(r, dict)]
    if isinstance(content, dict) and isinstance(content.get("id"), str):
        return [content]
    return []


def harvest(messages: list[dict[str, Any]], *, user_turns: int | None = None) -> Seen:
    """What the conversation shows; ``user_turns`` keeps only the first n user messages."""
    seen = Seen([], [], [], {})
    users = 0
    for m in messages:
        role = m.get("role")
        if role == "user":
            users += 1
            if user_turns is None or users <= user_turns:
                seen.user_text.append(str(m.get("content") or ""))
        elif role == "tool":
            try:
                content = json.loads(message_text(m.get("content")) or "null")
            except ValueError:
                continue
            for record in _records_in(content):
                if record not in seen.records:
                    seen.records.append(record)
                if record["id"] not in seen.ids:
                    seen.ids.append(record["id"])
                for key, value in record.items():
                    values = seen.fields.setdefault(key, [])
                    if value not in values:
                        values.append(value)
    return seen


def _paste(seen: Seen) -> str:
    text = "Here is everything I found:\n" + "\n".join(seen.scalars())
    return text[:MAX_PASTE_CHARS]
