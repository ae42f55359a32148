"""Drive a policy through every turn of a task and grade the episode."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .checks import Judge
from .policies import Policy, PolicyAction, PolicyView, ToolCall
from .scoring import Grading, ScoringConfig, grade_episode
from .simulator import Episode, Limits, ToolResult
from .spec import EnvironmentSpec, load_spec


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
) -> EpisodeResult:
    spec = spec if isinstance(spec, EnvironmentSpec) else load_spec(spec)
    limits = limits or Limits()
    episode = Episode(spec, task_key, seed, faults=faults, limits=limits)
    task = episode.task
    tools = spec.openai_tools()
    transcript: list[dict[str, Any]] = [{"role": "system", "content": task.system_prompt()}]
    turn_states: dict[int, dict[str, Any]] = {}
    stop_reason = "completed"
    n_calls = 0

    while stop_reason == "completed" and (user_turn := episode.advance_turn()) is not None:
        transcript.append({"role": "user", "content": user_turn.text})
        results: list[tuple[ToolCall, ToolResult]] = []
        for round_no in range(limits.max_rounds_per_turn):
            view = PolicyView(
                list(transcript), tools, user_turn.index, round_no, task, spec, tuple(results)
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
        turn_states[user_turn.index] = episode.state

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
