"""The shared life cycle of background jobs: create, claim, report, finish, cancel."""

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from apps.core.exceptions import ApplicationError
from apps.core.models import ACTIVE_JOB_STATUSES, Job, JobStatus

logger = logging.getLogger(__name__)

# A running job whose worker has not reported for this long is presumed dead and may be
# taken over by a redelivered message.
STALE_AFTER = timedelta(minutes=5)


class JobCancelled(Exception):
    """Raised inside a job's work when someone asked to cancel it."""


@dataclass
class JobContext:
    """What a job's work gets: its row, and a way to report progress that also checks cancel."""

    job: Job

    def progress(self, done: int, total: int | None = None, message: str | None = None) -> None:
        job_report_progress(job=self.job, done=done, total=total, message=message)


def job_create(
    *,
    project,
    kind: str,
    title: str,
    started_by=None,
    params: dict | None = None,
    total: int = 0,
    enqueue: Callable[[int], object] | None = None,
) -> Job:
    """Create a pending job and, once the transaction commits, hand its id to ``enqueue``."""
    job = Job(
        project=project,
        kind=kind,
        title=title,
        started_by=started_by,
        params=params or {},
        progress_total=total,
    )
    job.full_clean()
    job.save()
    if enqueue is not None:
        transaction.on_commit(lambda: enqueue(job.pk))
    return job


def job_claim(*, job_id: int, stale_after: timedelta = STALE_AFTER) -> Job | None:
    """Claim a job for this worker, or return None if it is finished or alive elsewhere."""
    now = timezone.now()
    claimable = Q(status=JobStatus.PENDING) | Q(
        status=JobStatus.RUNNING, heartbeat_at__lt=now - stale_after
    )
    with transaction.atomic():
        job = Job.objects.select_for_update().filter(claimable, pk=job_id).first()
        if job is None:
            return None
        if job.cancel_requested:
            _finish(job, JobStatus.CANCELLED, "Cancelled before it started.")
            return None
        job.status = JobStatus.RUNNING
        job.started_at = job.started_at or now
        job.heartbeat_at = now
        job.attempts += 1
        job.save(update_fields=["status", "started_at", "heartbeat_at", "attempts"])
    return job


def job_report_progress(
    *, job: Job, done: int, total: int | None = None, message: str | None = None
) -> None:
    """Record progress in the row and raise JobCancelled if cancellation was requested."""
    job.progress_done = done
    fields = {"progress_done": done, "heartbeat_at": timezone.now()}
    if total is not None:
        job.progress_total = fields["progress_total"] = total
    if message is not None:
        job.message = fields["message"] = message
    Job.objects.filter(pk=job.pk).update(**fields)
    if Job.objects.filter(pk=job.pk, cancel_requested=True).exists():
        raise JobCancelled


def job_execute(
    *,
    job_id: int,
    work: Callable[[JobContext], str | None],
    stale_after: timedelta = STALE_AFTER,
) -> Job | None:
    """Run ``work`` for a claimed job and record how it ended.

    ``work`` may return a closing message. Errors a person can act on should be raised as
    ApplicationError; anything else is logged with its traceback and shown generically.
    ``stale_after``: how long a running job must have been silent before it is taken over.
    """
    job = job_claim(job_id=job_id, stale_after=stale_after)
    if job is None:
        logger.info("Job %s is not claimable (finished, cancelled or running elsewhere).", job_id)
        return None
    try:
        closing = work(JobContext(job))
    except JobCancelled:
        _finish(job, JobStatus.CANCELLED, "Cancelled.")
    except ApplicationError as exc:
        _finish(job, JobStatus.FAILED, exc.message)
    except Exception:
        logger.exception("Job %s (%s) failed", job.pk, job.kind)
        _finish(job, JobStatus.FAILED, "An unexpected error stopped this job; see the worker log.")
    else:
        _finish(job, JobStatus.SUCCEEDED, closing or "Done.")
    return job


def job_cancel(*, job: Job) -> Job:
    """Ask a job to stop: a pending job ends at once, a running one at its next report."""
    if job.status not in ACTIVE_JOB_STATUSES:
        raise ApplicationError(f"This job has already {job.status}.")
    updated = Job.objects.filter(pk=job.pk, status=JobStatus.PENDING).update(
        status=JobStatus.CANCELLED,
        cancel_requested=True,
        finished_at=timezone.now(),
        message="Cancelled before it started.",
    )
    if not updated:
        Job.objects.filter(pk=job.pk).update(cancel_requested=True)
    job.refresh_from_db()
    return job


def job_finish(*, job: Job, status: str, message: str) -> None:
    """Close a job whose work ended outside ``job_execute`` (e.g. reported by a callback)."""
    if status not in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED):
        raise ValueError(f"{status} is not a final job status.")
    _finish(job, status, message)


def _finish(job: Job, status: str, message: str) -> None:
    job.status = status
    job.message = message
    job.finished_at = timezone.now()
    if status == JobStatus.SUCCEEDED and job.progress_total:
        job.progress_done = job.progress_total
    Job.objects.filter(pk=job.pk).update(
        status=status,
        message=message,
        finished_at=job.finished_at,
        progress_done=job.progress_done,
    )


WORKER_CHECK_KIND = "worker_check"


def worker_check_start(*, project, started_by, steps: int = 5, step_seconds: float = 0.2) -> Job:
    """Start a small job that proves a worker is consuming the queue and reporting back."""
    from apps.core.tasks import check_worker_task

    if not 1 <= steps <= 100:
        raise ApplicationError("A worker check takes between 1 and 100 steps.")
    return job_create(
        project=project,
        kind=WORKER_CHECK_KIND,
        title="Background worker check",
        started_by=started_by,
        params={"steps": steps, "step_seconds": step_seconds},
        total=steps,
        enqueue=check_worker_task.delay,
    )


def worker_check_run(context: JobContext) -> str:
    """Walk through the steps, recording each once: a resumed job continues where it stopped."""
    import os
    import socket
    import time

    job = context.job
    steps = int(job.params.get("steps", 5))
    step_seconds = float(job.params.get("step_seconds", 0.2))
    done_steps = list(job.result.get("steps", []))
    worker = f"{socket.gethostname()}:{os.getpid()}"
    for step in range(len(done_steps), steps):
        time.sleep(step_seconds)
        done_steps.append({"step": step + 1, "worker": worker})
        Job.objects.filter(pk=job.pk).update(result={"steps": done_steps})
        job.result = {"steps": done_steps}
        context.progress(step + 1, steps, f"Step {step + 1} of {steps} on {worker}")
    return f"The worker {worker} answered all {steps} steps."
