"""Reads for batches, runs, evaluation and the leaderboard (query counts stay flat)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from django.db.models import Count, F, Max, Q, QuerySet
from django.urls import reverse
from django.utils import timezone

from apps.capabilities.models import Capability
from apps.core.leases import stale_after
from apps.core.safeinput import parse_id
from apps.environments.models import Task
from apps.runs.evaluation import batch_evaluation, outcome_stats, task_horizon
from apps.runs.models import Run, RunBatch, RunStatus
from apps.runs.services.progress import final_runs_q

EVAL_FIELDS = (
    "id",
    "batch_id",
    "task_ref",
    "task_key",
    "environment_id",
    "environment_name",
    "split",
    "capabilities",
    "trial",
    "attempt",
    "status",
    "score",
    "passed",
    "strict",
    "verdicts",
    "tool_errors",
)


def batch_list(*, project) -> QuerySet[RunBatch]:
    return (
        RunBatch.objects.filter(project=project)
        .select_related("job", "endpoint", "created_by")
        .annotate(
            graded=Count("runs", filter=Q(runs__status=RunStatus.SUCCEEDED)),
            passed_runs=Count(
                "runs", filter=Q(runs__status=RunStatus.SUCCEEDED, runs__passed=True)
            ),
        )
        .order_by("-created_at", "-id")
    )


def with_horizon(rows: list[dict]) -> list[dict]:
    """Add each row's task horizon (``turns``, ``days``: ``evaluation.task_horizon``) from one
    query over the tasks; a deleted task leaves both None."""
    refs = {row["task_ref"] for row in rows}
    horizons = {
        task["pk"]: task_horizon(task["turns"], task["environment__clock"])
        for task in Task.objects.filter(pk__in=refs).values("pk", "turns", "environment__clock")
    }
    for row in rows:
        row.update(horizons.get(row["task_ref"], {"turns": None, "days": None}))
    return rows


def batch_final_rows(*, batch: RunBatch) -> list[dict]:
    """The run that closes each slot (the latest attempt), as dicts for the evaluation."""
    rows = list(Run.objects.filter(batch=batch).filter(final_runs_q(batch)).values(*EVAL_FIELDS))
    return with_horizon(rows)


def _final_rows_by_batch(batches: list[RunBatch]) -> dict[int, list[dict]]:
    """``batch_final_rows`` for many batches in one query (``final_runs_q`` with each run's
    own batch's ``max_attempts``), so evaluation pages do not query once per batch."""
    rows: dict[int, list[dict]] = defaultdict(list)
    if not batches:
        return rows
    final = (
        Q(status__in=[RunStatus.SUCCEEDED, RunStatus.CANCELLED])
        | Q(status=RunStatus.ERRORED, retryable=False)
        | Q(status=RunStatus.ERRORED, attempt__gte=F("batch__max_attempts"))
    )
    runs = Run.objects.filter(batch_id__in=[b.pk for b in batches]).filter(final)
    for row in with_horizon(list(runs.values(*EVAL_FIELDS))):
        rows[row["batch_id"]].append(row)
    return rows


def batch_metrics(*, batch: RunBatch) -> dict:
    rows = batch_final_rows(batch=batch)
    evaluation = batch_evaluation(rows, trials=batch.trials)
    evaluation["counts"] = batch_status_counts(batch=batch)
    return evaluation


def batch_status_counts(*, batch: RunBatch, now=None) -> dict:
    """The batch's progress from one query over its runs, so every figure on the page agrees:
    runs per status (every attempt), ``closed`` trials (a final run: graded, cancelled, or
    errored with no attempt left) out of ``slots``, re-runs, and whether the batch is
    ``stalled`` (active, yet nothing has moved for ``JOB_STALE_AFTER_S``: the sweeper is not
    running or no worker is, the only time Resume helps)."""
    job = batch.job
    aggregates = {status: Count("id", filter=Q(status=status)) for status in RunStatus.values}
    row = Run.objects.filter(batch=batch).aggregate(
        **aggregates,
        closed=Count("id", filter=final_runs_q(batch)),
        retried=Count("id", filter=Q(attempt__gt=1)),
        last_heartbeat=Max("heartbeat_at"),
    )
    counts = {status: row[status] for status in RunStatus.values}
    counts["by_status"] = [(s, counts[s]) for s in RunStatus.values if counts[s]]
    counts["attempts"] = sum(counts[s] for s in RunStatus.values)
    counts["retried"] = row["retried"]
    counts["slots"] = batch.slot_count
    counts["closed"] = min(row["closed"], counts["slots"])
    moments = [m for m in (job.created_at, job.heartbeat_at, row["last_heartbeat"]) if m]
    now = now or timezone.now()
    counts["stalled"] = bool(
        job.is_active and not job.cancel_requested and now - max(moments) > stale_after()
    )
    return counts


@dataclass(frozen=True)
class RunFilters:
    batch: int | None = None
    task: int | None = None
    status: str = ""
    passed: bool | None = None
    policy: str = ""
    grader: str = ""
    failed_only: bool = False

    @classmethod
    def from_query(cls, params) -> RunFilters:
        def number(name):
            value = params.get(name, "")
            return parse_id(value)

        passed = params.get("passed", "")
        return cls(
            batch=number("batch"),
            task=number("task"),
            status=params.get("status", "") if params.get("status") in RunStatus.values else "",
            passed={"true": True, "false": False}.get(str(passed).lower()),
            policy=params.get("policy", "").strip()[:200],
            grader=params.get("grader", "").strip()[:100],
        )


def run_list(*, project, filters: RunFilters | None = None) -> QuerySet[Run]:
    filters = filters or RunFilters()
    runs = Run.objects.filter(project=project).select_related("batch")
    if filters.batch is not None:
        runs = runs.filter(batch_id=filters.batch)
    if filters.task is not None:
        runs = runs.filter(task_ref=filters.task)
    if filters.status:
        runs = runs.filter(status=filters.status)
    if filters.passed is not None:
        runs = runs.filter(passed=filters.passed)
    if filters.policy:
        runs = runs.filter(policy_name=filters.policy)
    return runs.defer("transcript", "tools", "audit_log", "exogenous_log", "verdicts").order_by(
        "-batch_id", "id"
    )


def environment_runs(*, environment, filters: RunFilters | None = None) -> QuerySet[Run]:
    """The environment's runs, newest first, by batch, policy and status when asked."""
    filters = filters or RunFilters()
    runs = Run.objects.filter(project_id=environment.project_id, environment=environment)
    if filters.batch is not None:
        runs = runs.filter(batch_id=filters.batch)
    if filters.status:
        runs = runs.filter(status=filters.status)
    if filters.policy:
        runs = runs.filter(policy_name=filters.policy)
    return (
        runs.select_related("batch")
        .defer("transcript", "tools", "audit_log", "exogenous_log", "verdicts")
        .order_by("-batch_id", "-id")
    )


def environment_run_choices(*, environment) -> dict:
    """What the environment's runs filter by: their batches (newest first) and policies."""
    runs = Run.objects.filter(project_id=environment.project_id, environment=environment)
    batch_ids = runs.values("batch_id").distinct()
    return {
        "batches": list(
            RunBatch.objects.filter(pk__in=batch_ids).order_by("-pk").values_list("pk", "name")
        ),
        "policies": sorted(
            set(runs.exclude(policy_name="").values_list("policy_name", flat=True).distinct())
        ),
    }


def runs_failing_grader(*, batch: RunBatch, task_ref: int, grader: str) -> list[int]:
    rows = Run.objects.filter(batch=batch, task_ref=task_ref, status=RunStatus.SUCCEEDED).values(
        "id", "verdicts"
    )
    return [
        row["id"]
        for row in rows
        if any(
            v.get("grader_id") == grader and v.get("status") == "failed" for v in row["verdicts"]
        )
    ]


def grader_anchors(*, run: Run) -> dict[str, str]:
    """Links from each grader id to its place on the environment's tasks tab
    (``#task-<i>-grader-<j>``), when the task still exists."""
    if run.task_id is None or run.environment_id is None:
        return {}
    task_ids = list(
        Task.objects.filter(environment_id=run.environment_id)
        .order_by("position", "id")
        .values_list("id", flat=True)
    )
    if run.task_id not in task_ids:
        return {}
    t = task_ids.index(run.task_id)
    base = reverse("environments:tab", args=[run.environment_id, "tasks"])
    keys = run.task.graders.order_by("position", "id").values_list("key", flat=True)
    return {key: f"{base}#task-{t}-grader-{j}" for j, key in enumerate(keys)}


def task_anchor(*, run: Run) -> str | None:
    if run.task_id is None or run.environment_id is None:
        return None
    task_ids = list(
        Task.objects.filter(environment_id=run.environment_id)
        .order_by("position", "id")
        .values_list("id", flat=True)
    )
    if run.task_id not in task_ids:
        return None
    base = reverse("environments:tab", args=[run.environment_id, "tasks"])
    return f"{base}#task-{task_ids.index(run.task_id)}"


def sibling_runs(*, run: Run, limit: int = 20) -> list[Run]:
    """Other graded runs of the same task (any batch of the project): comparison partners."""
    return list(
        Run.objects.filter(project_id=run.project_id, task_key=run.task_key)
        .filter(environment_id=run.environment_id)
        .exclude(pk=run.pk)
        .select_related("batch")
        .only(
            "id",
            "trial",
            "attempt",
            "status",
            "score",
            "passed",
            "policy_name",
            "model",
            "batch_id",
            "batch__name",
            "batch__role",
        )
        .order_by("-id")[:limit]
    )


def model_evaluation(*, project, batch_ids: list[int] | None = None) -> dict:
    """Per model (policy label) over the chosen finished batches (default: all of them)."""
    batches = list(RunBatch.objects.filter(project=project).select_related("job"))
    if batch_ids:
        batches = [b for b in batches if b.pk in set(batch_ids)]
    by_model: dict[str, list[dict]] = defaultdict(list)
    trials_by_model: dict[str, int] = defaultdict(int)
    final_rows = _final_rows_by_batch(batches)
    for batch in batches:
        rows = final_rows[batch.pk]
        by_model[batch.policy_label].extend(rows)
        trials_by_model[batch.policy_label] = max(trials_by_model[batch.policy_label], batch.trials)
    models = []
    for label, rows in sorted(by_model.items()):
        evaluation = batch_evaluation(rows, trials=trials_by_model[label])
        models.append({"name": label, **evaluation})
    return {"batches": batches, "models": models}


def _task_set_name(batches: list[RunBatch], final_rows: dict[int, list[dict]]) -> str:
    """A task set named for people: its environments (the first three, then how many more),
    its split and capabilities when the batches chose by them."""
    environments = sorted(
        {row["environment_name"] for b in batches for row in final_rows[b.pk]} - {""}
    )
    if not environments:
        name = batches[0].name
    elif len(environments) <= 3:
        name = ", ".join(environments)
    else:
        name = f"{', '.join(environments[:3])} and {len(environments) - 3} more"
    selection = batches[0].selection or {}
    if selection.get("split"):
        name += f" · {selection['split']} split"
    if selection.get("capabilities"):
        name += " · " + ", ".join(selection["capabilities"])
    return name


def leaderboard(*, project) -> list[dict]:
    """Task sets (batches that ran the same tasks at the same revisions), each with its
    models ranked by average score."""
    batches = list(
        RunBatch.objects.filter(project=project).select_related("job").order_by("created_at")
    )
    sets: dict[str, list[RunBatch]] = defaultdict(list)
    for batch in batches:
        sets[batch.task_set_key].append(batch)
    final_rows = _final_rows_by_batch(batches)
    boards = []
    for key, members in sets.items():
        by_model: dict[str, list[dict]] = defaultdict(list)
        batch_ids: dict[str, list[int]] = defaultdict(list)
        k_max = max(b.trials for b in members)
        for batch in members:
            by_model[batch.policy_label].extend(final_rows[batch.pk])
            batch_ids[batch.policy_label].append(batch.pk)
        rows = []
        for label, runs in by_model.items():
            stats = outcome_stats(runs, k_max=k_max)
            rows.append({"name": label, "batches": batch_ids[label], **stats})
        rows.sort(key=lambda r: (-(r["average_score"] or 0), -(r["pass_rate"] or 0), r["name"]))
        boards.append(
            {
                "key": key,
                "name": _task_set_name(members, final_rows),
                "tasks": len(members[0].task_ids),
                "selection": members[0].selection,
                "batches": members,
                "k_max": k_max,
                "rows": rows,
            }
        )
    boards.sort(key=lambda b: (-len(b["rows"]), -b["batches"][-1].pk))
    return boards


def capability_names(*, project) -> dict[str, str]:
    """Each capability's name by its slug (what runs record), archived ones included."""
    return dict(Capability.objects.filter(project=project).values_list("slug", "name"))
