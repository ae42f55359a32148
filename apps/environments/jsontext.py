"""JSON typed by a person: syntax errors with line and column, and where each value starts.

``parse_json_text`` raises ``JSONTextError`` (line, column, the offending line) instead of
``json.JSONDecodeError``; ``value_lines`` maps every JSON pointer of a document to the line
its value starts on, so problems can be shown beside their location. Pure functions.
"""

import bisect
import json
from dataclasses import dataclass

from apps.core.safeinput import UnsafeInput, json_loads
from coworkenv_engine.problems import pointer as make_pointer

_DECODER = json.JSONDecoder()
_WHITESPACE = " \t\n\r"
_CLOSERS = {"{": "}", "[": "]"}


@dataclass
class JSONTextError(ValueError):
    message: str
    line: int
    column: int
    line_text: str

    def __str__(self) -> str:
        return f"Line {self.line}, column {self.column}: {self.message}"


def parse_json_text(text: str):
    """Parse ``text`` as one JSON value; raise JSONTextError pointing at the problem — a
    syntax error, or text the database cannot store (NUL, a lone surrogate), or nesting
    deeper than ``apps.core.safeinput.MAX_JSON_DEPTH``."""
    if not text.strip():
        raise JSONTextError("Empty input: expected a JSON value.", 1, 1, "")
    try:
        return json_loads(text)
    except UnsafeInput as exc:
        line = nearest_line(value_lines(text), exc.pointer) or 1
        lines = text.splitlines() or [""]
        raise JSONTextError(exc.message, line, 1, lines[min(line, len(lines)) - 1]) from None
    except json.JSONDecodeError as exc:
        lines = text.splitlines() or [""]
        line_text = lines[exc.lineno - 1] if exc.lineno - 1 < len(lines) else ""
        raise JSONTextError(exc.msg + ".", exc.lineno, exc.colno, line_text) from None
    except ValueError as exc:  # NaN / Infinity, which JSON does not have
        raise JSONTextError(f"{exc}.", 1, 1, "") from None


def value_lines(text: str) -> dict[str, int]:
    """Pointer -> 1-based line where that value starts, for a text that parses as JSON."""
    walk = _ValueWalk(text)
    try:
        walk.value(0, ())
    except (IndexError, ValueError, RecursionError):
        return walk.positions
    return walk.positions


class _ValueWalk:
    """One pass over a JSON text that records where each value starts. ``value`` is the
    only recursive step, so the walk goes as deep as the text's nesting and no deeper."""

    def __init__(self, text: str):
        self.text = text
        self.positions: dict[str, int] = {}
        self.line_starts = [0, *(i + 1 for i, ch in enumerate(text) if ch == "\n")]

    def line_of(self, index: int) -> int:
        return bisect.bisect_right(self.line_starts, index)

    def skip(self, index: int) -> int:
        text = self.text
        while index < len(text) and text[index] in _WHITESPACE:
            index += 1
        return index

    def value(self, index: int, parts: tuple) -> int:
        """Record the value at ``index`` (and everything inside it); return where it ends."""
        text = self.text
        index = self.skip(index)
        self.positions[make_pointer(*parts)] = self.line_of(index)
        closer = _CLOSERS.get(text[index])
        if closer is None:
            _, end = _DECODER.raw_decode(text, index)
            return end
        index = self.skip(index + 1)
        if text[index] == closer:
            return index + 1
        position = 0
        while True:
            if closer == "}":
                key, index = self.member_key(index)
            else:
                key, position = position, position + 1
            index = self.skip(self.value(index, (*parts, key)))
            if text[index] == closer:
                return index + 1
            index += 1  # the comma

    def member_key(self, index: int) -> tuple[str, int]:
        """The key of the object member at ``index`` and where its value begins."""
        key, index = json.decoder.scanstring(self.text, self.skip(index) + 1)
        return key, self.skip(index) + 1  # past the colon


def nearest_line(lines: dict[str, int], pointer: str) -> int | None:
    """The line of ``pointer``, or of its closest ancestor present in ``lines``."""
    while True:
        if pointer in lines:
            return lines[pointer]
        if not pointer:
            return None
        pointer = pointer.rsplit("/", 1)[0]


def locate_in_fields(problems: list[dict], fields: dict[str, tuple[str, str]]) -> dict:
    """Place whole-spec problems in the JSON textareas of a part editor.

    ``fields`` maps a form field to the pointer its JSON sits at in the whole spec and its
    text (``{"check_spec": ("/tasks/0/graders/1/check", text)}``). Returns field -> the
    problems under that pointer, each with the ``line`` of the field's text it names (the
    closest ancestor's line when the exact value is missing). The deepest prefix wins, so a
    field nested in another's pointer gets its own problems.
    """
    placed: dict[str, list[dict]] = {name: [] for name in fields}
    lines = {name: value_lines(text) for name, (_, text) in fields.items()}
    for problem in problems:
        pointer = problem.get("pointer", "")
        owner, rest = None, ""
        for name, (prefix, _) in fields.items():
            if (pointer == prefix or pointer.startswith(prefix + "/")) and (
                owner is None or len(prefix) > len(fields[owner][0])
            ):
                owner, rest = name, pointer[len(prefix) :]
        if owner is None:
            continue
        line = nearest_line(lines[owner], rest) or 1
        placed[owner].append({**problem, "line": line})
    return placed
