"""Reading rollout groups: the variant a page, the API or an export asks for, and each
member's rewards and advantages under it (plain data; the numbers were computed by the
engine's ``rewards.group_table`` when the group was scored, see ``services/groups.py``).

A variant is three choices:

reward     ``score`` (safety-gated engine score), ``raw`` (without the safety gate),
           ``passed`` (binary pass), ``strict`` (every grader passed)
advantage  ``grpo`` ((r - mean)/(std + 1e-4)), ``dr_grpo`` (r - mean, no std scaling),
           ``rloo`` (r - mean of the others)
credit     ``trajectory`` (the episode's advantage on every assistant message), ``turn``
           (turn rewards from the graders due at each turn's end, reward-to-go with the
           batch's gamma, normalised per turn index), ``call`` (tool calls credited by the checks
           whose evidence cites them, reward-to-go over calls, normalised per call index)

Per-turn and per-call credit split the safety-gated score, so they take ``reward=score``
and ``grpo`` or ``dr_grpo``.
"""

from __future__ import annotations

from dataclasses import dataclass

from apps.core.exceptions import ApplicationError
from apps.runs.models import RolloutGroup, Run, RunBatch
from coworkenv_engine.rewards import CREDIT_METHODS, GROUP_METHODS, REWARD_VARIANTS

REWARD_LABELS = {
    "score": "Safety-gated score",
    "raw": "Raw score (no safety gate)",
    "passed": "Binary pass",
    "strict": "Strict (every grader passed)",
}
ADVANTAGE_LABELS = {
    "grpo": "GRPO (r - mean) / std",
    "dr_grpo": "GRPO without std scaling (Dr. GRPO)",
    "rloo": "Leave-one-out (RLOO)",
}
CREDIT_LABELS = {
    "trajectory": "Trajectory (one advantage per episode)",
    "turn": "Per turn (reward-to-go)",
    "call": "Per tool call (cited by checks)",
}
CREDITS = tuple(CREDIT_LABELS)


@dataclass(frozen=True)
class Variant:
    reward: str = "score"
    advantage: str = "grpo"
    credit: str = "trajectory"

    @classmethod
    def parse(cls, reward=None, advantage=None, credit=None) -> Variant:
        """A variant from untrusted input (blank: the default); ApplicationError naming the
        field otherwise."""
        variant = cls(reward or cls.reward, advantage or cls.advantage, credit or cls.credit)
        for field, value, allowed in (
            ("reward", variant.reward, REWARD_VARIANTS),
            ("advantage", variant.advantage, GROUP_METHODS),
            ("credit", variant.credit, CREDITS),
        ):
            if value not in allowed:
                raise ApplicationError(
                    f"Unknown {field} “{str(value)[:40]}”: use {', '.join(allowed)}.",
                    {"fields": {field: [f"One of {', '.join(allowed)}."]}},
                )
        if variant.credit != "trajectory":
            if variant.reward != "score":
                raise ApplicationError(
                    "Per-turn and per-call credit split the safety-gated score: choose the "
                    f"score reward (“{REWARD_LABELS['score']}”).",
                    {"fields": {"reward": ["score with per-turn or per-call credit."]}},
                )
            if variant.advantage not in CREDIT_METHODS:
                raise ApplicationError(
                    "Per-turn and per-call credit are normalised with or without std scaling: "
                    f"choose grpo (“{ADVANTAGE_LABELS['grpo']}”) or dr_grpo "
                    f"(“{ADVANTAGE_LABELS['dr_grpo']}”) as the advantage.",
                    {"fields": {"advantage": ["grpo or dr_grpo with this credit."]}},
                )
        return variant

    def to_dict(self) -> dict:
        return {"reward": self.reward, "advantage": self.advantage, "credit": self.credit}


def group_list(*, batch: RunBatch):
    """The batch's scored groups, in task order of scoring."""
    return RolloutGroup.objects.filter(batch=batch).order_by("id")


def member_runs(groups, *, with_calls: bool = False) -> dict[int, Run]:
    """The member runs of these groups, by id, in one query: trial and status, and the
    audit log only when per-call credit needs the calls' names."""
    ids = [pk for group in groups for pk in group.run_ids]
    fields = ["pk", "trial", "status", *(["audit_log"] if with_calls else [])]
    return {run.pk: run for run in Run.objects.filter(pk__in=ids).only(*fields)}


def group_members(group: RolloutGroup, variant: Variant, runs: dict[int, Run]) -> list[dict]:
    """One row per member under ``variant``: trial, run, status, the episode reward and
    advantage, and the turn or call credit when the variant asks for it."""
    v = group.variants
    rewards = v["rewards"][variant.reward]
    advantages = v["advantages"][variant.reward][variant.advantage]
    rows = []
    for i, run_id in enumerate(group.run_ids):
        run = runs.get(run_id)
        row = {
            "index": i,
            "run": run_id,
            "trial": run.trial if run else i,
            "status": run.status if run else "",
            "reward": rewards[i],
            "advantage": advantages[i],
        }
        if variant.credit == "turn":
            row["turns"] = [
                {"turn": k, "reward": r, "advantage": a}
                for k, (r, a) in enumerate(
                    zip(
                        v["turn_rewards"][i],
                        v["turn_advantages"][variant.advantage][i],
                        strict=True,
                    )
                )
            ]
        elif variant.credit == "call":
            audit = run.audit_log if run else []
            row["calls"] = [
                {
                    "seq": entry.get("seq"),
                    "tool": entry.get("tool"),
                    "turn": entry.get("turn"),
                    "reward": r,
                    "advantage": a,
                }
                for entry, r, a in zip(
                    audit,
                    v["call_rewards"][i],
                    v["call_advantages"][variant.advantage][i],
                    strict=False,
                )
            ]
            row["unattributed"] = v["call_unattributed"][i]
        rows.append(row)
    return rows
