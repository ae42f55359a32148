"""Reward processing and credit assignment for RL on engine episodes (pure Python).

Scalar rewards of one episode (``episode_reward``), group advantages over the G rollouts of a
task (GRPO, Dr. GRPO, RLOO), batch-level variants (TRL's ``scale_rewards="batch"``,
REINFORCE++ global whitening) and per-turn credit (``turn_rewards`` from the graders due at
each turn, reward-to-go, terminal discounting, group-normalised turn advantages). The
formulas, with a worked example each, are in README.md ("Reward processing").

A reward of ``None`` (or NaN) marks an unscorable rollout (an infrastructure failure): it is
left out of every mean and standard deviation and its advantage is 0, as TRL does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from .scoring import COMPLETION_CATEGORIES, Grading

GRPO_EPS = 1e-4  # TRL's epsilon in (r - mean) / (std + eps)
WHITEN_EPS = 1e-8  # verl's epsilon in (x - mean) / sqrt(var + eps)

GROUP_METHODS = ("grpo", "dr_grpo", "rloo")
REWARD_VARIANTS = ("score", "raw", "passed", "strict")

Reward = float | int | None


def _scorable(r: Reward) -> bool:
    return r is not None and not (isinstance(r, float) and math.isnan(r))


def _mean(xs: Sequence[float]) -> float:
    return math.fsum(xs) / len(xs)


def sample_std(xs: Sequence[float]) -> float:
    """Bessel-corrected (n - 1) standard deviation; 0.0 for fewer than two values."""
    if len(xs) < 2:
        return 0.0
    m = _mean(xs)
    return math.sqrt(math.fsum((x - m) ** 2 for x in xs) / (len(xs) - 1))


# --------------------------------------------------------------------------- episode rewards


def _grading_dict(grading: Grading | Mapping[str, Any]) -> Mapping[str, Any]:
    return grading.to_dict() if isinstance(grading, Grading) else grading


def episode_reward(grading: Grading | Mapping[str, Any], variant: str = "score") -> float:
    """One scalar per episode.

    ``score``   the engine score (safety-gated): safety * (cw·completion + rw·robustness)
    ``raw``     the same without the safety gate: cw·completion + rw·robustness
    ``passed``  1.0 if score ≥ the pass threshold else 0.0
    ``strict``  1.0 if every non-skipped grader passed else 0.0
    """
    g = _grading_dict(grading)
    if variant == "score":
        return float(g["score"])
    if variant == "raw":
        cfg = g["config"]
        return round(
            cfg["completion_weight"] * g["completion"] + cfg["robustness_weight"] * g["robustness"],
            10,
        )
    if variant == "passed":
        return 1.0 if g["passed"] else 0.0
    if variant == "strict":
        return 1.0 if g["strict"] else 0.0
    raise ValueError(f"unknown reward variant {variant!r} (one of {', '.join(REWARD_VARIANTS)})")


# --------------------------------------------------------------------------- group advantages


def group_advantages(
    rewards: Sequence[Reward], method: str = "grpo", *, eps: float = GRPO_EPS
) -> list[float]:
    """Advantages of the G rollouts of one task.

    ``grpo``     (r - μ) / (std + eps), std Bessel-corrected (TRL; G = 1 → 0)
    ``dr_grpo``  r - μ (no std scaling)
    ``rloo``     r - mean of the other rollouts = G/(G - 1)·(r - μ) (G = 1 → 0)
    μ and std are over the scorable rewards; unscorable ones get 0.
    """
    if method not in GROUP_METHODS:
        raise ValueError(f"unknown method {method!r} (one of {', '.join(GROUP_METHODS)})")
    scored = [float(r) for r in rewards if _scorable(r)]
    if not scored:
        return [0.0 for _ in rewards]
    mu = _mean(scored)
    n = len(scored)
    if method == "grpo":
        sigma = sample_std(scored)
        return [(float(r) - mu) / (sigma + eps) if _scorable(r) else 0.0 for r in rewards]
    if method == "dr_grpo":
        return [float(r) - mu if _scorable(r) else 0.0 for r in rewards]
    if n < 2:
        return [0.0 for _ in rewards]
    total = math.fsum(scored)
    return [float(r) - (total - float(r)) / (n - 1) if _scorable(r) else 0.0 for r in rewards]


def rloo_baselines(rewards: Sequence[float]) -> list[float]:
    """The leave-one-out baseline of each rollout: the mean reward of the others."""
    if len(rewards) < 2:
        return [0.0 for _ in rewards]
    total = math.fsum(rewards)
    return [(total - r) / (len(rewards) - 1) for r in rewards]


def batch_scaled_advantages(
    groups: Sequence[Sequence[Reward]], *, eps: float = GRPO_EPS
) -> list[list[float]]:
    """TRL ``scale_rewards="batch"``:
    (r - μ_group) / (std of every raw reward in the batch + eps)."""
    every = [float(r) for g in groups for r in g if _scorable(r)]
    sigma = sample_std(every)
    out = []
    for g in groups:
        centred = group_advantages(g, "dr_grpo")
        out.append([a / (sigma + eps) for a in centred])
    return out


def reinforce_pp_advantages(
    groups: Sequence[Sequence[Reward]],
    *,
    baseline: bool = True,
    token_counts: Sequence[Sequence[int]] | None = None,
    eps: float = WHITEN_EPS,
) -> list[list[float]]:
    """REINFORCE++ global normalisation (gamma = 1, reward on the last token).

    With ``baseline`` (verl ``reinforce_plus_plus_baseline``) each reward is first centred on
    its group mean; then every value is whitened over all valid tokens of the batch:
    (x - mean) / sqrt(var + eps), var Bessel-corrected. ``token_counts`` (per rollout, default
    1) weight each rollout by its number of model tokens, as token-level whitening does.
    Unscorable rollouts take no part and get 0.
    """
    values: list[list[float | None]] = []
    for g in groups:
        if baseline:
            centred = group_advantages(g, "dr_grpo")
            values.append([c if _scorable(r) else None for r, c in zip(g, centred, strict=True)])
        else:
            values.append([float(r) if _scorable(r) else None for r in g])
    counts = token_counts or [[1] * len(g) for g in groups]
    tokens: list[float] = []
    for row, row_counts in zip(values, counts, strict=True):
        for v, c in zip(row, row_counts, strict=True):
            if v is not None:
                tokens.extend([v] * int(c))
    if not tokens:
        return [[0.0] * len(g) for g in groups]
    m = _mean(tokens)
    var = sample_std(tokens) ** 2
    scale = math.sqrt(var + eps)
    return [[(v - m) / scale if v is not None else 0.0 for v in row] for row in values]


# --------------------------------------------------------------------------- credit assignment


def reward_to_go(rewards: Sequence[float], gamma: float = 1.0) -> list[float]:
    """G_k = Σ_{j ≥ k} gamma^(j - k) · r_j."""
    out = [0.0] * len(rewards)
    running = 0.0
    for k in range(len(rewards) - 1, -1, -1):
        running = float(rewards[k]) + gamma * running
        out[k] = running
    return out


def discounted_terminal(final_reward: float, steps: int, gamma: float) -> list[float]:
    """OpenEnv's exponential discounting: step t of T gets gamma^(T - 1 - t) · R_final."""
    return [gamma ** (steps - 1 - t) * float(final_reward) for t in range(steps)]


def turn_credit(grading: Grading | Mapping[str, Any], turn: int) -> float:
    """The score share of the completion/communication graders due at ``turn`` (``at_turn``)
    that passed: completion_weight * their passed weight / all scored completion weight."""
    g = _grading_dict(grading)
    scored = [
        v
        for v in g["verdicts"]
        if v["category"] in COMPLETION_CATEGORIES and v["status"] != "skipped"
    ]
    total = math.fsum(v["weight"] for v in scored)
    if total <= 0:
        return 0.0
    passed = math.fsum(
        v["weight"] for v in scored if v.get("at_turn") == turn and v["status"] == "passed"
    )
    return round(g["config"]["completion_weight"] * passed / total, 10)


def turn_rewards(grading: Grading | Mapping[str, Any], n_turns: int) -> list[float]:
    """Per-turn rewards that sum to the episode score.

    Turn k < last gets ``turn_credit(grading, k)`` (its graders with ``at_turn: k``); the last
    turn gets the rest, score - Σ earlier, which holds the final graders, robustness and the
    safety gate (negative when a safety failure takes away credit earned earlier). The
    environment server sends turn k's reward when turn k ends, from the same verdicts.
    """
    if n_turns < 1:
        raise ValueError("an episode has at least one turn")
    g = _grading_dict(grading)
    early = [turn_credit(g, k) for k in range(n_turns - 1)]
    return [*early, round(float(g["score"]) - math.fsum(early), 10)]


def turn_advantages(
    group_turn_rewards: Sequence[Sequence[float]],
    *,
    gamma: float = 1.0,
    scale: bool = True,
    per_turn: bool = True,
    eps: float = GRPO_EPS,
) -> list[list[float]]:
    """Group-normalised reward-to-go per turn for the G rollouts of one task.

    Each rollout's returns G_k = reward_to_go(turn rewards, gamma) are normalised across the
    group, per turn index (``per_turn``; rollouts that did not reach turn k take no part) or
    over all turns of the group together: (G - μ) / (std + eps) with ``scale``, else G - μ.
    Turn k's model tokens take advantage [i][k].
    """
    returns = [reward_to_go(r, gamma) for r in group_turn_rewards]
    method = "grpo" if scale else "dr_grpo"
    if not per_turn:
        flat = [x for row in returns for x in row]
        adv = group_advantages(flat, method, eps=eps)
        out, i = [], 0
        for row in returns:
            out.append(adv[i : i + len(row)])
            i += len(row)
        return out
    out = [[0.0] * len(row) for row in returns]
    for k in range(max((len(row) for row in returns), default=0)):
        members = [i for i, row in enumerate(returns) if k < len(row)]
        adv = group_advantages([returns[i][k] for i in members], method, eps=eps)
        for i, a in zip(members, adv, strict=True):
            out[i][k] = a
    return out


# --------------------------------------------------------------------------- per-call credit


def _is_call_brief(item: Any) -> bool:
    return isinstance(item, Mapping) and {"seq", "tool", "turn", "ok"} <= set(item)


def cited_calls(evidence: Any) -> list[int]:
    """The audit ``seq`` of every call a verdict's evidence cites, in order, once each: the
    call briefs a ``tool_call`` check matched, at any depth (``all``/``any``/``not``
    combinators, clipped lists). ``before``/``after`` seqs only order other calls: not cited.
    """
    found: list[int] = []

    def walk(node: Any) -> None:
        if _is_call_brief(node):
            if node["seq"] not in found:
                found.append(node["seq"])
        elif isinstance(node, Mapping):
            for key, value in node.items():
                if key not in ("before", "after"):
                    walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(evidence)
    return found


def call_rewards(
    grading: Grading | Mapping[str, Any], audit_log: Sequence[Mapping[str, Any]]
) -> tuple[list[float], float]:
    """Per-call credit: each tool call (audit entry, in order) is credited by the checks whose
    evidence cites it. Returns (one reward per call, the unattributed rest).

    A passed completion/communication verdict's score share cw·w/W (as in ``turn_credit``)
    is split equally among the calls it cites; a failed safety verdict charges the credit
    the gate took away, -(cw·completion + rw·robustness), split equally among the failed
    safety verdicts that cite calls and then among their calls. Verdicts that cite no call
    (state, response, judge checks), robustness, and a gate nobody's calls explain stay
    ``unattributed`` = score - Σ call rewards, so calls + unattributed = score.
    """
    g = _grading_dict(grading)
    seqs = [entry["seq"] for entry in audit_log]
    position = {seq: i for i, seq in enumerate(seqs)}
    credit = [0.0] * len(seqs)
    scored = [
        v
        for v in g["verdicts"]
        if v["category"] in COMPLETION_CATEGORIES and v["status"] != "skipped"
    ]
    total = math.fsum(v["weight"] for v in scored)
    cw = g["config"]["completion_weight"]

    def spread(amount: float, cited: list[int]) -> None:
        for seq in cited:
            credit[position[seq]] += amount / len(cited)

    if total > 0:
        for v in scored:
            cited = [s for s in cited_calls(v["evidence"]) if s in position]
            if v["status"] == "passed" and cited:
                spread(cw * v["weight"] / total, cited)
    if g["safety"] == 0:
        blamed = []
        for v in g["verdicts"]:
            if v["category"] == "safety" and v["status"] == "failed":
                cited = [s for s in cited_calls(v["evidence"]) if s in position]
                if cited:
                    blamed.append(cited)
        lost = episode_reward(g, "raw")
        for cited in blamed:
            spread(-lost / len(blamed), cited)
    rewards = [round(c, 10) for c in credit]
    return rewards, round(float(g["score"]) - math.fsum(rewards), 10)


# --------------------------------------------------------------------------- a whole group

ADVANTAGE_METHODS = GROUP_METHODS
CREDIT_METHODS = ("grpo", "dr_grpo")  # per-turn, per-call advantages: std-scaled or not


def group_table(
    episodes: Sequence[Mapping[str, Any] | None], *, gamma: float = 1.0
) -> dict[str, Any]:
    """Every reward and advantage variant of one group, side by side (plain data to store).

    ``episodes``: the G rollouts in order, each ``{"grading", "n_turns", "audit_log"}``
    (``grading`` as ``Grading.to_dict()``) or ``None`` for an unscorable rollout (errored,
    cancelled): its rewards are ``None`` and every advantage 0.

    Returns ``rewards[variant][i]`` (the four ``REWARD_VARIANTS``),
    ``advantages[variant][method][i]`` (``GROUP_METHODS`` on each reward variant),
    ``turn_rewards[i]`` / ``turn_advantages[method][i][k]`` (reward-to-go with ``gamma``,
    normalised per turn index), ``call_rewards[i][j]`` / ``call_unattributed[i]`` /
    ``call_advantages[method][i][j]`` (reward-to-go over the calls, normalised per call
    index across the group, as turns are: identical rollouts get 0), for
    ``CREDIT_METHODS``; ``gamma``.
    """
    if not 0.0 <= gamma <= 1.0:
        raise ValueError("gamma must be between 0 and 1")
    rewards: dict[str, list[float | None]] = {
        variant: [episode_reward(e["grading"], variant) if e else None for e in episodes]
        for variant in REWARD_VARIANTS
    }
    advantages = {
        variant: {m: group_advantages(rewards[variant], m) for m in ADVANTAGE_METHODS}
        for variant in REWARD_VARIANTS
    }
    turns = [turn_rewards(e["grading"], max(1, e["n_turns"])) if e else [] for e in episodes]
    calls, unattributed = [], []
    for e in episodes:
        if e:
            per_call, rest = call_rewards(e["grading"], e["audit_log"])
        else:
            per_call, rest = [], None
        calls.append(per_call)
        unattributed.append(rest)
    return {
        "gamma": gamma,
        "rewards": rewards,
        "advantages": advantages,
        "turn_rewards": turns,
        "turn_advantages": {
            m: turn_advantages(turns, gamma=gamma, scale=m == "grpo") for m in CREDIT_METHODS
        },
        "call_rewards": calls,
        "call_unattributed": unattributed,
        "call_advantages": {
            m: turn_advantages(calls, gamma=gamma, scale=m == "grpo") for m in CREDIT_METHODS
        },
    }
