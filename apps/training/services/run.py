"""Running a training job: one claim, then the backend's work; and recovery after a crash."""

from __future__ import annotations

import logging

from django.utils import timezone

from apps.core.exceptions import ApplicationError
from apps.core.models import Job, JobStatus
from apps.core.services import JOBS, JobContext, job_claim, job_execute, job_finish
from apps.training.models import Backend, TrainingJob
from apps.training.redaction import scrub
from apps.training.services.jobs import training_stale_after

logger = logging.getLogger(__name__)


def _work(context: JobContext) -> str | None:
    """The backend's work; its message (and an error's) with every known secret redacted."""
    try:
        message = _backend_work(context)
    except ApplicationError as exc:
        exc.message = scrub(exc.message)
        raise
    return scrub(message) if message else message


def _backend_work(context: JobContext) -> str | None:
    training_job = TrainingJob.objects.select_related("dataset_version__dataset", "endpoint").get(
        job=context.job
    )
    if training_job.backend == Backend.LOCAL:
        from apps.training.services.local import local_training_run

        return local_training_run(context, training_job)
    if training_job.backend == Backend.OPENAI:
        from apps.training.services.remote import openai_training_run

        return openai_training_run(context, training_job)
    raise AssertionError("command jobs are submitted by _submit_command")


def _submit_command(job_id: int) -> Job | None:
    """Claim, fill the template and run it; the job stays running until the script's
    ``finished`` report (or a cancel) closes it."""
    from apps.training.services.command import command_training_submit

    job = job_claim(job_id=job_id, stale_after=training_stale_after())
    if job is None:
        return None
    training_job = TrainingJob.objects.select_related("dataset_version").get(job=job)
    try:
        command_training_submit(JobContext(job), training_job)
    except ApplicationError as exc:
        job_finish(job=job, status=JobStatus.FAILED, message=scrub(exc.message))
    except Exception:
        logger.exception("Submitting training job %s failed", training_job.pk)
        job_finish(
            job=job,
            status=JobStatus.FAILED,
            message="An unexpected error stopped the submission; see the worker log.",
        )
    return job


def training_job_execute(job_id: int) -> Job | None:
    """Claim the job (a running one only once its worker has been silent for
    TRAINING_STALE_S) and run its backend. Safe to deliver twice."""
    backend = TrainingJob.objects.filter(job_id=job_id).values_list("backend", flat=True).first()
    if backend == Backend.COMMAND:
        return _submit_command(job_id)
    return job_execute(job_id=job_id, work=_work, stale_after=training_stale_after())


def training_jobs_recover() -> tuple[list[int], float | None]:
    """The running local and openai jobs whose worker went silent (their ids, to be queued
    again: the claim takes them over, local training resumes from its last checkpoint), and
    in how many seconds the others would become stale if their worker stopped now (None when
    no training job runs). Command jobs are not here: their script reports through the
    callback, not through a worker."""
    now = timezone.now()
    stale_after = training_stale_after()
    running = Job.objects.filter(
        training_job__backend__in=[Backend.LOCAL, Backend.OPENAI], status=JobStatus.RUNNING
    )
    stale = list(running.filter(JOBS.lost(now - stale_after)).values_list("pk", flat=True))
    beats = running.exclude(pk__in=stale).values_list("heartbeat_at", flat=True)
    waits = [(beat + stale_after - now).total_seconds() + 1 for beat in beats]
    return stale, (min(waits) if waits else None)
