"""Reads for training: job lists, a job's metrics, loss series for charts, comparisons."""

from __future__ import annotations

from django.db.models import QuerySet

from apps.environments.models import Environment, EnvironmentStatus
from apps.training.models import TrainedModel, TrainingJob, TrainingMetric


def training_job_list(*, project) -> QuerySet[TrainingJob]:
    return (
        TrainingJob.objects.filter(project=project)
        .select_related("job", "dataset_version__dataset", "created_by", "trained_model")
        .prefetch_related("environments")
        .defer("log_tail", "artifacts")
        .order_by("-created_at", "-id")
    )


def training_metrics(*, training_job: TrainingJob) -> QuerySet[TrainingMetric]:
    return TrainingMetric.objects.filter(training_job=training_job).order_by("step")


CHART_POINTS = 500


def _spread(steps: list[int], limit: int) -> list[int]:
    """At most ``limit`` of ``steps`` evenly spread, the first and last kept."""
    if len(steps) <= limit:
        return steps
    last = len(steps) - 1
    return sorted({steps[round(i * last / (limit - 1))] for i in range(limit)})


def chart_sample(rows: list, sparse=None, limit: int = CHART_POINTS) -> list:
    """At most ``limit`` of ``rows`` (in step order) evenly spread, plus up to ``limit`` of
    those where ``sparse(row)`` is set (eval points), for a chart."""
    if len(rows) <= limit:
        return rows
    keep = set(_spread(list(range(len(rows))), limit))
    if sparse is not None:
        keep |= set(_spread([i for i, row in enumerate(rows) if sparse(row) is not None], limit))
    return [rows[i] for i in sorted(keep)]


def training_metrics_sampled(
    *, training_job: TrainingJob, limit: int = CHART_POINTS
) -> list[TrainingMetric]:
    """A job's metric rows for its charts, down-sampled to at most ``limit`` steps with a
    loss and ``limit`` with an eval loss (so sparse eval points survive): a job of 100k
    steps draws from 1,000 rows, not 100k."""
    rows = TrainingMetric.objects.filter(training_job=training_job)
    steps = list(rows.order_by("step").values_list("step", flat=True))
    if len(steps) <= limit:
        return list(rows.order_by("step"))
    evals = list(
        rows.filter(eval_loss__isnull=False).order_by("step").values_list("step", flat=True)
    )
    chosen = set(_spread(steps, limit)) | set(_spread(evals, limit))
    return list(rows.filter(step__in=chosen).order_by("step"))


def training_metrics_latest(*, training_job: TrainingJob, count: int = 8) -> list[TrainingMetric]:
    """The job's last ``count`` metric rows, newest first."""
    return list(TrainingMetric.objects.filter(training_job=training_job).order_by("-step")[:count])


def loss_series(
    *, training_jobs: list[TrainingJob]
) -> dict[int, list[tuple[int, float | None, float | None]]]:
    """``{job id: [(step, loss, eval_loss), …]}`` for several jobs in one query."""
    series: dict[int, list] = {job.pk: [] for job in training_jobs}
    rows = (
        TrainingMetric.objects.filter(training_job__in=[job.pk for job in training_jobs])
        .order_by("training_job_id", "step")
        .values_list("training_job_id", "step", "loss", "eval_loss")
    )
    for job_id, step, loss, eval_loss in rows:
        series[job_id].append((step, loss, eval_loss))
    return {job_id: chart_sample(points, lambda p: p[2]) for job_id, points in series.items()}


def runnable_environments(*, project) -> QuerySet[Environment]:
    """The project's environments a GRPO job can roll out (valid or approved)."""
    return Environment.objects.filter(
        project=project, status__in=[EnvironmentStatus.VALID, EnvironmentStatus.APPROVED]
    ).order_by("name", "id")


RL_FIELDS = ("reward", "pass_rate", "group_reward_std", "strict_rate", "kl", "completion_length")


def rl_series(*, training_jobs: list[TrainingJob]) -> dict[int, list[dict]]:
    """``{job id: [{"step", "reward", "pass_rate", …RL_FIELDS}, …]}`` for several jobs in
    one query (steps without any RL figure left out)."""
    series: dict[int, list] = {job.pk: [] for job in training_jobs}
    rows = (
        TrainingMetric.objects.filter(training_job__in=[job.pk for job in training_jobs])
        .order_by("training_job_id", "step")
        .values("training_job_id", "step", *RL_FIELDS)
    )
    for row in rows:
        if any(row[f] is not None for f in RL_FIELDS):
            series[row.pop("training_job_id")].append(row)
    return series


def rl_summary(points: list[dict]) -> dict:
    """One GRPO job's curve in figures: steps reported, the last mean reward, the best pass
    rate and the mean within-group reward std (None where nothing was reported)."""
    passes = [p["pass_rate"] for p in points if p["pass_rate"] is not None]
    stds = [p["group_reward_std"] for p in points if p["group_reward_std"] is not None]
    rewards = [p["reward"] for p in points if p["reward"] is not None]
    return {
        "steps": len(points),
        "last_reward": rewards[-1] if rewards else None,
        "best_pass_rate": max(passes) if passes else None,
        "mean_group_std": sum(stds) / len(stds) if stds else None,
    }


def rl_job_list(*, project) -> QuerySet[TrainingJob]:
    """The project's GRPO jobs, newest first (what the RL comparison offers)."""
    return training_job_list(project=project).filter(method="grpo")


def project_environments(*, project, ids) -> QuerySet[Environment]:
    """The project's environments among ``ids`` (other projects' ids are simply absent)."""
    return Environment.objects.filter(project=project, pk__in=list(ids)).order_by("pk")


def trained_model_base(trained_model: TrainedModel) -> str:
    """What the model was trained from: the folder a preset was built into (kept in the
    job's artifacts), or the hub id or path the job named."""
    final = (trained_model.training_job.artifacts or {}).get("final") or {}
    return str(final.get("base_model") or trained_model.base_model)
