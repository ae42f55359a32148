"""Evaluation figures from run rows: plain functions over dicts, no database.

Only *graded* runs (status ``succeeded``) count: an errored trial is an infrastructure
failure, never an agent failure, and is reported separately. pass@k and pass^k are computed
per task from its graded trials (the engine's estimators) and averaged over the tasks that
have at least k of them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable

from apps.environments.horizon import DAY_BUCKETS, TURN_BUCKETS, UNKNOWN, bucket, task_horizon
from coworkenv_engine.scoring import pass_at_k, pass_hat_k

__all__ = ["DAY_BUCKETS", "TURN_BUCKETS", "task_horizon"]  # the evaluation groups runs by them

GRADED = "succeeded"
CATEGORIES = ("completion", "communication", "safety", "robustness")


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def task_key_of(run: dict) -> int:
    return run["task_ref"]


def outcome_stats(runs: list[dict], *, k_max: int | None = None) -> dict:
    """Average score, pass and strict rates, and pass@k / pass^k for k = 1..k_max over the
    graded runs given (the rows of any group: a batch, a capability, a model)."""
    graded = [r for r in runs if r["status"] == GRADED]
    per_task: dict[int, list[dict]] = defaultdict(list)
    for run in graded:
        per_task[task_key_of(run)].append(run)
    k_max = k_max or max((len(v) for v in per_task.values()), default=0)
    at_k, hat_k = {}, {}
    for k in range(1, k_max + 1):
        eligible = [
            (len(trials), sum(1 for t in trials if t["passed"]))
            for trials in per_task.values()
            if len(trials) >= k
        ]
        at_k[k] = _mean([pass_at_k(n, c, k) for n, c in eligible])
        hat_k[k] = _mean([pass_hat_k(n, c, k) for n, c in eligible])
    return {
        "runs": len(runs),
        "graded": len(graded),
        "tasks": len(per_task),
        "average_score": _mean([float(r["score"]) for r in graded]),
        "pass_rate": _mean([1.0 if r["passed"] else 0.0 for r in graded]),
        "strict_rate": _mean([1.0 if r["strict"] else 0.0 for r in graded]),
        "pass_at_k": at_k,
        "pass_hat_k": hat_k,
    }


def grouped(
    runs: Iterable[dict], key: Callable[[dict], Iterable[str]], *, k_max: int | None = None
) -> list[dict]:
    """``outcome_stats`` per group; ``key`` gives the groups of a run (a run with several
    capabilities counts in each)."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for run in runs:
        for name in key(run):
            groups[name].append(run)
    return [
        {"name": name, **outcome_stats(rows, k_max=k_max)} for name, rows in sorted(groups.items())
    ]


def category_stats(runs: Iterable[dict]) -> list[dict]:
    """Per grader category: how many verdicts passed, failed or were skipped."""
    counts = {c: {"passed": 0, "failed": 0, "skipped": 0} for c in CATEGORIES}
    for run in runs:
        if run["status"] != GRADED:
            continue
        for verdict in run.get("verdicts") or []:
            bucket = counts.setdefault(
                verdict.get("category", "completion"), {"passed": 0, "failed": 0, "skipped": 0}
            )
            status = verdict.get("status")
            if status in bucket:
                bucket[status] += 1
    rows = []
    for category, c in counts.items():
        decided = c["passed"] + c["failed"]
        rows.append(
            {
                "name": category,
                **c,
                "verdicts": decided + c["skipped"],
                "pass_rate": c["passed"] / decided if decided else None,
            }
        )
    return rows


def failing_graders(runs: Iterable[dict], *, limit: int = 20) -> list[dict]:
    """The failure taxonomy: graders ordered by how often they failed, with the runs."""
    table: dict[tuple, dict] = {}
    for run in runs:
        if run["status"] != GRADED:
            continue
        for verdict in run.get("verdicts") or []:
            if verdict.get("status") == "skipped":
                continue
            key = (run["task_ref"], verdict.get("grader_id"))
            row = table.get(key)
            if row is None:
                row = table[key] = {
                    "task_ref": run["task_ref"],
                    "task_key": run["task_key"],
                    "environment_id": run.get("environment_id"),
                    "environment_name": run.get("environment_name", ""),
                    "grader_id": verdict.get("grader_id"),
                    "category": verdict.get("category", ""),
                    "failed": 0,
                    "total": 0,
                    "run_ids": [],
                }
            row["total"] += 1
            if verdict.get("status") == "failed":
                row["failed"] += 1
                row["run_ids"].append(run["id"])
    rows = [r for r in table.values() if r["failed"]]
    for row in rows:
        row["rate"] = row["failed"] / row["total"]
    rows.sort(key=lambda r: (-r["failed"], -r["rate"], r["task_key"], r["grader_id"] or ""))
    return rows[:limit]


def horizon_stats(runs: list[dict], field: str, *, k_max: int | None = None) -> list[dict]:
    """``outcome_stats`` per horizon bucket of ``field`` ("turns" or "days"), in bucket order,
    leaving out empty buckets. Rows carry ``field`` (``selectors`` adds it from the task)."""
    buckets = TURN_BUCKETS if field == "turns" else DAY_BUCKETS
    groups: dict[str, list[dict]] = defaultdict(list)
    for run in runs:
        groups[bucket(run.get(field), buckets)].append(run)
    order = [label for label, _ in buckets] + [UNKNOWN]
    return [
        {"name": label, **outcome_stats(groups[label], k_max=k_max)}
        for label in order
        if groups.get(label)
    ]


def status_counts(runs: Iterable[dict], *, max_attempts: int | None = None) -> dict:
    counts = {"pending": 0, "running": 0, "succeeded": 0, "errored": 0, "cancelled": 0}
    for run in runs:
        counts[run["status"]] = counts.get(run["status"], 0) + 1
    return counts


def batch_evaluation(runs: list[dict], *, trials: int) -> dict:
    """Everything the batch and evaluation pages show, from the batch's final runs."""
    return {
        "summary": outcome_stats(runs, k_max=trials),
        "by_capability": grouped(runs, lambda r: r.get("capabilities") or ["(none)"], k_max=trials),
        "by_split": grouped(runs, lambda r: [r.get("split") or "(none)"], k_max=trials),
        "by_turns": horizon_stats(runs, "turns", k_max=trials),
        "by_days": horizon_stats(runs, "days", k_max=trials),
        "by_category": category_stats(runs),
        "by_task": grouped(
            runs, lambda r: [f"{r.get('environment_name', '')} · {r['task_key']}"], k_max=trials
        ),
        "failing_graders": failing_graders(runs),
        "tool_error_runs": sum(
            1 for r in runs if r["status"] == GRADED and r.get("tool_errors", 0) > 0
        ),
    }
