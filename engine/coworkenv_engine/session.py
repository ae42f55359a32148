"""A step-wise episode: the agent's side arrives one action at a time (an RL trainer, an
environment server session) instead of from a ``Policy`` inside ``run_task``.

``EpisodeSession(spec, task_key, seed).start()`` returns the first observation (system prompt,
tools, first user message); ``act(reply=..., tool_calls=[...])`` runs one assistant message
exactly as ``run_task`` would — tool calls are executed in order, a message without tool calls
ends the turn (the next turn's exogenous updates are applied and its user message returned),
the round and call limits end the episode — and returns the next observation. Driving a
session with the actions a policy takes gives the same transcript, audit log, state hash and
grading as ``run_task`` with that policy (tested).

Observations are plain JSON-able dicts (the OpenEnv observation of ``server.py``):

    turn, turn_ended, done, reward (the score on the final step, else None),
    messages        the messages the environment adds to the conversation, in order
                    (reset: system + user; a tool step: the tool messages; a turn end: the
                    next user message, if any)
    tool_results    [{tool_call_id, name, ok, content, error_code, retryable}]; a view
                    tool's ``content`` (in its tool message too) is OpenAI content parts:
                    the text, then an ``image_url`` part per image — with a ``data:`` URL
                    when the session has an ``image_url`` maker (a server), else the
                    transcript's ``attachment:sha256:<hex>`` URL
    user_message    the next user message (reset and turn ends), else None
    turn_reward     at a turn end: that turn's reward (``rewards.turn_rewards``), else None
    system_prompt, tools                  on reset only (else None / [])
    grading, turn_rewards, stop_reason    on the final step only (grading's verdicts
                    without evidence unless the session was made with ``evidence``, as a
                    server's reset with ``"evidence": true`` does); turn_rewards are the
                    rewards sent at each reached turn's end, summing to the score (for a
                    completed episode, ``rewards.turn_rewards(grading, n_turns)``)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .attachments import Attachment, image_part_attachments, show_image_parts
from .policies import ToolCall
from .rewards import turn_credit
from .runner import needs_footprint, reference_footprint
from .scoring import Grading, ScoringConfig, grade_episode
from .simulator import Episode, Limits, ToolResult
from .spec import EnvironmentSpec, load_spec


def public_grading(grading: Grading) -> dict[str, Any]:
    """``grading.to_dict()`` without the graders' internals: each verdict's id, category,
    weight, status and turn, no evidence (check queries, matched rows)."""
    shown = grading.to_dict()
    shown["verdicts"] = [
        {k: v for k, v in verdict.items() if k != "evidence"} for verdict in shown["verdicts"]
    ]
    return shown


class SessionError(ValueError):
    """The agent's action cannot be taken now (episode over, not started)."""


def _arguments_text(arguments: dict[str, Any] | str) -> str:
    if isinstance(arguments, str):
        return arguments
    try:
        return json.dumps(arguments, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        return json.dumps(str(arguments))


class EpisodeSession:
    def __init__(
        self,
        spec: EnvironmentSpec | dict[str, Any],
        task_key: str,
        seed: int = 0,
        *,
        faults: bool = True,
        limits: Limits | None = None,
        scoring: ScoringConfig | None = None,
        tools: list[dict[str, Any]] | None = None,
        image_url: Callable[[Attachment], str | None] | None = None,
        evidence: bool = True,
    ):
        """``tools``: ``spec.openai_tools()`` computed once by a caller that runs many
        sessions of one spec (a server); it is sent as is, never changed. ``image_url``: the
        URL an image is shown by in observations (a ``data:`` URL; None: not available);
        the transcript keeps ``attachment:`` URLs whatever it returns. ``evidence``: whether
        the final observation's grading carries each verdict's evidence (the graders' check
        queries and what they found); without it, verdicts by name and status only
        (``public_grading``: what a server shows a policy unless its trainer asks)."""
        self.spec = spec if isinstance(spec, EnvironmentSpec) else load_spec(spec)
        self.limits = limits or Limits()
        self.scoring = scoring
        self.seed = seed
        self.faults = faults
        self.episode = Episode(self.spec, task_key, seed, faults=faults, limits=self.limits)
        self.task = self.episode.task
        self.tools = tools if tools is not None else self.spec.openai_tools()
        self.image_url = image_url
        self.evidence = evidence
        self.transcript: list[dict[str, Any]] = []
        self.turn_states: dict[int, dict[str, Any]] = {}
        self.turn_rewards: list[float] = []
        self.grading: Grading | None = None
        self.stop_reason: str | None = None
        self.step_count = 0
        self._round = 0
        self._calls = 0
        self._turn = -1
        self._started = False

    # ------------------------------------------------------------------ properties

    @property
    def done(self) -> bool:
        return self.grading is not None

    @property
    def n_turns(self) -> int:
        return len(self.task.turns)

    def state(self) -> dict[str, Any]:
        """What a trainer may read between steps (the OpenEnv State's extra fields)."""
        return {
            "step_count": self.step_count,
            "task_key": self.task.key,
            "environment": self.spec.name,
            "seed": self.seed,
            "faults": self.faults,
            "turn": self._turn,
            "round": self._round,
            "done": self.done,
            "turn_rewards": list(self.turn_rewards),
            "score": self.grading.score if self.grading else None,
            "state_hash": self.episode.state_hash(),
        }

    # ------------------------------------------------------------------ protocol

    def start(self) -> dict[str, Any]:
        if self._started:
            raise SessionError("the episode has already started")
        self._started = True
        system = {"role": "system", "content": self.task.system_prompt()}
        self.transcript.append(system)
        turn = self.episode.advance_turn()
        assert turn is not None  # a task has at least one turn (schema)
        self._turn = turn.index
        user = {"role": "user", "content": turn.text}
        self.transcript.append(user)
        return self._observation(
            messages=[system, user],
            user_message=turn.text,
            system_prompt=system["content"],
            tools=self.tools,
        )

    def act(self, reply: str | None = None, tool_calls: list[ToolCall] | tuple = ()) -> dict:
        """Run one assistant message; see the module docstring."""
        if not self._started:
            raise SessionError("call reset first")
        if self.done:
            raise SessionError("the episode is over; reset to start another")
        self.step_count += 1
        if not tool_calls:
            self.transcript.append({"role": "assistant", "content": reply or ""})
            return self._end_turn()
        message: dict[str, Any] = {"role": "assistant", "content": reply or None, "tool_calls": []}
        pending = []
        for call in tool_calls:
            self._calls += 1
            call_id = call.id or f"call_{self._calls}"
            message["tool_calls"].append(
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": _arguments_text(call.arguments)},
                }
            )
            pending.append((call_id, call))
        self.transcript.append(message)
        added, results = [], []
        stop = None
        for call_id, call in pending:
            result = self.episode.call(call.name, call.arguments)
            content = result.message_content()
            self.transcript.append({"role": "tool", "tool_call_id": call_id, "content": content})
            shown = self._shown(content)
            added.append({"role": "tool", "tool_call_id": call_id, "content": shown})
            results.append(self._result(call_id, call.name, result, shown))
            if result.error_code == "call_limit":
                stop = "call_limit"
        self._round += 1
        if stop is None and self._round >= self.limits.max_rounds_per_turn:
            stop = "round_limit"
        if stop is not None:
            self.turn_states[self._turn] = self.episode.state
            return self._finish(stop, messages=added, tool_results=results)
        return self._observation(messages=added, tool_results=results)

    # ------------------------------------------------------------------ internals

    def _shown(self, content: Any) -> Any:
        """A tool message's content as observations show it: image parts get the URL of
        ``image_url`` (a text part says so when the image is not available)."""
        if not isinstance(content, list) or self.image_url is None:
            return content
        by_sha = {a.sha256: a for a in self.spec.attachments}
        attachments = image_part_attachments(content, by_sha)
        urls = [self.image_url(a) if a is not None else None for a in attachments]
        return show_image_parts(content, attachments, urls)

    @staticmethod
    def _result(call_id: str, name: str, result: ToolResult, content: Any) -> dict[str, Any]:
        return {
            "tool_call_id": call_id,
            "name": name,
            "ok": result.ok,
            "content": content,
            "error_code": result.error_code,
            "retryable": result.retryable,
        }

    def _grade(self) -> Grading:
        return grade_episode(
            self.task,
            final_state=self.episode.state,
            turn_states=self.turn_states,
            audit_log=self.episode.audit_log,
            transcript=self.transcript,
            config=self.scoring,
            reference=(
                reference_footprint(self.spec, self.task.key)
                if needs_footprint(self.task)
                else None
            ),
        )

    def _end_turn(self) -> dict[str, Any]:
        ended = self._turn
        self.turn_states[ended] = self.episode.state
        if ended >= self.n_turns - 1:
            return self._finish("completed", messages=[])
        reward = turn_credit(self._grade(), ended)
        self.turn_rewards.append(reward)
        turn = self.episode.advance_turn()
        assert turn is not None
        self._turn = turn.index
        self._round = 0
        user = {"role": "user", "content": turn.text}
        self.transcript.append(user)
        return self._observation(
            messages=[user], user_message=turn.text, turn_ended=True, turn_reward=reward
        )

    def _finish(self, stop_reason: str, **fields: Any) -> dict[str, Any]:
        self.stop_reason = stop_reason
        self.grading = self._grade()
        last = round(self.grading.score - sum(self.turn_rewards), 10)
        self.turn_rewards.append(last)
        return self._observation(
            **fields,
            turn_ended=True,
            turn_reward=last,
            grading=self.grading.to_dict() if self.evidence else public_grading(self.grading),
            turn_rewards=list(self.turn_rewards),
            stop_reason=stop_reason,
        )

    def _observation(self, **fields: Any) -> dict[str, Any]:
        obs: dict[str, Any] = {
            "episode": {
                "environment": self.spec.name,
                "task_key": self.task.key,
                "seed": self.seed,
                "faults": self.faults,
            },
            "turn": self._turn,
            "turn_ended": False,
            "messages": [],
            "tool_results": [],
            "user_message": None,
            "turn_reward": None,
            "system_prompt": None,
            "tools": [],
            "grading": None,
            "turn_rewards": None,
            "stop_reason": None,
        }
        obs.update(fields)
        obs["done"] = self.done
        obs["reward"] = self.grading.score if self.grading else None
        return obs
