"""What every linter shares: a streaming interface and one report shape.

A linter is fed one exported line at a time (``check_line``) and keeps only counts and the
first ``MAX_PROBLEMS`` problems, so linting a file of any size takes constant memory.
``finish(split)`` applies the whole-file rules (minimum example counts) and returns the
report. Problems carry the 1-based line number and, when the caller gave one, a ``ref``
(the demonstration id) so a person can find the example to fix.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

MAX_PROBLEMS = 50


@dataclass
class LintReport:
    format: str
    split: str
    rows: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[dict[str, Any]] = field(default_factory=list)
    error_count: int = 0
    warning_count: int = 0

    @property
    def ok(self) -> bool:
        return self.error_count == 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "split": self.split,
            "ok": self.ok,
            "rows": self.rows,
            "error_count": self.error_count,
            "warning_count": self.warning_count,
            "errors": self.errors,
            "warnings": self.warnings,
        }


class Linter:
    """Base class: subclasses implement ``check_row(row, problem)``."""

    format = ""
    min_rows_train = 0  # below this, the train split is refused
    min_rows_warning = 0  # below this, any split gets a warning

    def __init__(self, split: str = "train"):
        self.report = LintReport(format=self.format, split=split)

    # --- feeding -------------------------------------------------------------------------

    def check_line(self, text: str, ref: Any = None) -> None:
        self.report.rows += 1
        line = self.report.rows
        try:
            row = json.loads(text)
        except ValueError as exc:
            self.error(line, f"Not valid JSON: {exc}.", ref)
            return
        if not isinstance(row, dict):
            self.error(line, "A line must be a JSON object.", ref)
            return
        self.check_row(
            row, lambda message, severity="error": self._add(severity, line, message, ref)
        )

    def check_row(self, row: dict[str, Any], problem) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def finish(self) -> LintReport:
        report = self.report
        if report.rows == 0:
            self.error(None, "The file has no examples.")
        elif report.split == "train" and report.rows < self.min_rows_train:
            self.error(
                None,
                f"The training file has {report.rows} examples; {self.format} needs at least "
                f"{self.min_rows_train}.",
            )
        elif report.rows < self.min_rows_warning:
            self.warning(
                None,
                f"Only {report.rows} examples; at least {self.min_rows_warning} are recommended.",
            )
        return report

    # --- recording -----------------------------------------------------------------------

    def error(self, line: int | None, message: str, ref: Any = None) -> None:
        self._add("error", line, message, ref)

    def warning(self, line: int | None, message: str, ref: Any = None) -> None:
        self._add("warning", line, message, ref)

    def _add(self, severity: str, line: int | None, message: str, ref: Any) -> None:
        report = self.report
        items = report.errors if severity == "error" else report.warnings
        if severity == "error":
            report.error_count += 1
        else:
            report.warning_count += 1
        if len(items) < MAX_PROBLEMS:
            item: dict[str, Any] = {"line": line, "message": message}
            if ref is not None:
                item["ref"] = ref
            items.append(item)


def lint_lines(linter: Linter, lines) -> LintReport:
    """Lint an iterable of lines (``str``, or ``(str, ref)`` pairs) and finish."""
    for item in lines:
        if isinstance(item, tuple):
            linter.check_line(*item)
        else:
            linter.check_line(item)
    return linter.finish()


PART_TYPES = ("text", "image", "image_url")


def _text_or_parts(content: Any) -> bool:
    """A string, or a list of content parts (text with a string, an ``image`` placeholder,
    an ``image_url`` with a URL): multimodal rows carry images as parts."""
    if isinstance(content, str):
        return True
    if not isinstance(content, list):
        return False
    for part in content:
        if not isinstance(part, dict) or part.get("type") not in PART_TYPES:
            return False
        if part["type"] == "text" and not isinstance(part.get("text"), str):
            return False
        if part["type"] == "image_url":
            image = part.get("image_url")
            if not isinstance(image, dict) or not isinstance(image.get("url"), str):
                return False
    return True


def check_conversation(
    messages: Any, problem, *, arguments_as: str, tools: set[str] | None, open_end: bool = False
):
    """The ordering rules the OpenAI and TRL linters share. ``arguments_as`` is ``"string"``
    (OpenAI: a JSON string that parses to an object) or ``"object"`` (TRL: a dict).

    - ``system`` only first; the first other message is ``user``;
    - after an assistant message with tool calls, its results come next (one tool message
      per call, ``tool_call_id`` pairing with a call id, no id used twice), before anything
      else; a tool message never answers a call that is not open;
    - the conversation ends with an assistant message (or the results of its last calls)
      and no call is left unanswered;
    - ``weight`` (0 or 1) only on assistant messages, and at least one assistant message
      with weight 1.
    ``open_end``: the messages are a prompt and its completion, whose calls a later row's
    prompt answers, so the last message's calls may stay open.
    Returns the number of assistant messages with more than one tool call.
    """
    if not isinstance(messages, list) or not messages:
        problem("`messages` must be a non-empty list.")
        return 0
    conversation = _Conversation(messages, problem, arguments_as, tools)
    for index, message in enumerate(messages):
        conversation.check_message(index, message)
    conversation.check_end(open_end)
    return conversation.parallel


ROLES = ("system", "user", "assistant", "tool")


class _Conversation:
    """One walk through a conversation: the calls still waiting for their results (id to
    function name), the call ids already used, and the counts ``check_conversation`` needs."""

    def __init__(self, messages: list, problem, arguments_as: str, tools: set[str] | None):
        self.messages = messages
        self.problem = problem
        self.arguments_as = arguments_as
        self.tools = tools
        self.open_calls: dict[str, str] = {}
        self.seen_ids: set[str] = set()
        self.trained = 0
        self.parallel = 0

    def check_message(self, index: int, message: Any) -> None:
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            self.problem(f"{where} is not an object.")
            return
        role = message.get("role")
        if role not in ROLES:
            self.problem(f"{where} has role {role!r}; allowed: system, user, assistant, tool.")
            return
        if "weight" in message and role != "assistant":
            self.problem(f"{where}: `weight` is allowed only on assistant messages, not on {role}.")
        if role != "tool" and self.open_calls:
            self._drop_unanswered_calls(where, role)
        check = {
            "system": self._check_system,
            "user": self._check_user,
            "assistant": self._check_assistant,
            "tool": self._check_tool,
        }[role]
        check(index, where, message)

    def check_end(self, open_end: bool) -> None:
        messages, open_calls = self.messages, self.open_calls
        if open_calls and not (open_end and messages[-1].get("role") == "assistant"):
            ids = ", ".join(sorted(open_calls))
            if len(open_calls) == 1:
                self.problem(f"Call {ids} has no tool result.")
            else:
                self.problem(f"Calls {ids} have no tool result.")
        last = messages[-1] if isinstance(messages[-1], dict) else {}
        if last.get("role") not in ("assistant", "tool"):
            self.problem("The conversation must end with an assistant message or a tool result.")
        if self.trained == 0:
            self.problem("No assistant message has weight 1: the example would train nothing.")

    # --- one check per role --------------------------------------------------------------

    def _drop_unanswered_calls(self, where: str, role: str) -> None:
        open_calls = self.open_calls
        self.problem(
            f"{where} ({role}) comes before the result of "
            f"{'call' if len(open_calls) == 1 else 'calls'} "
            f"{', '.join(sorted(open_calls))}: every tool call needs its tool message first."
        )
        open_calls.clear()

    def _check_system(self, index: int, where: str, message: dict) -> None:
        if index != 0:
            self.problem(f"{where}: a system message may only come first.")
        if not _text_or_parts(message.get("content")):
            self.problem(f"{where}: system content must be a string.")

    def _check_user(self, index: int, where: str, message: dict) -> None:
        if not _text_or_parts(message.get("content")) or not message["content"]:
            self.problem(f"{where}: user content must be a non-empty string (or content parts).")

    def _check_assistant(self, index: int, where: str, message: dict) -> None:
        if self._only_system_before(index):
            self.problem(f"{where}: the conversation must start with a user message.")
        self._count_weight(where, message)
        content = message.get("content")
        calls = message.get("tool_calls")
        if content is not None and not _text_or_parts(content):
            self.problem(f"{where}: assistant content must be a string.")
        if calls is None or calls == []:
            if not content:
                self.problem(f"{where}: an assistant message needs content or tool_calls.")
            return
        if not isinstance(calls, list):
            self.problem(f"{where}: tool_calls must be a list.")
            return
        if len(calls) > 1:
            self.parallel += 1
        for number, call in enumerate(calls):
            self._open_call(index, number, call, f"{where}.tool_calls[{number}]")

    def _check_tool(self, index: int, where: str, message: dict) -> None:
        open_calls = self.open_calls
        call_id = message.get("tool_call_id")
        if not _text_or_parts(message.get("content")):
            self.problem(f"{where}: tool content must be a string.")
        if not open_calls:
            self.problem(f"{where}: a tool message must answer a call of the assistant before it.")
            return
        if call_id is None and self.arguments_as == "object":
            # TRL rows may pair by position; the name must then match the next open call.
            call_id = next(iter(open_calls))
        if call_id not in open_calls:
            self.problem(
                f"{where}: tool_call_id {call_id!r} does not pair with an open call "
                f"({', '.join(sorted(open_calls))})."
            )
            return
        name = open_calls.pop(call_id)
        if self.arguments_as == "object" and message.get("name") != name:
            self.problem(f"{where}: a tool message must carry the called function's name {name!r}.")

    # --- assistant details ---------------------------------------------------------------

    def _only_system_before(self, index: int) -> bool:
        return index == 0 or all(
            m.get("role") == "system" for m in self.messages[:index] if isinstance(m, dict)
        )

    def _count_weight(self, where: str, message: dict) -> None:
        weight = message.get("weight", 1)
        if weight not in (0, 1) or isinstance(weight, bool):
            self.problem(f"{where}: weight must be 0 or 1, not {weight!r}.")
        elif weight == 1:
            self.trained += 1

    def _open_call(self, index: int, number: int, call: Any, where: str) -> None:
        _check_call(call, where, self.problem, self.arguments_as, self.tools)
        call_id = call.get("id") if isinstance(call, dict) else None
        if call_id is None and self.arguments_as == "object":
            # TRL rows may leave ids out: results then pair with calls by position.
            call_id = f"#{index}.{number}"
        if not isinstance(call_id, str) or not call_id:
            self.problem(f"{where} needs an `id`.")
            return
        if call_id in self.seen_ids:
            self.problem(f"{where}: the id {call_id!r} is used twice.")
        self.seen_ids.add(call_id)
        name = (call.get("function") or {}).get("name")
        self.open_calls[call_id] = name if isinstance(name, str) else ""


def _check_call(call, where: str, problem, arguments_as: str, tools: set[str] | None) -> None:
    if not isinstance(call, dict):
        problem(f"{where} is not an object.")
        return
    if call.get("type", "function") != "function":
        problem(f'{where}: type must be "function".')
    function = call.get("function")
    if not isinstance(function, dict):
        problem(f"{where}: needs a `function` object.")
        return
    name = function.get("name")
    if not isinstance(name, str) or not name:
        problem(f"{where}: the function needs a name.")
    elif tools is not None and name not in tools:
        problem(f"{where}: calls {name!r}, which is not among the row's tools.")
    arguments = function.get("arguments")
    if arguments_as == "string":
        if not isinstance(arguments, str):
            problem(f"{where}: arguments must be a JSON string, not {type(arguments).__name__}.")
            return
        try:
            parsed = json.loads(arguments)
        except ValueError:
            problem(f"{where}: arguments do not parse as JSON: {arguments[:80]!r}.")
            return
        if not isinstance(parsed, dict):
            problem(f"{where}: arguments must encode a JSON object.")
    elif not isinstance(arguments, dict):
        problem(f"{where}: arguments must be an object, not {type(arguments).__name__}.")


def check_tools(tools: Any, problem, where: str = "tools") -> set[str] | None:
    """OpenAI function tools: a list of ``{"type": "function", "function": {name,
    parameters}}`` with unique names. Returns the names (None when ``tools`` is unusable)."""
    if not isinstance(tools, list):
        problem(f"`{where}` must be a list of function tools.")
        return None
    names: set[str] = set()
    for index, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if (
            not isinstance(tool, dict)
            or tool.get("type") != "function"
            or not isinstance(function, dict)
        ):
            problem(f'{where}[{index}] must be {{"type": "function", "function": {{…}}}}.')
            continue
        name = function.get("name")
        if not isinstance(name, str) or not name:
            problem(f"{where}[{index}]: the function needs a name.")
            continue
        if name in names:
            problem(f"{where}[{index}]: the name {name!r} is used twice.")
        names.add(name)
        parameters = function.get("parameters")
        if parameters is not None and (
            not isinstance(parameters, dict) or parameters.get("type") != "object"
        ):
            problem(f"{where}[{index}] ({name}): parameters must be a JSON Schema object.")
    return names
