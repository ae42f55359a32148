"""Rollout groups: score the G runs of one task in a student batch together, once every one
of them is final, with every reward-processing and credit-assignment variant side by side.

The formulas are the engine's (``coworkenv_engine.rewards.group_table``); this module
only gathers the members (each trial's final attempt, in trial order), hands their gradings,
turn counts and audit logs to the engine, and stores what it returns. Scoring is idempotent
(one row per (batch, task), updated in place), so the run that closes a group, a redelivered
message and the batch's finishing pass may all call it.
"""

from __future__ import annotations

from django.db import transaction

from apps.runs.models import RolloutGroup, Run, RunBatch, RunStatus
from coworkenv_engine.rewards import group_table, sample_std
from coworkenv_engine.scoring import ScoringConfig

DEFAULT_SCORING = {
    "completion_weight": ScoringConfig.completion_weight,
    "robustness_weight": ScoringConfig.robustness_weight,
    "pass_threshold": ScoringConfig.pass_threshold,
}


def _final_members(batch: RunBatch, runs: list[Run]) -> dict[int, Run]:
    """Each trial's final attempt (the run that closes its slot), by trial."""
    members: dict[int, Run] = {}
    for run in sorted(runs, key=lambda r: (r.trial, r.attempt)):
        final = run.status in (RunStatus.SUCCEEDED, RunStatus.CANCELLED) or (
            run.status == RunStatus.ERRORED
            and (not run.retryable or run.attempt >= batch.max_attempts)
        )
        if final:
            members[run.trial] = run
    return members


def _scoring(run: Run) -> dict:
    """The grading's weights: stored with the run, else (runs graded before they were kept)
    the task's overrides over the defaults."""
    if run.scoring:
        return run.scoring
    overrides = (run.task.scoring or {}) if run.task is not None else {}
    return {
        k: overrides.get(k) if overrides.get(k) is not None else v
        for k, v in DEFAULT_SCORING.items()
    }


def _episode(run: Run) -> dict | None:
    if run.status != RunStatus.SUCCEEDED or run.score is None:
        return None
    return {
        "grading": {
            "score": run.score,
            "passed": bool(run.passed),
            "strict": bool(run.strict),
            "completion": run.completion,
            "safety": run.safety,
            "robustness": run.robustness,
            "config": _scoring(run),
            "verdicts": run.verdicts,
        },
        "n_turns": sum(1 for m in run.transcript if m.get("role") == "user"),
        "audit_log": run.audit_log,
    }


@transaction.atomic
def rollout_group_score(*, batch: RunBatch, task_ref: int) -> RolloutGroup | None:
    """Score the group of ``task_ref`` in ``batch`` if all its G members are final; returns
    the group, or None (no groups in this batch, or members still to come)."""
    if not batch.group_size:
        return None
    runs = list(Run.objects.filter(batch=batch, task_ref=task_ref).select_related("task"))
    members = _final_members(batch, runs)
    if len(members) < batch.group_size or not runs:
        return None
    ordered = [members[trial] for trial in sorted(members)]
    episodes = [_episode(run) for run in ordered]
    table = group_table(episodes, gamma=batch.discount)
    scores = [r for r in table["rewards"]["score"] if r is not None]
    passes = [r for r in table["rewards"]["passed"] if r is not None]
    first = ordered[0]
    group, _ = RolloutGroup.objects.update_or_create(
        batch=batch,
        task_ref=task_ref,
        defaults={
            "project_id": batch.project_id,
            "task_key": first.task_key,
            "task_title": first.task_title,
            "environment_name": first.environment_name,
            "size": len(ordered),
            "run_ids": [run.pk for run in ordered],
            "scorable": len(scores),
            "mean_score": round(sum(scores) / len(scores), 10) if scores else None,
            "score_std": round(sample_std(scores), 10) if scores else None,
            "pass_rate": round(sum(passes) / len(passes), 10) if passes else None,
            "variants": table,
        },
    )
    return group


def rollout_groups_score(*, batch: RunBatch) -> int:
    """Score every complete group of the batch not scored yet (the batch's finishing pass, a
    safety net for a run whose own scoring call was lost). Returns how many were scored."""
    if not batch.group_size:
        return 0
    done = set(batch.groups.values_list("task_ref", flat=True))
    scored = 0
    for task_ref in batch.task_ids:
        if task_ref not in done and rollout_group_score(batch=batch, task_ref=task_ref):
            scored += 1
    return scored
