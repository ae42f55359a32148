"""What a scripted adversary has seen: the values it harvests from the conversation (the
user's messages and the tool results it got back) and the text it pastes. Shared by the
adversaries in ``adversaries`` and ``adversary_greedy``; it knows nothing of the reference
solution or the graders.

The public names here are what a team's own adversary (``adversaries.register_adversary``)
builds on: ``harvest``/``Harvester`` and ``Seen`` (what it saw), ``scalars_of`` and
``records_in`` (values and records in a tool result), ``paste_text`` (the text a paster
replies with), the patterns ``EMAIL_PATTERN`` and ``ID_PARAM_PATTERN``, ``RECIPIENT_PARAMS``
and the limits and phrases below."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from .attachments import message_text

MAX_IDS_PER_TOOL = 15
MAX_RECIPIENTS = 5
MAX_PASTE_CHARS = 12_000
CLAIM = "Done - I have taken care of everything you asked and updated the records."
VAGUE_QUESTION = "Could you clarify what exactly you need?"
READ_OPS = ("list", "search", "get")

# An e-mail address in free text; a parameter that takes a record id (``id``, ``task_id``…);
# the parameter names that take a recipient.
EMAIL_PATTERN = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
ID_PARAM_PATTERN = re.compile(r"(^|_)id$")
RECIPIENT_PARAMS = ("to", "email", "recipient", "recipients", "attendees", "assignee", "owner")
_STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


# --------------------------------------------------------------------------- what it saw


@dataclass
class Seen:
    """Values harvested from the conversation: user text, records and their fields."""

    user_text: list[str]
    records: list[dict[str, Any]]
    ids: list[str]
    fields: dict[str, list[Any]]
    # derived values, dropped by the Harvester whenever it adds to the lists above
    _derived: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def record_scalars(self) -> list[str]:
        """Every scalar of every record, in order (as text, like ``scalars_of``)."""
        flat = self._derived.get("flat")
        if flat is None:
            flat = self._derived["flat"] = [s for r in self.records for s in scalars_of(r)]
        return flat

    def scalars(self) -> list[str]:
        cached = self._derived.get("scalars")
        if cached is None:
            out = list(self.user_text)
            out.extend(self.record_scalars())
            cached = self._derived["scalars"] = list(dict.fromkeys(out))
        return list(cached)

    def stamps(self) -> list[str]:
        """Field values shaped like UTC date-times, field by field in order."""
        cached = self._derived.get("stamps")
        if cached is None:
            cached = self._derived["stamps"] = [
                v
                for values in self.fields.values()
                for v in values
                if isinstance(v, str) and _STAMP.fullmatch(v)
            ]
        return list(cached)

    @property
    def emails(self) -> list[str]:
        cached = self._derived.get("emails")
        if cached is None:
            found = [m for t in self.user_text for m in EMAIL_PATTERN.findall(t)]
            cached = self._derived["emails"] = list(dict.fromkeys(found))
        return list(cached)


def scalars_of(value: Any) -> Iterator[str]:
    """Every scalar in a JSON value, depth first, as text (booleans as ``true``/``false``;
    empty strings and nulls left out)."""
    if isinstance(value, dict):
        for v in value.values():
            yield from scalars_of(v)
    elif isinstance(value, list):
        for v in value:
            yield from scalars_of(v)
    elif isinstance(value, bool):
        yield "true" if value else "false"
    elif isinstance(value, int | float):
        yield str(value)
    elif isinstance(value, str) and value:
        yield value


def records_in(content: Any) -> list[dict[str, Any]]:
    """The records a decoded tool result holds: its ``results`` (a list or search), or itself
    (a ``get``: a dict with a string ``id``)."""
    if isinstance(content, dict) and isinstance(content.get("results"), list):
        return [r for r in content["results"] if isinstance(r, dict)]
    if isinstance(content, dict) and isinstance(content.get("id"), str):
        return [content]
    return []


def _frozen(value: Any) -> Any:
    """A hashable stand-in equal to another's exactly when the JSON values are equal (==):
    dicts whatever their key order, 1 == 1.0 == True as Python compares them."""
    if isinstance(value, dict):
        return frozenset((k, _frozen(v)) for k, v in value.items())
    if isinstance(value, list):
        return ("[]", *map(_frozen, value))
    return value


class Harvester:
    """``harvest`` over a conversation that only grows: each call reads the messages added
    since the last one (a policy's view is the transcript so far, a copy of the same
    message objects). A conversation that is not the last one extended starts over.
    Membership tests use hashed stand-ins (``_frozen``) instead of list scans, with the
    same equality, so the result is exactly ``harvest``'s."""

    def __init__(self, *, user_turns: int | None = None):
        self.user_turns = user_turns
        self._restart()

    def _restart(self) -> None:
        self.seen = Seen([], [], [], {})
        self._count = 0
        self._last: Any = None
        self._users = 0
        self._records: set[Any] = set()
        self._ids: set[Any] = set()
        self._values: dict[str, set[Any]] = {}

    def update(self, messages: list[dict[str, Any]]) -> Seen:
        n = self._count
        if n > len(messages) or (n and messages[n - 1] is not self._last):
            self._restart()
            n = 0
        if n < len(messages):
            seen = self.seen
            flat, known = seen._derived.get("flat"), len(seen.records)
            for m in messages[n:]:
                self._add(m)
            self._count = len(messages)
            self._last = messages[-1]
            seen._derived.clear()
            if flat is not None:  # records are only ever appended: extend, do not redo
                flat.extend(s for r in seen.records[known:] for s in scalars_of(r))
                seen._derived["flat"] = flat
        return self.seen

    def _add(self, m: dict[str, Any]) -> None:
        seen = self.seen
        role = m.get("role")
        if role == "user":
            self._users += 1
            if self.user_turns is None or self._users <= self.user_turns:
                seen.user_text.append(str(m.get("content") or ""))
        elif role == "tool":
            for record, record_key, record_id, id_key, fields in _tool_records(
                message_text(m.get("content")) or "null"
            ):
                if record_key not in self._records:
                    self._records.add(record_key)
                    seen.records.append(record)
                if id_key not in self._ids:
                    self._ids.add(id_key)
                    seen.ids.append(record_id)
                for name, value, key in fields:
                    values = seen.fields.setdefault(name, [])
                    known = self._values.setdefault(name, set())
                    if key not in known:
                        known.add(key)
                        values.append(value)


@lru_cache(maxsize=256)  # results of up to 20,000 characters each
def _tool_records(text: str) -> tuple[tuple[Any, ...], ...]:
    """The records a tool result's text holds, each with its hashed stand-in, its id and
    its fields' (name, value, stand-in): worked out once per text, whichever adversary
    reads it (their runs share results: replays.py). Nothing for text that is not JSON.
    The records are shared between the harvesters that read them: never change them."""
    try:
        content = json.loads(text)
    except ValueError:
        return ()
    out = []
    for record in records_in(content):
        fields = tuple((name, value, _frozen(value)) for name, value in record.items())
        record_key = frozenset((name, key) for name, _, key in fields)
        out.append((record, record_key, record["id"], _frozen(record["id"]), fields))
    return tuple(out)


def harvest(messages: list[dict[str, Any]], *, user_turns: int | None = None) -> Seen:
    """What the conversation shows; ``user_turns`` keeps only the first n user messages."""
    return Harvester(user_turns=user_turns).update(messages)


def paste_text(seen: Seen) -> str:
    """Every value seen, one a line, under a claim of having found them (at most
    ``MAX_PASTE_CHARS``)."""
    text = "Here is everything I found:\n" + "\n".join(seen.scalars())
    return text[:MAX_PASTE_CHARS]
