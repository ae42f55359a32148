"""The shared life cycle of background jobs: create, claim, report, finish, cancel, sweep."""

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from apps.core.claims import Claim, Claimable
from apps.core.exceptions import ApplicationError
from apps.core.leases import TRANSIENT_DB_ERRORS, max_claims
from apps.core.leases import stale_after as lease_stale_after
from apps.core.models import ACTIVE_JOB_STATUSES, Job, JobStatus

logger = logging.getLogger(__name__)


class JobCancelled(Exception):
    """Raised inside a job's work when someone asked to cancel it."""


class JobLost(Exception):
    """Raised inside a job's work when another worker took the job over (this one was
    presumed dead): it must stop without writing anything more."""


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
    task=None,
    enqueue: Callable[[int], object] | None = None,
) -> Job:
    """Create a pending job and, once the transaction commits, send its id to ``task`` (a
    Celery task taking the job id). The task's name is kept on the row, so the sweeper can
    send the job again if the message is lost or its worker dies.

    ``enqueue`` (a callable taking the job id) is for jobs that route their own messages
    and recover on their own; the sweeper does not know how to send those again."""
    job = Job(
        project=project,
        kind=kind,
        title=title,
        started_by=started_by,
        params=params or {},
        progress_total=total,
        task_name=task.name if task is not None else "",
        enqueued_at=timezone.now() if task is not None else None,
    )
    job.full_clean()
    job.save()
    if task is not None:
        transaction.on_commit(lambda: send_task(task.name, job.pk))
    elif enqueue is not None:
        transaction.on_commit(lambda: enqueue(job.pk))
    return job


def send_task(name: str, *args) -> bool:
    """Send a task, named by its dotted path, with these arguments. A broker that is down is
    logged, not raised: the row that asked for the work is already saved, and the sweeper
    sends it again once the broker is back."""
    from django.utils.module_loading import import_string

    try:
        import_string(name).delay(*args)
    except Exception:
        logger.exception("Could not send %s%r to the broker; the sweeper will retry.", name, args)
        return False
    return True


JOBS = Claimable(
    Job,
    waiting=Q(status=JobStatus.PENDING),
    held=Q(status=JobStatus.RUNNING),
    counter="attempts",
    resend_unsent=True,
)


def job_claim(*, job_id: int, stale_after: timedelta | None = None) -> Job | None:
    """Claim a job for this worker, or return None if it is finished or alive elsewhere.

    A job whose worker died ``JOB_MAX_CLAIMS`` times while holding it is failed instead.
    """
    now = timezone.now()
    before = now - (stale_after or lease_stale_after())
    if JOBS.claim(job_id, now=now, before=before, status=JobStatus.RUNNING) is None:
        return None
    job = Job.objects.get(pk=job_id)
    if job.cancel_requested:
        _finish(job, JobStatus.CANCELLED, "Cancelled before it started.")
        return None
    if job.attempts > max_claims():
        _finish(
            job,
            JobStatus.FAILED,
            f"Its worker stopped {job.attempts - 1} times while working on it (killed, "
            "perhaps for lack of memory); it was not started again.",
        )
        return None
    return job


def _claim(job: Job) -> Claim:
    """The claim this worker holds on the job (its writes are fenced by the token)."""
    return Claim(JOBS, job.pk, job.claim_token)


def job_report_progress(
    *, job: Job, done: int, total: int | None = None, message: str | None = None
) -> None:
    """Record progress in the row; raise JobLost if another worker took the job over and
    JobCancelled if cancellation was requested."""
    job.progress_done = done
    fields = {"progress_done": done}
    if total is not None:
        job.progress_total = fields["progress_total"] = total
    if message is not None:
        job.message = fields["message"] = message
    if not _claim(job).renew(**fields):
        raise JobLost
    if Job.objects.filter(pk=job.pk, cancel_requested=True).exists():
        raise JobCancelled


def job_execute(
    *,
    job_id: int,
    work: Callable[[JobContext], str | None],
    stale_after: timedelta | None = None,
) -> Job | None:
    """Run ``work`` for a claimed job and record how it ended.

    ``work`` may return a closing message. Errors a person can act on should be raised as
    ApplicationError; anything else is logged with its traceback and shown generically. A
    database that cannot be reached is not the job's fault: the claim is given back and the
    error raised again, so the task is retried (and the sweeper sends it again if not).
    ``stale_after``: how long a running job must have been silent before it is taken over
    (``JOB_STALE_AFTER_S`` unless given).
    """
    job = job_claim(job_id=job_id, stale_after=stale_after)
    if job is None:
        logger.info("Job %s is not claimable (finished, cancelled or running elsewhere).", job_id)
        return None
    heartbeat = _claim(job).heartbeat(f"job {job.pk}")
    try:
        with heartbeat:
            closing = work(JobContext(job))
    except JobLost:
        logger.warning("Job %s was taken over by another worker; this one stops.", job.pk)
        return job
    except JobCancelled:
        _finish(job, JobStatus.CANCELLED, "Cancelled.")
    except ApplicationError as exc:
        _finish(job, JobStatus.FAILED, exc.message)
    except TRANSIENT_DB_ERRORS:
        job_release(job=job)
        raise
    except Exception:
        logger.exception("Job %s (%s) failed", job.pk, job.kind)
        _finish(job, JobStatus.FAILED, "An unexpected error stopped this job; see the worker log.")
    else:
        _finish(job, JobStatus.SUCCEEDED, closing or "Done.")
    return job


def job_release(*, job: Job) -> bool:
    """Give a claim back (the database went away under the work): the job is pending again,
    so the retried task, or the sweeper, takes it at once, and the claim does not count as
    one whose worker died. If the database is still away the claim simply goes stale."""
    return _claim(job).give_back(status=JobStatus.PENDING)


def jobs_sweep(*, now=None) -> dict:
    """Send again every job that a worker should be working on but nobody is: running with
    a heartbeat older than ``JOB_STALE_AFTER_S`` (its worker died), or still pending that
    long after it was sent (the message was lost with a worker or a broker); once per
    period, however many sweepers run (``Claimable.sweep``). Jobs that route their own
    messages (no task name) are left to their app. Returns ``{"sent": [job ids]}``."""

    def send(job_id: int) -> bool:
        name = Job.objects.filter(pk=job_id).values_list("task_name", flat=True).get()
        return send_task(name, job_id)

    return {"sent": JOBS.sweep(Job.objects.exclude(task_name=""), send=send, now=now)}


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
    _finish(job, status, message, fenced=False)


def _finish(job: Job, status: str, message: str, *, fenced: bool = True) -> bool:
    """Record how the job ended; ``fenced``: only while this worker still holds the claim."""
    job.status = status
    job.message = message
    job.finished_at = timezone.now()
    if status == JobStatus.SUCCEEDED and job.progress_total:
        job.progress_done = job.progress_total
    values = {
        "status": status,
        "message": message,
        "finished_at": job.finished_at,
        "progress_done": job.progress_done,
    }
    if fenced:
        return _claim(job).finish(**values)
    return bool(Job.objects.filter(pk=job.pk).update(**values))


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
        task=check_worker_task,
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
