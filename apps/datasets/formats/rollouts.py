"""Scored rollouts for offline RL: one graded run of a rollout group per line, with its
rewards and advantages under one reward-processing / credit-assignment variant.

One example per line::

    {"messages": [{"role": "system", ...}, {"role": "user", ...},
                  {"role": "assistant", "content": "", "tool_calls": [{"id", "type": "function",
                   "function": {"name", "arguments": {<object>}}}], "advantage": 0.41},
                  {"role": "tool", "name", "tool_call_id", "content"}, ...],
     "tools": "<JSON string of the OpenAI function tools>",
     "reward": 0.84, "advantage": 0.218,
     "turn_rewards": [0.16, 0.68],          # graders due at each turn's end; Σ = the score
     "turn_advantages": [0.053, 0.0] | null, # credit=turn
     "call_credit": [{"tool_call_id", "seq", "tool", "turn", "reward", "advantage"}] | null,
     "variant": {"reward", "advantage", "credit", "gamma"},
     "group": {"id", "size", "index", "batch"},
     "episode": {"run", "environment", "task_key", "seed", "model"}}

Messages are TRL's conversational shape (``arguments`` objects, tool messages named), so
``apply_chat_template`` renders them; ``tools`` is a JSON string for the same reason as the
``trl`` format (Arrow would merge every row's schemas). Each assistant message carries the
``advantage`` its tokens take under the variant's credit: ``trajectory`` the episode's
advantage on every assistant message; ``turn`` turn k's advantage on the assistant messages
of turn k; ``call`` the mean advantage of the message's tool calls (0 for a message that
calls no tool: a reply's credit is in what no call explains). Tool, user and system
messages carry none (they are masked out of a policy-gradient loss).

Nothing here imports Django; the numbers come from the engine's ``rewards.group_table``.
"""

from __future__ import annotations

import json
import math
from typing import Any

from apps.core.text import noun_for
from apps.datasets.formats.lint import Linter, check_conversation, check_tools
from apps.datasets.formats.trl import trl_row

KEYS = {
    "messages",
    "tools",
    "reward",
    "advantage",
    "turn_rewards",
    "turn_advantages",
    "call_credit",
    "variant",
    "group",
    "episode",
}
CREDITS = ("trajectory", "turn", "call")
LAYOUT = "one row per scored rollout: the whole episode, its reward and per-turn advantages"


def message_advantages(
    messages: list[dict[str, Any]],
    *,
    credit: str,
    advantage: float,
    turn_advantages: list[float] | None = None,
    call_advantages: list[float] | None = None,
) -> list[float | None]:
    """The advantage of each message under ``credit`` (None for non-assistant messages).
    Tool calls are matched to ``call_advantages`` in the order they were made."""
    out: list[float | None] = []
    turn, call = -1, 0
    for message in messages:
        role = message.get("role")
        if role == "user":
            turn += 1
        if role != "assistant":
            out.append(None)
            continue
        if credit == "trajectory":
            out.append(advantage)
        elif credit == "turn":
            values = turn_advantages or []
            out.append(values[max(turn, 0)] if max(turn, 0) < len(values) else 0.0)
        else:
            n = len(message.get("tool_calls") or [])
            mine = (call_advantages or [])[call : call + n]
            call += n
            out.append(math.fsum(mine) / len(mine) if mine else 0.0)
    return out


def rollout_row(
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    *,
    scores: dict[str, Any],
    group: dict[str, Any],
    episode: dict[str, Any],
) -> dict[str, Any]:
    """One line. ``scores``: ``reward``, ``advantage``, ``turn_rewards``, ``variant``
    ({reward, advantage, credit, gamma}) and, for turn credit ``turn_advantages``, for call
    credit ``calls`` ([{seq, tool, turn, reward, advantage}] in call order)."""
    credit = scores["variant"]["credit"]
    calls = scores.get("calls") if credit == "call" else None
    turn_advantages = scores.get("turn_advantages") if credit == "turn" else None
    base = trl_row(messages, tools)
    per_message = message_advantages(
        base["messages"],
        credit=credit,
        advantage=scores["advantage"],
        turn_advantages=turn_advantages,
        call_advantages=[c["advantage"] for c in calls] if calls is not None else None,
    )
    out_messages = []
    call_ids = []
    for message, value in zip(base["messages"], per_message, strict=True):
        message = {k: v for k, v in message.items() if k != "weight"}
        if value is not None:
            message["advantage"] = value
        for tool_call in message.get("tool_calls") or []:
            call_ids.append(tool_call.get("id"))
        out_messages.append(message)
    call_credit = None
    if calls is not None:
        call_credit = [
            {"tool_call_id": call_ids[j] if j < len(call_ids) else None, **c}
            for j, c in enumerate(calls)
        ]
    return {
        "messages": out_messages,
        "tools": base["tools"],
        "reward": scores["reward"],
        "advantage": scores["advantage"],
        "turn_rewards": scores["turn_rewards"],
        "turn_advantages": turn_advantages,
        "call_credit": call_credit,
        "variant": scores["variant"],
        "group": group,
        "episode": episode,
    }


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


class RolloutLinter(Linter):
    """Each line: the keys above; a legal conversation with object arguments; numeric
    reward and advantages; one turn reward (and turn advantage) per user turn reached; an
    advantage on every assistant message and on no other; a known credit."""

    format = "rollouts"
    min_rows_warning = 2

    def check_row(self, row: dict[str, Any], problem) -> None:
        if not _has_keys(row, problem):
            return
        names = _tool_names(row, problem)
        messages = row["messages"]
        check_conversation(messages, problem, arguments_as="object", tools=names)
        for key in ("reward", "advantage"):
            if not _number(row[key]):
                problem(f"`{key}` must be a finite number.")
        credit = (row["variant"] if isinstance(row["variant"], dict) else {}).get("credit")
        if credit not in CREDITS:
            problem(f"`variant.credit` must be one of {', '.join(CREDITS)}.")
        if not isinstance(messages, list):
            return
        _check_turns(row, messages, credit, problem)
        _check_message_advantages(messages, problem)


def _has_keys(row: dict[str, Any], problem) -> bool:
    """Report unknown and missing keys; the rest of the checks need every key there."""
    unknown = sorted(set(row) - KEYS)
    missing = sorted(KEYS - set(row))
    if unknown:
        problem(f"Unknown {noun_for(len(unknown), 'key')} {', '.join(unknown)}.")
    if missing:
        problem(f"Missing {noun_for(len(missing), 'key')} {', '.join(missing)}.")
    return not missing


def _tool_names(row: dict[str, Any], problem) -> set[str] | None:
    if not isinstance(row["tools"], str):
        problem("`tools` must be a JSON string.")
        return None
    try:
        return check_tools(json.loads(row["tools"]), problem)
    except ValueError:
        problem("`tools` is not valid JSON.")
        return None


def _check_turns(row: dict[str, Any], messages: list, credit: Any, problem) -> None:
    """One turn reward per user turn reached, and the credit's per-turn or per-call lists."""
    users = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "user")
    turns = row["turn_rewards"]
    if not isinstance(turns, list) or not all(_number(x) for x in turns):
        problem("`turn_rewards` must be a list of numbers.")
    elif len(turns) < users:
        problem(f"{len(turns)} turn rewards for {users} user turns.")
    if credit == "turn":
        adv = row["turn_advantages"]
        if not isinstance(adv, list) or len(adv) != len(turns or []):
            problem("`turn_advantages` must give one advantage per turn reward.")
    if credit == "call" and not isinstance(row["call_credit"], list):
        problem("`call_credit` must list the tool calls' credit.")


def _check_message_advantages(messages: list, problem) -> None:
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        if message.get("role") == "assistant":
            if not _number(message.get("advantage")):
                problem(f"messages[{i}]: an assistant message needs a numeric advantage.")
        elif "advantage" in message:
            problem(f"messages[{i}]: only assistant messages carry an advantage.")
