"""Per-turn and per-call credit assignment for ``apps.training.grpo``: an advantage per
completion token instead of one per episode.

TRL 1.16's ``GRPOTrainer`` computes one advantage per rollout (shape ``(B,)``) and its loss
broadcasts it over the completion's tokens; ``_compute_loss`` also takes ``(B, T)`` advantages
from a subclass ("To support subclasses that provide advantages with shape (B, T)"). That is
the extension point used here: ``trainer_class(credit)`` returns TRL's own class for
``trajectory`` (nothing changes) and otherwise a subclass whose
``_generate_and_score_completions`` replaces the ``advantages`` tensor by a ``(B, T)`` one.

The numbers are the engine's (``coworkenv_engine.rewards``), as the app's rollout groups
compute them: per turn, ``turn_advantages(group's env.turn_rewards, gamma, scale)``; per call,
``call_rewards(grading, calls)`` then ``turn_advantages`` over the calls (normalised per call
index across the group). ``scale`` is the ``grpo`` advantage ((x - μ)/(std + 1e-4)) and not
``dr_grpo`` (x - μ).

Where each turn's and each call's tokens are (``plan_segments``, ``model_segments``,
``call_spans``): TRL concatenates a rollout into one completion: model tokens, then each tool
result rendered by the chat template (``tool_mask`` 0), then the next generation, and so on.
A run of model tokens (mask 1) is one generation, i.e. one assistant message of the
completion's message list, in order. The environment records every tool method TRL calls
(``recording_class``): the turn it ran in and, for a tool the engine executed, its index among
the episode's calls (the audit log's ``seq`` - 1); ``reply_to_user`` ends the turn. Walking the
assistant messages' tool calls against that record gives each message's turn (the turn it
began in) and each call's engine index. Inside a message, the call ``c``'s tokens run from
where its name is in the decoded text to where the next call's name is (the first call's
span starts at the message's first token, the last one's ends at its last).

Under ``turn`` credit every model token of a message takes its turn's advantage; tokens after
the episode ended take the last turn's. Under ``call`` credit a call's tokens take its
advantage; replies (``reply_to_user``, the final message) and tool calls the engine never ran
take 0: their credit is in what no call explains, as in the scored-rollout export. When the
names cannot be found in a message's text, its tokens take the mean of its calls' advantages
(the export's per-message value).
"""

from __future__ import annotations

import inspect
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from coworkenv_engine.rewards import call_rewards, turn_advantages

logger = logging.getLogger("apps.training.grpo")

TURN_ENDING = "reply_to_user"
NOT_TOOLS = frozenset({"reset", "get_reward"})  # TRL's rule for an environment's tools


# --- what the environment saw ---------------------------------------------------------------


def recording_class(env_class: type) -> type:
    """``env_class`` whose instances record each tool method TRL calls, in order, in
    ``actions``: ``{"tool", "turn", "turn_after", "call"}`` (``call``: the engine's 0-based
    index of the call, None for a reply or a call after the episode ended), and count the
    engine's calls in ``engine_calls``. Works for the in-process and the server classes
    (both keep ``grading`` None until the episode is over)."""

    class Recording(env_class):
        def reset(self, *args: Any, **kwargs: Any):
            self.actions: list[dict[str, Any]] = []
            self.engine_calls = 0
            self._credit_turn = 0
            return super().reset(*args, **kwargs)

        def _act(self, reply, calls):
            reached = self.grading is None
            entry = {
                "tool": calls[0].name if calls else TURN_ENDING,
                "turn": self._credit_turn,
                "call": self.engine_calls if reached and calls else None,
            }
            if reached and calls:
                self.engine_calls += len(calls)
            elif reached:
                self._credit_turn += 1  # a reply ends the turn
            entry["turn_after"] = self._credit_turn
            self.actions.append(entry)
            return super()._act(reply, calls)

    Recording.__name__ = Recording.__qualname__ = env_class.__name__
    return Recording


def tool_names(env: Any) -> set[str]:
    """The methods TRL offers the model as tools (``GRPOTrainer``'s own rule)."""
    return {
        name
        for name, _ in inspect.getmembers(type(env), predicate=inspect.isfunction)
        if name not in NOT_TOOLS and not name.startswith("_")
    }


# --- where the turns and calls are ----------------------------------------------------------


def plan_segments(
    messages: Sequence[Mapping[str, Any]], actions: Sequence[Mapping[str, Any]], tools: set[str]
) -> list[dict[str, Any]]:
    """One entry per assistant message of a completion, in order: ``{"turn", "calls"}``,
    ``calls`` one ``{"tool", "call"}`` per tool call of the message (``call``: the engine's
    index, or None). A tool call TRL could not run (unknown name, not a function) has no
    record and is skipped in the record; the records are consumed in order."""
    plan: list[dict[str, Any]] = []
    cursor, turn = 0, 0
    for message in messages:
        if message.get("role") != "assistant":
            continue
        start, calls = turn, []
        for tool_call in message.get("tool_calls") or []:
            function = tool_call.get("function") or {}
            name = function.get("name") if tool_call.get("type", "function") == "function" else None
            entry = None
            if name in tools and cursor < len(actions) and actions[cursor]["tool"] == name:
                entry = actions[cursor]
                cursor += 1
                turn = entry["turn_after"]
            calls.append({"tool": name, "call": entry["call"] if entry else None})
        plan.append({"turn": start, "calls": calls})
    return plan


def model_segments(mask: Sequence[int]) -> list[tuple[int, int]]:
    """The runs of 1 in a completion's mask (model tokens; tool results are 0), as
    ``[start, end)``: one per generation."""
    runs, start = [], None
    for t, m in enumerate(mask):
        if m and start is None:
            start = t
        elif not m and start is not None:
            runs.append((start, t))
            start = None
    if start is not None:
        runs.append((start, len(mask)))
    return runs


def call_spans(pieces: Sequence[str], names: Sequence[str]) -> list[tuple[int, int]] | None:
    """Token spans ``[start, end)`` (within a message) of its tool calls, from the decoded
    text of each token (``pieces``): call c starts at the token where its name is (quoted,
    as JSON renders it, else bare), searched after the previous call's name; the first
    span starts at token 0 and the last ends at the message's end. None when a name is not
    found."""
    if not names:
        return []
    text = "".join(pieces)
    ends, total = [], 0
    for piece in pieces:
        total += len(piece)
        ends.append(total)
    starts, position = [], 0
    for name in names:
        at = text.find(f'"{name}"', position)
        if at < 0:
            at = text.find(str(name), position)
        if at < 0:
            return None
        starts.append(next(t for t, end in enumerate(ends) if end > at))
        position = at + len(str(name))
    starts[0] = 0
    bounds = [*starts, len(pieces)]
    return [(bounds[c], max(bounds[c], bounds[c + 1])) for c in range(len(names))]


# --- the values -----------------------------------------------------------------------------


def rollout_credit(env: Any) -> dict[str, Any] | None:
    """What a finished rollout gives the group computation (None when it was not graded)."""
    grading = getattr(env, "grading", None)
    if grading is None:
        return None
    return {
        "grading": grading,
        "turn_rewards": list(getattr(env, "turn_rewards", None) or []),
        "engine_calls": int(getattr(env, "engine_calls", 0)),
    }


def group_values(
    rollouts: Sequence[Mapping[str, Any] | None],
    *,
    credit: str,
    group_size: int,
    gamma: float,
    scale: bool,
) -> list[list[float]]:
    """Per rollout, the advantage of each turn (``turn``) or engine call (``call``),
    computed over consecutive groups of ``group_size`` by the engine's ``turn_advantages``;
    an ungraded rollout gets ``[]`` and takes no part."""
    if credit == "turn":
        rows = [list(r["turn_rewards"]) if r else [] for r in rollouts]
    elif credit == "call":
        rows = [
            call_rewards(r["grading"], [{"seq": s + 1} for s in range(r["engine_calls"])])[0]
            if r
            else []
            for r in rollouts
        ]
    else:
        raise ValueError(f"no per-token values for credit {credit!r}")
    out: list[list[float]] = []
    for start in range(0, len(rows), group_size):
        out.extend(turn_advantages(rows[start : start + group_size], gamma=gamma, scale=scale))
    return out


def rollout_token_advantages(
    *,
    credit: str,
    mask: Sequence[int],
    plan: Sequence[Mapping[str, Any]],
    values: Sequence[float],
    pieces: Callable[[int, int], list[str]] | None = None,
) -> list[float]:
    """One rollout's advantage per completion token (0 outside model tokens).

    ``plan``: ``plan_segments`` of its messages; ``values``: its turn or call advantages
    (``group_values``); ``pieces(start, end)``: the decoded text of each token in that range
    (needed for ``call`` credit)."""
    out = [0.0] * len(mask)
    if not values:
        return out
    for index, (start, end) in enumerate(model_segments(mask)):
        segment = plan[index] if index < len(plan) else None
        if credit == "turn":
            turn = segment["turn"] if segment else (plan[-1]["turn"] if plan else 0)
            value = values[min(turn, len(values) - 1)]
            out[start:end] = [value] * (end - start)
            continue
        calls = segment["calls"] if segment else []
        mine = [
            values[c["call"]] if c["call"] is not None and c["call"] < len(values) else 0.0
            for c in calls
        ]
        if not calls:
            continue  # a reply: 0
        spans = call_spans(pieces(start, end), [c["tool"] for c in calls]) if pieces else None
        if spans is None:
            engine = [v for v, c in zip(mine, calls, strict=True) if c["call"] is not None]
            mean = math.fsum(engine) / len(engine) if engine else 0.0
            out[start:end] = [mean] * (end - start)
            continue
        for (s, e), value in zip(spans, mine, strict=True):
            out[start + s : start + e] = [value] * (e - s)
    return out


# --- the trainer ----------------------------------------------------------------------------


def trainer_class(credit: str, *, gamma: float = 1.0, scale: bool = True):
    """TRL's ``GRPOTrainer`` for trajectory credit (exactly TRL's advantages), else a subclass
    that gives each completion token its turn's or call's advantage (``(B, T)``)."""
    import trl

    if credit == "trajectory":
        return trl.GRPOTrainer
    if credit not in ("turn", "call"):
        raise ValueError(f"unknown credit {credit!r}")

    class CreditGRPOTrainer(trl.GRPOTrainer):
        """``GRPOTrainer`` with per-turn or per-call credit (``apps.training.credit``)."""

        def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
            self._credit_completions = completions  # the message lists of this batch
            return super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)

        def _generate_and_score_completions(self, inputs):
            output = super()._generate_and_score_completions(inputs)
            output["advantages"] = self._token_advantages(output)
            return output

        def _token_advantages(self, output):
            import torch
            from accelerate.utils import gather_object

            completion_ids = output["completion_ids"]
            mask = output["completion_mask"]
            if "tool_mask" in output:
                mask = mask * output["tool_mask"]
            envs = self.environments
            group = self.num_generations if self.model.training else self.num_generations_eval
            rollouts = gather_object([rollout_credit(env) for env in envs])
            values = group_values(
                rollouts, credit=credit, group_size=group, gamma=gamma, scale=scale
            )
            offset = self.accelerator.process_index * len(envs)
            tokenizer = self.processing_class
            tokenizer = getattr(tokenizer, "tokenizer", tokenizer)  # a processor's
            rows = []
            for i, env in enumerate(envs):
                ids = completion_ids[i].tolist()
                plan = plan_segments(
                    self._credit_completions[i], getattr(env, "actions", []), tool_names(env)
                )

                def pieces(start, end, ids=ids):
                    return [tokenizer.decode([t]) for t in ids[start:end]]

                rows.append(
                    rollout_token_advantages(
                        credit=credit,
                        mask=mask[i].tolist(),
                        plan=plan,
                        values=values[offset + i],
                        pieces=pieces,
                    )
                )
            segments = sum(len(model_segments(m)) for m in mask.tolist())
            credited = sum(1 for row in rows for v in row if v != 0.0)
            logger.info(
                "credit %s: %d rollouts, %d model segments, %d tokens with a non-zero advantage",
                credit,
                len(rows),
                segments,
                credited,
            )
            return torch.tensor(rows, dtype=torch.float32, device=completion_ids.device)

    return CreditGRPOTrainer
