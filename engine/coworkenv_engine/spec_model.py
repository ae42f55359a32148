"""Typed, immutable view of a ``coworkenv.environment/v1`` document (built by ``spec``)."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

from .attachments import Attachment

DEFAULT_CLOCK_START = "2026-03-02T09:00:00Z"
DEFAULT_STEP_SECONDS = 60
ALL_FAULT_KINDS = ("rate_limit", "server_error", "timeout")


@dataclass(frozen=True)
class Clock:
    start: str = DEFAULT_CLOCK_START
    step_seconds: int = DEFAULT_STEP_SECONDS


@dataclass(frozen=True)
class Faults:
    rate: float = 0.0
    kinds: tuple[str, ...] = ALL_FAULT_KINDS


@dataclass(frozen=True)
class Binding:
    op: str
    service: str
    collection: str
    fields: tuple[str, ...] | None = None
    query: str | None = None
    id: str | None = None
    values: dict[str, Any] | None = None
    merge: str | None = None
    where: dict[str, Any] | None = None
    limit: int | str | None = None
    attachment: str | None = None  # get only: the field whose attachment is viewed

    @property
    def changes_state(self) -> bool:
        return self.op in ("create", "update", "delete")


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]
    binding: Binding
    faults: Faults = Faults()

    def openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": copy.deepcopy(self.parameters),
            },
        }


@dataclass(frozen=True)
class Update:
    op: str
    service: str
    collection: str
    id: str | None = None
    values: dict[str, Any] | None = None
    silent: bool = False
    notice: str | None = None


@dataclass(frozen=True)
class Turn:
    message: str
    updates: tuple[Update, ...] = ()
    time: str | None = None


@dataclass(frozen=True)
class ReferenceCall:
    tool: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ReferenceStep:
    turn: int
    calls: tuple[ReferenceCall, ...]
    reply: str | None = None


@dataclass(frozen=True)
class Grader:
    id: str
    category: str
    check: dict[str, Any]
    description: str = ""
    weight: float = 1.0
    at_turn: int | None = None
    capability: str | None = None  # the task capability this grader defines


@dataclass(frozen=True)
class UserSpec:
    persona: str = ""
    reveals_when_asked: tuple[str, ...] = ()


@dataclass(frozen=True)
class TaskScoring:
    completion_weight: float | None = None
    robustness_weight: float | None = None
    pass_threshold: float | None = None


@dataclass(frozen=True)
class TaskSpec:
    key: str
    title: str
    capabilities: tuple[str, ...]
    split: str
    system: str
    constraints: tuple[str, ...]
    records: dict[str, dict[str, list[dict[str, Any]]]]
    user: UserSpec
    turns: tuple[Turn, ...]
    reference_solution: tuple[ReferenceStep, ...]
    graders: tuple[Grader, ...]
    scoring: TaskScoring | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def step_for_turn(self, turn: int) -> ReferenceStep | None:
        for step in self.reference_solution:
            if step.turn == turn:
                return step
        return None

    def system_prompt(self) -> str:
        text = self.system
        if self.constraints:
            rules = "\n".join(f"- {c}" for c in self.constraints)
            text = f"{text}\n\nConstraints:\n{rules}" if text else f"Constraints:\n{rules}"
        return text


@dataclass(frozen=True)
class EnvironmentSpec:
    name: str
    domain: str
    description: str
    clock: Clock
    services: dict[str, dict[str, list[dict[str, Any]]]]
    tools: tuple[ToolSpec, ...]
    tasks: tuple[TaskSpec, ...]
    metadata: dict[str, Any] = field(default_factory=dict)
    attachments: tuple[Attachment, ...] = ()
    _cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def attachment(self, sha256: str) -> Attachment | None:
        index = self._cache.get("attachments")
        if index is None:
            index = self._cache["attachments"] = {a.sha256: a for a in self.attachments}
        return index.get(sha256)

    def tool(self, name: str) -> ToolSpec | None:
        index = self._cache.get("tools")
        if index is None:
            index = self._cache["tools"] = {t.name: t for t in self.tools}
        return index.get(name)

    def task(self, key: str) -> TaskSpec:
        for task in self.tasks:
            if task.key == key:
                return task
        raise KeyError(f"no task {key!r}; tasks: {', '.join(t.key for t in self.tasks)}")

    def task_index(self, key: str) -> int:
        return [t.key for t in self.tasks].index(key)

    def openai_tools(self) -> list[dict[str, Any]]:
        """The tool list in OpenAI function-tool format (``tools=`` of chat completions)."""
        text = self._cache.get("openai_tools")
        if text is None:  # built once per spec; each caller gets its own copy
            text = self._cache["openai_tools"] = json.dumps([t.openai() for t in self.tools])
        return json.loads(text)
