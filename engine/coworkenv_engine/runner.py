"""Drive a policy through every turn of a task and grade the episode."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from .checks import Call, Judge, leaf_kinds
from .policies import Policy, PolicyAction, PolicyView, ToolCall
from .replays import Replays
from .scoring import Grading, ScoringConfig, grade_episode
from .side_effects import Footprint, net_changes
from .simulator import FAULT_KINDS, Episode, Limits, ToolResult, UserTurn
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


class EpisodeResult:
    """One graded episode. ``audit_log``, ``final_state`` and ``state_hash`` are built from
    the finished episode on first access (validation grades many episodes and reads them
    for few), then kept; given explicitly they are taken as they are."""

    def __init__(
        self,
        *,
        task_key: str,
        policy: str,
        seed: int,
        faults: bool,
        transcript: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        exogenous_log: list[dict[str, Any]],
        grading: Grading,
        stop_reason: str,  # "completed" | "round_limit" | "call_limit"
        audit_log: list[dict[str, Any]] | None = None,
        final_state: dict[str, Any] | None = None,
        state_hash: str | None = None,
        turn_snapshots: dict[int, dict[str, Any]] | None = None,
        divergent_calls: list[str] | None = None,
        episode: Episode | None = None,
    ):
        if episode is None and (audit_log is None or final_state is None or state_hash is None):
            raise TypeError("EpisodeResult needs the episode or its audit log, state and hash")
        self.task_key = task_key
        self.policy = policy
        self.seed = seed
        self.faults = faults
        self.transcript = transcript
        self.tools = tools
        self.exogenous_log = exogenous_log
        self.grading = grading
        self.stop_reason = stop_reason
        self.turn_snapshots = turn_snapshots if turn_snapshots is not None else {}
        # replay_transcript only: the tool_call ids whose replayed result differs from the
        # recorded one (the environment changed since the transcript was recorded).
        self.divergent_calls = divergent_calls if divergent_calls is not None else []
        self._episode = episode
        self._audit_log = audit_log
        self._final_state = final_state
        self._state_hash = state_hash

    @property
    def audit_log(self) -> list[dict[str, Any]]:
        if self._audit_log is None:
            self._audit_log = [e.to_dict() for e in self._episode.audit_log]
        return self._audit_log

    @property
    def final_state(self) -> dict[str, Any]:
        if self._final_state is None:
            self._final_state = self._episode.state_snapshot()
        return self._final_state

    @property
    def state_hash(self) -> str:
        if self._state_hash is None:
            self._state_hash = self._episode.state_hash()
        return self._state_hash

    @property
    def tool_errors(self) -> list[dict[str, Any]]:
        return [e for e in self.audit_log if not e["ok"]]

    def __repr__(self) -> str:
        return (
            f"EpisodeResult(task_key={self.task_key!r}, policy={self.policy!r}, "
            f"seed={self.seed}, faults={self.faults}, stop_reason={self.stop_reason!r}, "
            f"score={self.grading.score})"
        )

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


def _footprint(spec: EnvironmentSpec, task: TaskSpec) -> Footprint | None:
    needed = spec._cache.get(("needs_footprint", task.key))
    if needed is None:  # once per task, not once per episode
        needed = spec._cache[("needs_footprint", task.key)] = needs_footprint(task)
    return reference_footprint(spec, task.key) if needed else None


_ENCODE_ARGS = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode


def _arguments_text(arguments: dict[str, Any] | str) -> str:
    return _arguments_json(arguments)[0]


def _arguments_json(arguments: dict[str, Any] | str) -> tuple[str, str | None]:
    """The arguments' text for the transcript, and the JSON the simulator would write for a
    dict of them (None when they are not a dict, or not JSON)."""
    if isinstance(arguments, str):
        return arguments, None
    try:
        text = _ENCODE_ARGS(arguments)
    except (TypeError, ValueError):
        return json.dumps(str(arguments)), None
    return text, text if isinstance(arguments, dict) else None


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
    replays: Replays | None = None,
) -> EpisodeResult:
    """Run ``policy`` through every turn of ``task_key`` and grade the episode.

    ``user_turn``, when given, writes the user's message of every turn after the first
    (a simulated user answering the agent's questions); the first turn is always scripted.
    ``replays``, when given, shares the turns and calls this run has in common with earlier
    runs of the same task, seed, faults setting and limits (replays.py): the result is the
    same, the common part is not executed again.
    """
    spec = spec if isinstance(spec, EnvironmentSpec) else load_spec(spec)
    limits = limits or Limits()
    episode = Episode(spec, task_key, seed, faults=faults, limits=limits)
    cursor = replays.cursor(episode) if replays is not None else None
    advance = episode.advance_turn if cursor is None else cursor.advance_turn
    task = episode.task
    tools = spec.openai_tools()
    transcript: list[dict[str, Any]] = [{"role": "system", "content": task.system_prompt()}]
    turn_states: dict[int, dict[str, Any]] = {}
    stop_reason = "completed"
    n_calls = 0

    while stop_reason == "completed" and (turn := advance()) is not None:
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
                text, exact = _arguments_json(call.arguments)
                message["tool_calls"].append(
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": text},
                    }
                )
                pending.append((call_id, call, text, exact))
            transcript.append(message)
            batch = [(call.name, call.arguments, t, e) for _, call, t, e in pending]
            if cursor is None:
                outcomes = [episode.call(n, a, text=e) for n, a, _, e in batch]
            else:
                outcomes = cursor.calls(batch)
            for (call_id, call, _, _), result in zip(pending, outcomes, strict=True):
                transcript.append(
                    {
                        "role": "tool",
                        "tool_call_id": call_id,
                        "content": result.message_content(),
                    }
                )
                results.append((call, result))
                if result.error_code == "call_limit":
                    stop_reason = "call_limit"
            if stop_reason != "completed":
                break
        else:
            stop_reason = "round_limit"
        turn_states[current.index] = episode.state if cursor is None else cursor.state()

    if cursor is not None:
        episode = cursor.finish()
    grading = grade_episode(
        task,
        final_state=episode.state if cursor is None else cursor.state(),
        turn_states=turn_states,
        audit_log=episode.audit_log,
        transcript=transcript,
        judge=judge,
        config=scoring,
        reference=_footprint(spec, task),
        state_memo=None if cursor is None else replays.state_memo,
    )
    return EpisodeResult(
        task_key=task.key,
        policy=getattr(policy, "name", type(policy).__name__),
        seed=seed,
        faults=faults,
        transcript=transcript,
        tools=tools,
        exogenous_log=list(episode.exogenous_log),
        episode=episode,
        grading=grading,
        stop_reason=stop_reason,
        turn_snapshots=turn_states,
    )


def _recorded_fault(content: Any) -> str | None:
    """The injected fault a recorded ``tool`` message reports, if any."""
    if not isinstance(content, str) or '"error"' not in content:
        return None
    try:
        data = json.loads(content)
    except ValueError:
        return None
    error = data.get("error") if isinstance(data, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return code if code in FAULT_KINDS else None


def replay_transcript(
    spec: EnvironmentSpec | dict[str, Any],
    task_key: str,
    transcript: list[dict[str, Any]],
    *,
    seed: int = 0,
    judge: Judge | None = None,
    limits: Limits | None = None,
    scoring: ScoringConfig | None = None,
) -> EpisodeResult:
    """Replay a recorded OpenAI-format transcript in a fresh episode and grade it.

    The agent's side is taken as recorded: every ``user`` message advances the episode to
    its next turn (applying that turn's exogenous updates; user messages beyond the task's
    turns advance nothing), and every assistant ``tool_calls`` entry is executed in order.
    A call whose recorded result is an injected fault (``rate_limit``, ``server_error``,
    ``timeout``) is replayed as that same fault; every other call runs fault-free, so a
    transcript replays the same way whatever the seed. Truncating a transcript, editing
    assistant text or adding ``weight`` keys therefore grades exactly what is left.

    Returns an ``EpisodeResult`` (policy ``"replay"``) whose transcript is the given one,
    messages and extra keys kept, with a result message inserted for any call that had
    none; ``divergent_calls`` lists the tool_call ids whose replayed result differs from
    the recorded one (the spec changed since the recording). Malformed entries are treated
    like a real agent's malformed calls: they become tool errors, never exceptions.
    """
    spec = spec if isinstance(spec, EnvironmentSpec) else load_spec(spec)
    limits = limits or Limits()
    episode = Episode(spec, task_key, seed, faults=False, limits=limits)
    task = episode.task
    recorded: dict[str, dict[str, Any]] = {
        m["tool_call_id"]: m
        for m in transcript
        if isinstance(m, dict) and m.get("role") == "tool" and m.get("tool_call_id")
    }
    out: list[dict[str, Any]] = []
    turn_states: dict[int, dict[str, Any]] = {}
    divergent: list[str] = []
    answered: set[str] = set()
    stop_reason = "completed"
    started = False
    n_calls = 0

    def close_turn() -> None:
        if episode.turn_index >= 0:
            turn_states[episode.turn_index] = episode.state

    for message in transcript:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role == "user":
            close_turn()
            started = True
            episode.advance_turn()
            out.append(message)
            continue
        if role == "tool":
            if message.get("tool_call_id") in answered:
                continue  # already emitted right after its call
            out.append(message)
            continue
        out.append(message)
        if role != "assistant" or not message.get("tool_calls"):
            continue
        if not started:
            started = True
            episode.advance_turn()
        for entry in message["tool_calls"]:
            n_calls += 1
            function = entry.get("function") if isinstance(entry, dict) else None
            function = function if isinstance(function, dict) else {}
            call_id = str(entry.get("id") or f"call_{n_calls}") if isinstance(entry, dict) else ""
            kept = recorded.get(call_id)
            before = kept.get("content") if kept is not None else None
            result = episode.call(
                str(function.get("name") or ""),
                function.get("arguments"),
                fault=_recorded_fault(before),
            )
            content = result.message_content()
            if result.error_code == "call_limit":
                stop_reason = "call_limit"
            if kept is None:
                out.append({"role": "tool", "tool_call_id": call_id, "content": content})
            else:
                out.append(kept)
                if before != content:
                    divergent.append(call_id)
            answered.add(call_id)
    close_turn()

    grading = grade_episode(
        task,
        final_state=episode.state,
        turn_states=turn_states,
        audit_log=episode.audit_log,
        transcript=out,
        judge=judge,
        config=scoring,
        reference=_footprint(spec, task),
    )
    return EpisodeResult(
        task_key=task.key,
        policy="replay",
        seed=seed,
        faults=False,
        transcript=out,
        tools=spec.openai_tools(),
        exogenous_log=list(episode.exogenous_log),
        episode=episode,
        grading=grading,
        stop_reason=stop_reason,
        turn_snapshots=turn_states,
        divergent_calls=divergent,
    )


# --------------------------------------------------------------------------- footprints
# (here, not in side_effects.py, so that the check module imports neither the simulator nor
# the checks: no import circle)


def needs_footprint(task: TaskSpec) -> bool:
    return any("side_effects" in set(leaf_kinds(g.check)) for g in task.graders)


def reference_footprint(spec: EnvironmentSpec, task_key: str) -> Footprint:
    """Replay the reference solution fault-free (no policy, no grading) and keep its changes.

    Cached on the spec: one replay per task whatever the number of episodes graded.
    """
    cache_key = ("footprint", task_key)
    cached = spec._cache.get(cache_key)
    if cached is not None:
        return cached
    episode = Episode(spec, task_key, 0, faults=False)
    task = episode.task
    while (turn := episode.advance_turn()) is not None:
        step = task.step_for_turn(turn.index)
        for call in step.calls if step else ():
            episode.call(call.tool, call.arguments)
    footprint = Footprint(tuple(net_changes(Call.of(e) for e in episode.audit_log)))
    spec._cache[cache_key] = footprint
    return footprint
