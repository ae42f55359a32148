"""Demonstrations from runs: the automatic promotion of a teacher batch's passing runs and
a reviewer's promotion of any graded run by hand."""

from __future__ import annotations

import logging

from django.db import IntegrityError, transaction

from apps.capabilities.models import Capability
from apps.core.exceptions import ApplicationError
from apps.curation.models import Demonstration, DemonstrationStatus, DemonstrationVersion
from apps.curation.services.settings import curation_settings_get
from apps.runs.models import Run, RunBatch, RunRole, RunStatus

logger = logging.getLogger(__name__)


def grading_from_run(run: Run) -> dict:
    """The grading a run recorded, in the shape of ``Grading.to_dict()``."""
    return {
        "score": run.score,
        "passed": run.passed,
        "strict": run.strict,
        "completion": run.completion,
        "safety": run.safety,
        "robustness": run.robustness,
        "verdicts": run.verdicts,
    }


def is_eval_task_run(run: Run) -> bool:
    """Whether the run's task is (now) an eval task: its current split, or the split the run
    recorded once the task is gone."""
    task = run.task
    split = task.split if task is not None else run.split
    return split == "eval"


def demonstration_from_run(*, run: Run, user=None) -> Demonstration:
    """The run's demonstration, created (pending, version 1 = the run's transcript) if it
    has none yet. Idempotent: a second call, or a concurrent one, returns the same row.

    Any graded run of a train task can be promoted by hand (``user`` is who promoted it);
    the automatic promotion of passing teacher runs is ``demonstrations_from_batch``. A run of
    an eval task is refused: eval tasks measure models and never enter a dataset, so a
    review of one could lead nowhere.
    """
    existing = Demonstration.objects.filter(run=run).first()
    if existing is not None:
        return existing
    if run.status != RunStatus.SUCCEEDED:
        raise ApplicationError(
            f"Only a graded run can become a demonstration; this one is {run.status}."
        )
    if not run.transcript:
        raise ApplicationError("This run has no transcript to review.")
    if is_eval_task_run(run):
        raise ApplicationError(
            f"Run #{run.pk} is of an eval task ({run.task_key}): eval tasks measure models and "
            "never become demonstrations or dataset rows. To train on this task, move it to "
            "the train split in its environment first."
        )
    settings = curation_settings_get(project=run.project)
    task = run.task
    batch = run.batch
    try:
        with transaction.atomic():
            demonstration = Demonstration(
                project_id=run.project_id,
                run=run,
                run_ref=run.pk,
                task=task,
                environment_id=run.environment_id,
                task_key=run.task_key,
                task_title=run.task_title,
                environment_name=run.environment_name,
                split=(task.split if task is not None else run.split) or "train",
                capability_slugs=list(run.capabilities or []),
                model_name=run.model or batch.policy_label,
                policy=run.policy_name or batch.policy_kind,
                score=run.score,
                status=DemonstrationStatus.PENDING,
                reviews_required=settings.reviews_required,
                promoted_by=user,
            )
            demonstration.full_clean(exclude=["run", "current_version"])
            demonstration.save()
            version = DemonstrationVersion.objects.create(
                demonstration=demonstration,
                number=1,
                transcript=run.transcript,
                tools=run.tools,
                audit_log=run.audit_log,
                exogenous_log=run.exogenous_log,
                grading=grading_from_run(run),
                score=run.score,
                passed=run.passed,
                strict=run.strict,
                environment_revision=run.environment_revision,
                spec_hash=run.spec_hash,
                note="The run's transcript as recorded.",
            )
            demonstration.current_version = version
            demonstration.save(update_fields=["current_version"])
            if run.capabilities:
                demonstration.capabilities.set(
                    Capability.objects.filter(project_id=run.project_id, slug__in=run.capabilities)
                )
    except IntegrityError:
        # Promoted concurrently (the run is unique): return the winner's row.
        found = Demonstration.objects.filter(run=run).first()
        if found is None:
            raise
        return found
    return demonstration


def qualifying_runs(*, batch: RunBatch):
    """The batch's graded runs that pass the project's promotion rule."""
    settings = curation_settings_get(project=batch.project)
    runs = (
        Run.objects.filter(
            batch=batch,
            status=RunStatus.SUCCEEDED,
            score__gte=settings.pass_threshold,
            demonstration__isnull=True,
        )
        # Eval tasks never become demonstrations (the task's current split decides; a run
        # whose task is gone goes by the split it recorded).
        .exclude(task__split="eval")
        .exclude(task__isnull=True, split="eval")
    )
    if settings.strict_only:
        runs = runs.filter(strict=True)
    return runs


def demonstrations_from_batch(*, batch: RunBatch) -> int:
    """Promote every passing run of a TEACHER batch's train tasks to a pending demonstration
    (score at least the project's ``pass_threshold``, and strict if ``strict_only``). Eval
    tasks and other roles promote nothing. Idempotent. Returns how many demonstrations were
    created."""
    if batch.role != RunRole.TEACHER:
        return 0
    created = 0
    for run in qualifying_runs(batch=batch).select_related("batch", "project", "task"):
        before = Demonstration.objects.filter(run=run).exists()
        demonstration_from_run(run=run)
        created += not before
    if created:
        logger.info("Batch %s: %s runs became demonstrations.", batch.pk, created)
    return created
