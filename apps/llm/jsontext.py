"""Tolerant extraction of one JSON object from a model's text answer.

Models wrap JSON in code fences, put prose before or after it, or stop in the middle of it.
``extract_json_object`` finds the outermost balanced ``{...}`` (ignoring braces inside JSON
strings) and parses it; anything else raises ``JSONExtractionError`` with a short excerpt.
Pure Python: no Django, no I/O.
"""

import json
import re

EXCERPT_CHARS = 160

_FENCE = re.compile(r"```[ \t]*(?:json|JSON|jsonc)?[ \t]*\n?(.*?)```", re.DOTALL)


class JSONExtractionError(ValueError):
    def __init__(self, message: str, *, excerpt: str, truncated: bool = False):
        super().__init__(message)
        self.message = message
        self.excerpt = excerpt
        self.truncated = truncated


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _balanced_object(text: str, start: int) -> int | None:
    """Index just past the ``}`` closing the object that opens at ``start``, or None."""
    depth = 0
    in_string = False
    escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def _candidates(text: str):
    """Fenced blocks first (the model said where the JSON is), then the whole text."""
    for match in _FENCE.finditer(text):
        yield match.group(1)
    yield text


def extract_json_object(text: str | None) -> dict:
    """The first complete, parseable top-level JSON object in ``text``."""
    text = text or ""
    if not text.strip():
        raise JSONExtractionError("The answer is empty; expected a JSON object.", excerpt="")
    saw_open = False
    first_error = None
    for candidate in _candidates(text):
        position = candidate.find("{")
        while position != -1:
            saw_open = True
            end = _balanced_object(candidate, position)
            if end is None:
                # An object that never closes: the answer was cut off (or is not JSON).
                break
            try:
                value = json.loads(candidate[position:end])
            except json.JSONDecodeError as exc:
                first_error = first_error or exc
            else:
                if isinstance(value, dict):
                    return value
            # Skip past this object: an object nested in it is not the answer.
            position = candidate.find("{", end)
    if not saw_open:
        raise JSONExtractionError(
            "The answer contains no JSON object.", excerpt=excerpt(text), truncated=False
        )
    if first_error is not None:
        raise JSONExtractionError(
            f"The answer's JSON object does not parse: {first_error.msg} "
            f"(line {first_error.lineno}, column {first_error.colno}).",
            excerpt=excerpt(text),
        )
    raise JSONExtractionError(
        "The answer's JSON object is truncated (it never closes).",
        excerpt=excerpt(text[-EXCERPT_CHARS:]),
        truncated=True,
    )
