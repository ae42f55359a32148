"""Scripted agents for the verifiers adapter tests: the wire actions a policy takes on a task,
found by playing it against an in-process session (deterministic: the same task, seed and
faults give the same results to the same actions)."""

from __future__ import annotations

from coworkenv_engine.adversaries import policy_by_name
from coworkenv_engine.policies import ToolCall
from coworkenv_engine.session import EpisodeSession
from coworkenv_engine.spec import EnvironmentSpec

from .drive import play


def policy_actions(spec: EnvironmentSpec, task_key: str, policy: str, seed: int = 0):
    """(wire actions, the final observation) of ``policy`` on the task."""
    session = EpisodeSession(spec, task_key, seed)
    actions: list[dict] = []

    def step(action):
        actions.append(action)
        return session.act(
            action["reply"], [ToolCall(c["name"], c["arguments"]) for c in action["tool_calls"]]
        )

    seen = play(spec, task_key, policy_by_name(policy), session.start(), step)
    return actions, seen[-1]
