"""Drive an engine ``Policy`` through observations (an ``EpisodeSession`` or a remote
environment server): the agent side of a trainer, used to compare with ``run_task``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from coworkenv_engine.policies import Policy, PolicyView, ToolCall
from coworkenv_engine.spec import EnvironmentSpec


@dataclass(frozen=True)
class SeenResult:
    """What an agent sees of a tool result (enough for the oracle's retries)."""

    ok: bool
    retryable: bool


def action_of(policy: Policy, obs_messages: list[dict[str, Any]], state: dict[str, Any]):
    """Ask ``policy`` for its next action given the conversation so far."""
    view = PolicyView(
        list(obs_messages),
        state["tools"],
        state["turn"],
        state["round"],
        state["task"],
        state["spec"],
        tuple(state["results"]),
    )
    return policy.act(view)


def to_wire(action) -> dict[str, Any]:
    return {
        "reply": action.reply,
        "tool_calls": [{"name": c.name, "arguments": c.arguments} for c in action.tool_calls],
    }


def play(
    spec: EnvironmentSpec,
    task_key: str,
    policy: Policy,
    first: dict[str, Any],
    step: Callable[[dict[str, Any]], dict[str, Any]],
) -> list[dict[str, Any]]:
    """Play ``policy`` from the reset observation ``first``; ``step(wire_action)`` returns the
    next observation. Returns every observation, the last one final."""
    messages = list(first["messages"])
    state = {
        "tools": first["tools"],
        "turn": first["turn"],
        "round": 0,
        "task": spec.task(task_key),
        "spec": spec,
        "results": [],
    }
    seen = [first]
    obs = first
    while not obs["done"]:
        action = action_of(policy, messages, state)
        obs = step(to_wire(action))
        seen.append(obs)
        if action.tool_calls:
            assistant = {"role": "assistant", "content": action.reply or None, "tool_calls": []}
            for call, result in zip(action.tool_calls, obs["tool_results"], strict=True):
                assistant["tool_calls"].append(
                    {
                        "id": result["tool_call_id"],
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments},
                    }
                )
                state["results"].append(
                    (
                        ToolCall(call.name, call.arguments),
                        SeenResult(result["ok"], result["retryable"]),
                    )
                )
            messages.append(assistant)
            state["round"] += 1
        else:
            messages.append({"role": "assistant", "content": action.reply or ""})
        messages.extend(m for m in obs["messages"] if m["role"] == "tool")
        if obs["turn_ended"] and not obs["done"]:
            messages.append({"role": "user", "content": obs["user_message"]})
            state.update(turn=obs["turn"], round=0, results=[])
    return seen
