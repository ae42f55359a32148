"""Moving a batch along: its progress and job (refreshed as runs close, finished when the
last one does), the next run for a worker's lane, dispatch to the workers, and the sweeper
that sends again the runs whose worker died or whose message was lost. Nothing here plays
a run (``execution``)."""

from __future__ import annotations

import logging
import time

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q, Value
from django.db.models.functions import Greatest
from django.utils import timezone
from django.utils.module_loading import import_string

from apps.core.leases import (
    TRANSIENT_DB_ERRORS,
)
from apps.core.models import ACTIVE_JOB_STATUSES, Job, JobStatus
from apps.core.services import send_task
from apps.core.text import count_of
from apps.runs.models import (
    Executor,
    Run,
    RunBatch,
    RunRole,
    RunStatus,
)
from apps.runs.services import claims
from apps.runs.services.groups import rollout_group_score, rollout_groups_score

logger = logging.getLogger(__name__)
# When this process last wrote each batch's progress (lanes write it at most once a second).
_PROGRESS_WRITTEN: dict[int, float] = {}


def final_runs_q(batch: RunBatch) -> Q:
    """Runs that close their slot: graded, cancelled, or errored with no attempt left."""
    return (
        Q(status__in=[RunStatus.SUCCEEDED, RunStatus.CANCELLED])
        | Q(status=RunStatus.ERRORED, retryable=False)
        | Q(status=RunStatus.ERRORED, attempt__gte=batch.max_attempts)
    )


def score_groups(batch: RunBatch, task_ref: int | None = None) -> None:
    """Score one rollout group (or every complete one left). A scoring that breaks is logged
    and does not stop the batch: its runs stand, and the batch's finishing pass tries the
    groups left unscored once more (``rollout_groups_score`` can also be called by hand)."""
    try:
        if task_ref is None:
            rollout_groups_score(batch=batch)
        else:
            rollout_group_score(batch=batch, task_ref=task_ref)
    except TRANSIENT_DB_ERRORS:
        raise
    except Exception:
        logger.exception("Batch %s: scoring its rollout groups failed", batch.pk)


def batch_refresh(*, batch: RunBatch) -> Job:
    """Count finished slots into the batch's job, finish the job when every slot has a final
    run, cancel what is left once cancellation was asked, else enqueue the next runs.

    Race-free: progress only grows (GREATEST of the stored and the recounted value), and the
    job is finished by a conditional UPDATE that only one caller wins.
    """
    return refresh(batch, keep=False)[0]


def refresh(batch: RunBatch, *, keep: bool) -> tuple[Job | None, Run | None]:
    """``batch_refresh``; with ``keep`` (a lane whose run just ended), the batch's next run
    is taken and claimed for the caller to play (see ``run_execute``): the place the ended
    run held goes to it, so the batch's in-flight count stays as it was and no batch-wide
    lock or recount is needed (the job is then not read: None is returned for it).
    Progress is then written at most once a second per process. Only when nothing is left
    to take does the lane do the full refresh (and may finish the job)."""
    if keep:
        kept = take_next(batch)
        if kept is not None:
            progress_now_and_then(batch)
            return None, kept
    job = Job.objects.get(pk=batch.job_id)
    if job.cancel_requested:
        Run.objects.filter(batch=batch, status=RunStatus.PENDING).update(
            status=RunStatus.CANCELLED,
            finished_at=timezone.now(),
            error="Cancelled before it started.",
        )
    final = _write_progress(batch)
    if final >= batch.slot_count:
        score_groups(batch)  # groups whose own scoring call was lost
        _finish_job(batch)
    elif job.cancel_requested:
        if not Run.objects.filter(batch=batch, status=RunStatus.RUNNING).exists():
            _finish_job(batch)
    else:
        batch_dispatch(batch=batch)
    job.refresh_from_db()
    return job, None


def progress_now_and_then(batch: RunBatch) -> None:
    """A lane's progress write: at most once a second per process and batch."""
    now = time.monotonic()
    if now - _PROGRESS_WRITTEN.get(batch.pk, 0.0) >= 1.0:
        _PROGRESS_WRITTEN[batch.pk] = now
        _write_progress(batch)


def _write_progress(batch: RunBatch) -> int:
    """Count the batch's final runs into its job (progress only grows); returns the count."""
    final = Run.objects.filter(batch=batch).filter(final_runs_q(batch)).count()
    Job.objects.filter(pk=batch.job_id).update(
        progress_done=Greatest(F("progress_done"), Value(min(final, batch.slot_count))),
        heartbeat_at=timezone.now(),
    )
    return final


def take_next(batch: RunBatch) -> Run | None:
    """Take and claim the batch's first unsent pending run for this lane, loaded, in one
    conditional ``UPDATE … RETURNING`` (marked sent and claimed at once: two lanes never
    take the same run, and a lane that dies with it leaves a claim that goes stale, for the
    sweeper); None if none is left or the batch's job was asked to cancel."""
    if batch.executor != Executor.CELERY:
        return None
    while True:  # another lane may win the same first run: then try the next one
        # (timed as the ended run's dispatch)
        taken = claims.take_next(batch.pk, now=timezone.now())
        if taken is not None:
            return taken
        unsent = Run.objects.filter(
            batch_id=batch.pk,
            status=RunStatus.PENDING,
            enqueued_at__isnull=True,
            batch__job__cancel_requested=False,
        )
        if not unsent.exists():
            return None


def _finish_job(batch: RunBatch) -> None:
    counts = dict.fromkeys(RunStatus.values, 0)
    passed = 0
    for row in (
        Run.objects.filter(batch=batch).filter(final_runs_q(batch)).values("status", "passed")
    ):
        counts[row["status"]] += 1
        passed += bool(row["passed"])
    graded = counts[RunStatus.SUCCEEDED]
    parts = [f"{graded} of {count_of(batch.slot_count, 'trial')} graded, {passed} passed"]
    if counts[RunStatus.ERRORED]:
        parts.append(
            f"{counts[RunStatus.ERRORED]} errored after {count_of(batch.max_attempts, 'attempt')}"
        )
    if counts[RunStatus.CANCELLED]:
        parts.append(f"{counts[RunStatus.CANCELLED]} cancelled")
    message = "; ".join(parts) + "."
    cancelled = Job.objects.filter(pk=batch.job_id, cancel_requested=True).exists()
    with transaction.atomic():
        finished = Job.objects.filter(pk=batch.job_id, status__in=ACTIVE_JOB_STATUSES).update(
            status=JobStatus.CANCELLED if cancelled else JobStatus.SUCCEEDED,
            message=message,
            finished_at=timezone.now(),
        )
        if finished and batch.role == RunRole.TEACHER:
            # The app above offers the passing runs for review, in this transaction: if it
            # fails, the job is not finished either and the next refresh (the sweeper's at
            # the latest) finishes it and offers them again (idempotent).
            import_string(settings.FOLLOW_UPS["runs.teacher_batch_finished"])(batch=batch)


def batch_dispatch(*, batch: RunBatch) -> int:
    """Enqueue pending runs until ``concurrency`` of them are in flight (Celery executor
    only); each finished run calls this again (or its lane takes the next run itself), so
    the batch keeps that many going. Returns how many runs were enqueued (after the
    transaction commits)."""
    if batch.executor != Executor.CELERY:
        return 0
    unsent = Run.objects.filter(batch=batch, status=RunStatus.PENDING, enqueued_at__isnull=True)
    if not unsent.exists():
        # Nothing to send, so no need to wait for the batch's lock: at a batch's end every
        # lane finds nothing left to take and refreshes, and on PostgreSQL 64 of them queued
        # on that lock one after another (~0.5 s before the last one could finish the job).
        return 0
    enqueued = 0
    with transaction.atomic():
        # One dispatcher at a time per batch, so two finishing runs cannot both fill the
        # same free place.
        RunBatch.objects.select_for_update().filter(pk=batch.pk).first()
        in_flight = Run.objects.filter(
            batch=batch,
            status__in=[RunStatus.PENDING, RunStatus.RUNNING],
            enqueued_at__isnull=False,
        ).count()
        free = batch.concurrency - in_flight
        if free <= 0:
            return 0
        candidates = list(
            Run.objects.filter(batch=batch, status=RunStatus.PENDING, enqueued_at__isnull=True)
            .order_by("id")
            .values_list("pk", flat=True)[:free]
        )
        now = timezone.now()
        # Marked sent together (a batch's start marks 64: one statement, not 64); a
        # candidate a lane took meanwhile is not marked (its take set enqueued_at) and not
        # sent, and the ones marked here are those still pending with this stamp (a lane's
        # take claims the run it marks).
        Run.objects.filter(pk__in=candidates, enqueued_at__isnull=True).update(enqueued_at=now)
        marked = Run.objects.filter(
            pk__in=candidates, enqueued_at=now, status=RunStatus.PENDING
        ).values_list("pk", flat=True)
        for run_id in sorted(marked):
            transaction.on_commit(lambda pk=run_id: run_send(pk))
            enqueued += 1
    return enqueued


def run_send(run_id: int) -> bool:
    return send_task("apps.runs.tasks.execute_run_task", run_id)


def runs_sweep(*, now=None) -> dict:
    """What Celery beat runs every JOB_SWEEP_EVERY_S: send again every run of an active
    batch that nobody works on although it was sent more than ``JOB_STALE_AFTER_S`` ago
    (its worker died, or the message was lost), then move every active batch along (queue
    its next runs, finish it when every slot is final).

    Safe on several hosts at once: a run is sent once per period (``Claimable.sweep``).
    Returns ``{"sent": [run ids], "batches": [batch ids refreshed]}``.
    """
    active = RunBatch.objects.filter(executor=Executor.CELERY, job__status__in=ACTIVE_JOB_STATUSES)
    sent = claims.RUNS.sweep(Run.objects.filter(batch__in=active), send=run_send, now=now)
    refreshed = []
    for batch in active.order_by("id"):
        batch_refresh(batch=batch)
        refreshed.append(batch.pk)
    return {"sent": sent, "batches": refreshed}
