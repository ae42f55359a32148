"""Policies: whatever decides the agent's next move, behind one small protocol.

A policy sees what an LLM agent would see — the OpenAI-format messages so far and the
OpenAI function-tool list — plus the task and this turn's tool results as Python objects
(the built-in policies use those; an LLM-backed policy can ignore them). Each ``act``
returns either tool calls (the runner executes them and asks again) or a reply (which
ends the turn).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from .simulator import ToolResult
from .spec import EnvironmentSpec, ReferenceCall, TaskSpec

MAX_ORACLE_ATTEMPTS = 10  # per reference call, when transient faults hit


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None  # the runner assigns call_<n> when None


@dataclass(frozen=True)
class PolicyAction:
    reply: str | None = None
    tool_calls: tuple[ToolCall, ...] | list[ToolCall] = ()


@dataclass(frozen=True)
class PolicyView:
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    turn: int
    round: int
    task: TaskSpec
    spec: EnvironmentSpec
    turn_results: tuple[tuple[ToolCall, ToolResult], ...] = ()

    @property
    def last_user_message(self) -> str:
        for m in reversed(self.messages):
            if m.get("role") == "user":
                return m.get("content") or ""
        return ""


@runtime_checkable
class Policy(Protocol):
    name: str

    def act(self, view: PolicyView) -> PolicyAction: ...


class NullPolicy:
    """Does nothing: replies "Done." and calls no tool."""

    name = "null"

    def act(self, view: PolicyView) -> PolicyAction:
        return PolicyAction(reply="Done.")


class EchoPolicy:
    """Repeats the user's request back and calls no tool."""

    name = "echo"

    def act(self, view: PolicyView) -> PolicyAction:
        return PolicyAction(reply=view.last_user_message)


class OraclePolicy:
    """Replays the reference solution, one call per round, retrying transient faults."""

    name = "oracle"

    def calls_for_turn(self, view: PolicyView) -> tuple[ReferenceCall, ...]:
        step = view.task.step_for_turn(view.turn)
        return step.calls if step else ()

    def act(self, view: PolicyView) -> PolicyAction:
        calls = self.calls_for_turn(view)
        index = attempts = 0
        for _call, result in view.turn_results:
            attempts += 1
            if result.ok or not result.retryable or attempts >= MAX_ORACLE_ATTEMPTS:
                index += 1
                attempts = 0
        if index < len(calls):
            call = calls[index]
            return PolicyAction(tool_calls=(ToolCall(call.tool, call.arguments),))
        step = view.task.step_for_turn(view.turn)
        return PolicyAction(reply=(step.reply if step and step.reply else "Done."))


def state_changing_calls(
    spec: EnvironmentSpec, task: TaskSpec
) -> list[tuple[int, int, ReferenceCall]]:
    """(step index, call index, call) of every reference call whose tool changes state."""
    out = []
    for s, step in enumerate(task.reference_solution):
        for c, call in enumerate(step.calls):
            tool = spec.tool(call.tool)
            if tool is not None and tool.binding.changes_state:
                out.append((s, c, call))
    return out


class MutantPolicy(OraclePolicy):
    """The reference solution with its i-th state-changing call dropped."""

    def __init__(self, index: int):
        self.index = index
        self.name = f"mutant:{index}"
        # (spec, task, its targets, step object id -> the step's index in the solution),
        # worked out once per task instead of once per round
        self._known: tuple[Any, ...] | None = None

    def calls_for_turn(self, view: PolicyView) -> tuple[ReferenceCall, ...]:
        known = self._known
        if known is None or known[0] is not view.spec or known[1] is not view.task:
            targets = state_changing_calls(view.spec, view.task)
            known = self._known = (view.spec, view.task, targets, {})
        targets, positions = known[2], known[3]
        if not 0 <= self.index < len(targets):
            raise IndexError(f"mutant {self.index} of {len(targets)}")
        step_i, call_i, _ = targets[self.index]
        step = view.task.step_for_turn(view.turn)
        if step is None:
            return ()
        at = positions.get(id(step))
        if at is None or at[0] is not step:
            at = positions[id(step)] = (step, view.task.reference_solution.index(step))
        if at[1] != step_i:
            return step.calls
        return step.calls[:call_i] + step.calls[call_i + 1 :]
