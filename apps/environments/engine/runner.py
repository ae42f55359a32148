"""Drive a policy through every turn of a task and grade the episode."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from .checks import Judge
from .policies import Policy, PolicyAction, PolicyView, ToolCall
from .scoring import Grading, ScoringConfig, grade_episode
from .simulator import Episode, Limits, ToolResult, UserTurn
from .spec import EnvironmentSpec, TaskSpec, load_spec


@dataclass(frozen=True)
class UserTurnView:
    """What a user simulator sees before it speaks for turn ``turn`` (never the first)."""

    turn: int
    scripted: str  # the task's own message for this turn: what the user means to say
    notices: tuple[str, ...]  # loud-update notices, shown to the agent before the message
    messages: list[dict[str, Any]]  # the OpenAI-format conversation so far
    task: TaskSpec

    @property
    def last_assistant_message(self) -> str:
        for m in reversed(self.messages):
            if m.get("role") == "assistant" and m.get("content"):
                return m["content"]
        return ""


# A user simulator: returns the user's message for a turn after the first, in place of the
# scripted one (the exogenous updates and their notices are the engine's, unchanged).
UserSimulator = Callable[[UserTurnView], str]


@dataclass
class EpisodeResult:
    task_key: str
    policy: str
    seed: int
    faults: bool
    transcript: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    audit_log: list[dict[str, Any]]
    exogenous_log: list[dict[str, Any]]
    final_state: dict[str, Any]
    state_hash: str
    grading: Grading
    stop_reason: str  # "completed" | "round_limit" | "call_limit"
    turn_snapshots: dict[int, dict[str, Any]] = field(default_factory=dict, repr=False)

    @property
    def tool_errors(self) -> list[dict[str, Any]]:
        return [e for e in self.audit_log if not e["ok"]]

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_key": self.task_key,
            "policy": self.policy,
            "seed": self.seed,
            "faults": self.faults,
            "stop_reason": self.stop_reason,
            "transcript": self.transcript,
            "tools": self.tools,
            "audit_log": self.audit_log,
            "exogenous_log": json.loads(json.dumps(self.exogenous_log, default=str)),
            "final_state": self.final_state,
            "state_hash": self.state_hash,
            "grading": self.grading.to_dict(),
        }


def _arguments_text(arguments: dict[str, Any] | str) -> str:
    if isinstance(arguments, str):
        return arguments
    try:
        return json.dumps(arguments, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        return json.dumps(str(arguments))


def _simulated(
    turn: UserTurn,
    simulator: UserSimulator | None,
    transcript: list[dict[str, Any]],
    task: TaskSpec,
) -> UserTurn:
    if simulator is None or turn.index == 0:
        return turn
    view = UserTurnView(turn.index, turn.message, turn.notices, list(transcript), task)
    message = simulator(view)
    if not isinstance(message, str):
        raise TypeError(f"user simulator returned {type(message).__name__}, not str")
    return replace(turn, message=message)


def run_task(
    spec: EnvironmentSpec | dict[str, Any],
    task_key: str,
    policy: Policy,
    *,
    seed: int = 0,
    faults: bool = True,
    judge: Judge | None = None,
    limits: Limits | None = None,
    scoring: ScoringConfig | None = None,
    user_turn: UserSimulator | None = None,
) -> EpisodeResult:
    """Run ``policy`` through every turn of ``task_key`` and grade the episode.

    ``user_turn``, when given, writes the user's message of every turn after the first
    (a simulated user answering the agent's questions); the first turn is always scripted.
    """
    spec = spec if isinstance(spec, EnvironmentSpec) else load_spec(spec)
    limits = limits or Limits()
    episode = Episode(spec, task_key, seed, faults=faults, limits=limits)
    task = episode.task
    tools = spec.openai_tools()
    transcript: list[dict[str, Any]] = [{"role": "system", "content": task.system_prompt()}]
    turn_states: dict[int, dict[str, Any]] = {}
    stop_reason = "completed"
    n_calls = 0

    while stop_reason == "completed" and (turn := episode.advance_turn()) is not None:
        current = _simulated(turn, user_turn, transcript, task)
        transcript.append({"role": "user", "content": current.text})
        results: list[tuple[ToolCall, ToolResult]] = []
        for round_no in range(limits.max_rounds_per_turn):
            view = PolicyView(
                list(transcript), tools, current.index, round_no, task, spec, tuple(results)
            )
            action = policy.act(view)
            if not isinstance(action, PolicyAction):
                raise TypeError(f"policy {policy.name!r} returned {type(action).__name__}")
            if not action.tool_calls:
                transcript.append({"role": "assistant", "content": action.reply or ""})
                break
            message: dict[str, Any] = {
                "role": "assistant",
                "content": action.reply or None,
                "tool_calls": [],
            }
            pending = []
            for call in action.tool_calls:
                n_calls += 1
                call_id = call.id or f"call_{n_calls}"
                message["tool_calls"].append(
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {
                            "name": call.name,
                            "arguments": _arguments_text(call.arguments),
                        },
                    }
                )
                pending.append((call_id, call))
            transcript.append(message)
            for call_id, call in pending:
                result = episode.call(call.name, call.arguments)
                transcript.append(
                    {
                        "role": "tool",
                        "tool_call_id": call_id,
                        "content": result.to_message_content(),
                    }
                )
                results.append((call, result))
                if result.error_code == "call_limit":
                    stop_reason = "call_limit"
            if stop_reason != "completed":
                break
        else:
            stop_reason = "round_limit"
        turn_states[current.index] = episode.state

    grading = grade_episode(
        task,
        final_state=episode.state,
        turn_states=turn_states,
        audit_log=episode.audit_log,
        transcript=transcript,
        judge=judge,
        config=scoring,
    )
    return EpisodeResult(
        task_key=task.key,
        policy=getattr(policy, "name", type(policy).__name__),
        seed=seed,
        faults=faults,
        transcript=transcript,
        tools=tools,
        audit_log=[e.to_dict() for e in episode.audit_log],
        exogenous_log=list(episode.exogenous_log),
        final_state=episode.state_snapshot(),
        state_hash=episode.state_hash(),
        grading=grading,
        stop_reason=stop_reason,
        turn_snapshots=turn_states,
    )
