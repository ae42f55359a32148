"""Make a run batch (choose tasks, create its job and one pending run per slot), cancel it,
resume it, or execute it in this process."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from apps.core.exceptions import ApplicationError
from apps.core.leases import stale_after
from apps.core.models import ACTIVE_JOB_STATUSES, Job
from apps.core.services import job_cancel, job_create
from apps.core.text import count_of
from apps.environments.models import EnvironmentStatus, Split, Task
from apps.llm.judge import project_judge_endpoint
from apps.runs.models import (
    MAX_GROUP_SIZE,
    MAX_TEMPERATURE,
    Executor,
    PolicyKind,
    Run,
    RunBatch,
    RunRole,
    RunStatus,
    UserSide,
)
from apps.runs.services.execution import run_execute
from apps.runs.services.progress import batch_dispatch, batch_refresh, run_send

JOB_KIND = "run_batch"
DEFAULT_STATUSES = (EnvironmentStatus.VALID, EnvironmentStatus.APPROVED)
MAX_SLOTS = 5000


@dataclass(frozen=True)
class TaskSelection:
    """Which tasks a batch runs: every task of the project's environments that match all the
    given filters (an empty filter does not restrict)."""

    environments: tuple[int, ...] = ()
    capabilities: tuple[str, ...] = ()
    split: str = ""
    statuses: tuple[str, ...] = DEFAULT_STATUSES

    def to_dict(self) -> dict:
        return {
            "environments": list(self.environments),
            "capabilities": list(self.capabilities),
            "split": self.split,
            "statuses": list(self.statuses),
        }


@dataclass(frozen=True)
class BatchSettings:
    trials: int = 1
    concurrency: int = 4
    max_tool_calls: int = 50
    max_rounds_per_turn: int = 20
    faults: bool = True
    user_side: str = UserSide.SCRIPTED
    simulator_endpoint: object = None
    judge_endpoint: object = None  # None: the project's judge, if it has one
    seed: int = 0
    max_attempts: int = 3
    group_size: int | None = None  # G samples per task (student batches): rollout groups
    temperature: float | None = None  # the agent's T; None: the endpoint's
    discount: float = 1.0  # gamma of the groups' per-turn and per-call reward-to-go


def tasks_select(*, project, selection: TaskSelection) -> list[Task]:
    """The tasks a selection names, in a stable order (environment, then task position)."""
    statuses = [s for s in selection.statuses if s in EnvironmentStatus.values]
    unknown = [s for s in selection.statuses if s not in EnvironmentStatus.values]
    if unknown:
        raise ApplicationError(f"Unknown environment status: {', '.join(unknown)}.")
    if EnvironmentStatus.ARCHIVED in statuses:
        raise ApplicationError("Archived environments cannot be run; restore them first.")
    if selection.split and selection.split not in Split.values:
        raise ApplicationError(f"Unknown split “{selection.split}”: use train or eval.")
    tasks = Task.objects.filter(environment__project=project).select_related("environment")
    if selection.environments:
        ids = set(selection.environments)
        found = set(project.environments.filter(pk__in=ids).values_list("pk", flat=True))
        if missing := sorted(ids - found):
            raise ApplicationError(
                f"No environment {', '.join(map(str, missing))} in this project.",
                {"fields": {"environments": ["Choose environments of this project."]}},
            )
        tasks = tasks.filter(environment_id__in=ids)
    if statuses:
        tasks = tasks.filter(environment__status__in=statuses)
    else:
        tasks = tasks.exclude(environment__status=EnvironmentStatus.ARCHIVED)
    if selection.capabilities:
        tasks = tasks.filter(capability_links__capability__slug__in=selection.capabilities)
    if selection.split:
        tasks = tasks.filter(split=selection.split)
    return list(
        tasks.prefetch_related("capability_links__capability")
        .distinct()
        .order_by("environment_id", "position", "id")
    )


def task_set_key(tasks: list[Task]) -> str:
    pairs = sorted((task.pk, task.environment.revision) for task in tasks)
    return hashlib.sha256(json.dumps(pairs).encode()).hexdigest()


def _check_groups(role: str, settings: BatchSettings) -> None:
    """A group size belongs to student batches, within 1..MAX_GROUP_SIZE, instead of trials."""
    if settings.group_size is not None:
        if isinstance(settings.group_size, bool) or not isinstance(settings.group_size, int):
            raise ApplicationError("The group size must be a whole number.")
        if not 1 <= settings.group_size <= MAX_GROUP_SIZE:
            raise ApplicationError(
                f"The group size must be between 1 and {MAX_GROUP_SIZE}.",
                {"fields": {"group_size": [f"Between 1 and {MAX_GROUP_SIZE}."]}},
            )
        if role != RunRole.STUDENT:
            raise ApplicationError(
                "Rollout groups are for student batches: choose the student role, or leave "
                "the group size empty.",
                {"fields": {"group_size": ["Only for the student role."]}},
            )
        if settings.trials != 1:
            raise ApplicationError(
                "Give either trials or a group size: a group's G samples are its trials.",
                {"fields": {"trials": ["Leave at 1 with a group size."]}},
            )
    if settings.temperature is not None and not 0.0 <= settings.temperature <= MAX_TEMPERATURE:
        raise ApplicationError(
            f"The temperature must be between 0 and {MAX_TEMPERATURE:g}.",
            {"fields": {"temperature": [f"Between 0 and {MAX_TEMPERATURE:g}."]}},
        )
    if not 0.0 <= settings.discount <= 1.0:
        raise ApplicationError(
            "The discount (gamma) must be between 0 and 1.",
            {"fields": {"discount": ["Between 0 and 1."]}},
        )


def _check_endpoint(project, endpoint, what: str) -> None:
    if endpoint is None:
        raise ApplicationError(f"Choose the model endpoint for the {what}.")
    if endpoint.project_id != project.pk:
        raise ApplicationError(f"The {what}'s endpoint belongs to another project.")


@transaction.atomic
def run_batch_create(
    *,
    project,
    user=None,
    name: str = "",
    policy_kind: str = PolicyKind.ORACLE,
    endpoint=None,
    role: str = RunRole.EVAL,
    selection: TaskSelection | None = None,
    settings: BatchSettings | None = None,
    executor: str = Executor.CELERY,
) -> RunBatch:
    """A batch of pending runs, one per (task, trial), with its job. With the Celery executor
    the first ``concurrency`` runs are enqueued once the transaction commits; with the inline
    one, call ``run_batch_execute_inline`` afterwards."""
    selection = selection or TaskSelection()
    settings = settings or BatchSettings()
    if policy_kind not in PolicyKind.values:
        raise ApplicationError(f"Unknown policy “{policy_kind}”: use oracle or an endpoint.")
    if policy_kind == PolicyKind.ENDPOINT:
        _check_endpoint(project, endpoint, "agent")
    else:
        endpoint = None
    simulator = None
    if settings.user_side == UserSide.SIMULATOR:
        simulator = settings.simulator_endpoint
        _check_endpoint(project, simulator, "user simulator")
    elif settings.user_side != UserSide.SCRIPTED:
        raise ApplicationError(f"Unknown user side “{settings.user_side}”.")
    judge = settings.judge_endpoint
    if judge is not None:
        _check_endpoint(project, judge, "judge")
    else:
        judge = project_judge_endpoint(project=project)
    _check_groups(role, settings)
    trials = settings.group_size or settings.trials
    tasks = tasks_select(project=project, selection=selection)
    if not tasks:
        raise ApplicationError(
            "No task matches this selection. Runs need tasks of valid or approved "
            "environments: validate an environment, or widen the filters."
        )
    slots = len(tasks) * trials
    if slots > MAX_SLOTS:
        raise ApplicationError(
            f"This batch would have {slots} runs; the limit is {MAX_SLOTS}. "
            f"Choose fewer tasks or {'a smaller group size' if settings.group_size else 'trials'}."
        )
    label = "oracle" if endpoint is None else endpoint.model
    per_task = f"G={trials}" if settings.group_size else f"k={trials}"
    name = (name or "").strip() or f"{label} · {count_of(len(tasks), 'task')}, {per_task}"
    job = job_create(
        project=project,
        kind=JOB_KIND,
        title=f"Run batch “{name}”"[:200],
        started_by=user,
        params={"policy": label, "tasks": len(tasks), "trials": trials},
        total=slots,
    )
    batch = RunBatch(
        project=project,
        job=job,
        name=name[:200],
        policy_kind=policy_kind,
        endpoint=endpoint,
        endpoint_name=endpoint.name if endpoint else "",
        model=endpoint.model if endpoint else "",
        role=role,
        task_ids=[task.pk for task in tasks],
        selection=selection.to_dict(),
        task_set_key=task_set_key(tasks),
        trials=trials,
        group_size=settings.group_size,
        temperature=settings.temperature,
        discount=settings.discount,
        concurrency=settings.concurrency,
        max_tool_calls=settings.max_tool_calls,
        max_rounds_per_turn=settings.max_rounds_per_turn,
        faults=settings.faults,
        user_side=settings.user_side,
        simulator_endpoint=simulator,
        judge_endpoint=judge,
        judge_model=judge.model if judge else "",
        seed=settings.seed,
        max_attempts=settings.max_attempts,
        executor=executor,
        created_by=user,
    )
    try:
        batch.full_clean(exclude=["job"])
    except ValidationError as exc:
        raise ApplicationError(
            "The batch settings are not valid.", {"fields": exc.message_dict}
        ) from None
    batch.save()
    Run.objects.bulk_create(
        [
            Run(
                batch=batch,
                project=project,
                task=task,
                task_ref=task.pk,
                task_key=task.key,
                task_title=task.title,
                environment=task.environment,
                environment_name=task.environment.name,
                split=task.split,
                capabilities=[
                    link.capability.slug
                    for link in sorted(task.capability_links.all(), key=lambda x: x.position)
                ],
                trial=trial,
                attempt=1,
                # a group's G samples face the same environment draw (faults): only the
                # policy's sampling differs between them
                seed=settings.seed if settings.group_size else settings.seed + trial,
                policy_name=label if endpoint is None else f"llm:{label}",
                endpoint_name=batch.endpoint_name,
                model=batch.model,
            )
            for task in tasks
            for trial in range(trials)
        ]
    )
    job.result = {
        "links": [{"label": f"Open the batch “{batch.name}”", "url": _batch_url(batch)}],
        "batch": batch.pk,
    }
    job.save(update_fields=["result"])
    batch_dispatch(batch=batch)
    return batch


def _batch_url(batch: RunBatch) -> str:
    return reverse("runs:batch_detail", args=[batch.pk])


def run_batch_cancel(*, batch: RunBatch) -> RunBatch:
    """Stop a batch: its pending runs are cancelled now, running ones at their next model
    request (an oracle run finishes in milliseconds anyway)."""
    job_cancel(job=batch.job)
    Run.objects.filter(batch=batch, status=RunStatus.PENDING).update(
        status=RunStatus.CANCELLED,
        finished_at=timezone.now(),
        error="Cancelled before it started.",
    )
    batch_refresh(batch=batch)
    batch.job.refresh_from_db()
    return batch


def run_batch_resume(*, batch: RunBatch) -> int:
    """Hand an unfinished batch to the workers again (after a broker loss or a crashed
    ``--sync`` run): pending runs are enqueued afresh and stale running ones handed over to
    be taken over. Returns how many runs were enqueued. (The sweeper does the same on its
    own once a run has been silent for ``JOB_STALE_AFTER_S``.)"""
    job = Job.objects.get(pk=batch.job_id)
    if job.status not in ACTIVE_JOB_STATUSES:
        raise ApplicationError(f"This batch has already {job.status}.")
    stale_before = timezone.now() - stale_after()
    with transaction.atomic():
        RunBatch.objects.filter(pk=batch.pk).update(executor=Executor.CELERY)
        batch.executor = Executor.CELERY
        Run.objects.filter(batch=batch, status=RunStatus.PENDING).update(enqueued_at=None)
        stale = list(
            Run.objects.filter(
                batch=batch, status=RunStatus.RUNNING, heartbeat_at__lt=stale_before
            ).values_list("pk", flat=True)
        )
        Run.objects.filter(pk__in=stale).update(enqueued_at=timezone.now())
        for run_id in stale:
            transaction.on_commit(lambda pk=run_id: run_send(pk))
        return len(stale) + batch_dispatch(batch=batch)


def run_batch_execute_inline(*, batch: RunBatch, on_progress=None) -> RunBatch:
    """Execute every pending run of the batch here, one after the other (the demo seed and
    ``run_batch --sync``): the same service a worker calls, without a broker."""
    while True:
        run = (
            Run.objects.filter(batch=batch, status=RunStatus.PENDING)
            .order_by("id")
            .only("pk")
            .first()
        )
        if run is None:
            break
        run_execute(run_id=run.pk)
        if on_progress is not None:
            on_progress(Job.objects.get(pk=batch.job_id))
    batch.job.refresh_from_db()
    return batch
