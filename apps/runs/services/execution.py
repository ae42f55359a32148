"""Execute one run: claim it, play its task through the engine's runner, store it whole,
then move the batch along (re-run an errored trial, count progress, finish the job, enqueue
the next run).

Safe under at-least-once delivery: a run is claimed by a conditional UPDATE (pending →
running, or a running one whose worker stopped heartbeating), results are written only by
the holder of the claim, and a retry's row is found by its unique slot key, never created
twice. A heartbeat thread renews the claim while the run plays; the sweeper (``runs_sweep``)
sends again the runs whose worker died or whose message was lost, and moves every active
batch along, so no batch waits for a person.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.core.leases import (
    TRANSIENT_DB_ERRORS,
    Heartbeat,
    max_claims,
    stale_after,
)
from apps.core.models import Job, JobStatus
from apps.core.timings import Timings, collecting, timed
from apps.llm.call_log import CallLogBuffer
from apps.llm.exceptions import LLMError
from apps.runs.agent import LLMUsage
from apps.runs.context import ContextOverflow
from apps.runs.models import (
    Run,
    RunBatch,
    RunStatus,
)
from apps.runs.services import claims
from apps.runs.services.playing import RunCancelled, RunUnavailable, play_run
from apps.runs.services.progress import (
    batch_refresh,
    progress_now_and_then,
    refresh,
    score_groups,
    take_next,
)

logger = logging.getLogger(__name__)


def run_claim(*, run_id: int, stale: timedelta | None = None) -> Run | None:
    """Take a run for this worker, loaded, or None if it is finished or alive elsewhere
    (see ``claims``)."""
    now = timezone.now()
    return claims.claim_run(run_id, now=now, before=now - (stale or stale_after()))


def run_execute(*, run_id: int, lane: Callable[[], bool] | None = None) -> Run | None:
    """Play one run and move its batch along. Returns the run, or None if it was not
    claimable (already finished, or running elsewhere).

    ``lane``: when given (a worker's task), the batch's next run is taken here instead of
    through the broker, run after run, while ``lane()`` says the worker goes on and for at
    most ``RUN_LANE_MAX_S`` seconds; the next one is then sent to the queue as usual. A run
    taken that way is marked sent (``enqueued_at``) first, so a worker that dies before
    claiming it leaves it to the sweeper, like a lost message.

    A database that cannot be reached is not the run's fault: the claim is given back and
    the error raised again, so the task is retried (or the sweeper sends the run again)."""
    deadline = time.monotonic() + settings.RUN_LANE_MAX_S
    first, own, claimed = None, True, None
    while run_id is not None or claimed is not None:
        keep = lane is not None and time.monotonic() < deadline and lane()
        run, claimed = _execute_one(run_id, claimed, keep_next=keep, own_message=own)
        run_id = None
        if own:
            first, own = run, False
    return first


def _execute_one(
    run_id: int | None, claimed: Run | None, *, keep_next: bool, own_message: bool
) -> tuple[Run | None, Run | None]:
    """Play one run (``claimed``: already claimed by this lane); returns it (None if not
    claimable) and the batch's next run, claimed for this lane, when ``keep_next`` asked to
    take it here."""
    timings = Timings() if settings.RUN_TIMINGS_FILE else None
    with collecting(timings) if timings is not None else contextlib.nullcontext():
        if claimed is not None:
            run = claimed
        else:
            with timed("claim"):
                run = run_claim(run_id=run_id)
        if run is None:
            logger.info("Run %s is not claimable (finished or running elsewhere).", run_id)
            finished = Run.objects.filter(pk=run_id).exclude(status=RunStatus.RUNNING)
            batch = RunBatch.objects.filter(runs__in=finished).first()
            if batch is not None:
                # A redelivered message of a finished run: make sure its batch moved along
                # (the first delivery may have died between closing the run and refreshing
                # the batch).
                batch_refresh(batch=batch)
            return None, None
        call_log = CallLogBuffer()
        try:
            outcome = _execute_claimed(run, call_log, timings)
            took, next_run = _close(run, outcome, call_log, keep_next=keep_next)
        except TRANSIENT_DB_ERRORS:
            # The model calls made are logged if the database takes them (they were paid
            # for), and the run, not closed, is given back to be played again; one this
            # lane took without a message of its own is handed back to the dispatcher (the
            # retried message is another run's).
            _flush_if_possible(call_log)
            _release(run, resend=not own_message)
            raise
        with timed("dispatch"):
            if next_run is not None:
                progress_now_and_then(run.batch)
            elif not took:
                next_run = _move_along(run, keep=keep_next)
            else:  # the lane found nothing left to take: the batch's full refresh
                refresh(run.batch, keep=False)
    if timings is not None:
        timings.append_to(settings.RUN_TIMINGS_FILE, run=run.pk, lane=not own_message)
    return run, next_run


def _move_along(run: Run, *, keep: bool) -> Run | None:
    """What an ended run that did not simply close its slot asks of its batch: another
    attempt, its rollout group's score, or (another worker took it over) the refresh; and
    for a lane, the next run."""
    if not getattr(run, "closed_here", False):
        # another worker took the run over (or it stopped before closing): its outcome as
        # stored (a few columns, not the whole row with its transcript)
        run.refresh_from_db(fields=["status", "retryable", "finished_at"])
    batch = run.batch
    if _retries(run):
        _retry(run)
    elif batch.group_size:
        # the run closed its slot: its rollout group is scored once its last member closes
        score_groups(batch, run.task_ref)
    keep = keep and run.status != RunStatus.CANCELLED
    return refresh(batch, keep=keep)[1]


def _retries(run: Run) -> bool:
    return (
        run.status == RunStatus.ERRORED and run.retryable and run.attempt < run.batch.max_attempts
    )


def _flush_if_possible(call_log: CallLogBuffer) -> None:
    try:
        call_log.flush()
    except TRANSIENT_DB_ERRORS:
        logger.warning("Could not write a run's call log: the database is unavailable.")


def _release(run: Run, *, resend: bool = False) -> None:
    """Give the claim back: the run is pending again and its retried message takes it at
    once (``resend``: it had no message of its own, so the next dispatch sends it). If the
    database is still away, the claim just goes stale and is swept."""
    extra = {"enqueued_at": None} if resend else {}
    claims.claim_of(run).give_back(status=RunStatus.PENDING, **extra)


@dataclass(frozen=True)
class _Outcome:
    """How a run ended, written by ``_close``."""

    status: str
    error: str = ""
    retryable: bool = False
    fields: dict = field(default_factory=dict)


def _execute_claimed(run: Run, call_log: CallLogBuffer, timings: Timings | None = None) -> _Outcome:
    """Play a claimed run; its model calls wait in ``call_log`` for the closing write."""
    batch = run.batch
    if run.claims > max_claims():
        return _Outcome(
            RunStatus.ERRORED,
            f"Its worker stopped {run.claims - 1} times while playing it (killed, perhaps for "
            "lack of memory); it was not started again.",
        )
    if batch.job.cancel_requested:  # the job as loaded with the claim, a moment ago
        return _Outcome(RunStatus.CANCELLED, "Cancelled before it started.")
    if batch.job.status == JobStatus.PENDING:
        with timed("start"):
            Job.objects.filter(pk=batch.job_id, status=JobStatus.PENDING).update(
                status=JobStatus.RUNNING,
                started_at=timezone.now(),
                heartbeat_at=timezone.now(),
            )
    usage = LLMUsage()
    started = time.monotonic()

    claim = claims.claim_of(run)

    def renew() -> bool:
        with timings.timed("heartbeat") if timings else contextlib.nullcontext():
            return claim.renew()

    heartbeat = Heartbeat(renew, name=f"run {run.pk}")
    try:
        with heartbeat, timed("play"):
            fields = play_run(run, usage, heartbeat, call_log)
    except TRANSIENT_DB_ERRORS:
        raise
    except RunCancelled:
        return _Outcome(RunStatus.CANCELLED, "Cancelled while running.")
    except RunUnavailable as exc:
        return _Outcome(RunStatus.ERRORED, str(exc))
    except ContextOverflow as exc:
        # the same conversation would overflow again: not worth a retry
        return _Outcome(RunStatus.ERRORED, exc.message, fields=_usage_fields(usage, started))
    except LLMError as exc:
        return _Outcome(
            RunStatus.ERRORED, exc.message, retryable=True, fields=_usage_fields(usage, started)
        )
    except Exception:
        logger.exception("Run %s of batch %s crashed", run.pk, batch.pk)
        return _Outcome(
            RunStatus.ERRORED,
            "The run stopped on an unexpected error; see the worker log.",
            retryable=True,
            fields=_usage_fields(usage, started),
        )
    return _Outcome(RunStatus.SUCCEEDED, fields={**fields, **_usage_fields(usage, started)})


def _usage_fields(usage: LLMUsage, started: float) -> dict:
    return {
        "tokens_in": usage.tokens_in,
        "tokens_out": usage.tokens_out,
        "cost": usage.cost,
        "llm_calls": usage.calls,
        "context_events": usage.context_events,
        "latency_ms": round((time.monotonic() - started) * 1000),
    }


def _close(
    run: Run, outcome: _Outcome, call_log: CallLogBuffer, *, keep_next: bool = False
) -> tuple[bool, Run | None]:
    """Write the run's model calls and its outcome — the outcome only if this worker still
    holds the claim (a run taken over by another worker keeps that worker's result) — and,
    for a lane whose run simply closed its slot, take the batch's next run: one transaction
    (on SQLite one wait for the write lock instead of three, on PostgreSQL one commit).
    The transcript is stored here, once. Returns whether the next run was looked for, and
    the run taken (None if none was left)."""
    now = timezone.now()
    fields = {
        "status": outcome.status,
        "error": outcome.error,
        "retryable": outcome.retryable,
        "finished_at": now,
        "heartbeat_at": now,
        **outcome.fields,
    }
    took, next_run = False, None
    calls = list(call_log.rows)
    try:
        with timed("close"), transaction.atomic():
            call_log.flush()  # the run's model calls, in one write
            with timed("store"):
                written = claims.claim_of(run).finish(**fields)
            run.closed_here = bool(written)
            if written:
                # the object now says what the row says, without reading it back
                for name, value in fields.items():
                    setattr(run, name, value)
                if (
                    keep_next
                    and outcome.status != RunStatus.CANCELLED
                    and not _retries(run)
                    and not run.batch.group_size
                ):
                    took = True
                    with timed("take"):
                        next_run = take_next(run.batch)
    except BaseException:
        call_log.unwritten(calls)  # rolled back with the rest: the caller may log them alone
        run.closed_here = False
        raise
    if not written:
        logger.warning("Run %s was taken over by another worker; dropping this result.", run.pk)
    return took, next_run


def _retry(run: Run) -> Run:
    """The next attempt of an errored trial: a new pending row (found, not duplicated, when
    a redelivered message gets here twice)."""
    copied = {
        name: getattr(run, name)
        for name in (
            "project_id",
            "task_id",
            "task_key",
            "task_title",
            "environment_id",
            "environment_name",
            "split",
            "capabilities",
            "seed",
            "policy_name",
            "endpoint_name",
            "model",
        )
    }
    with transaction.atomic():
        retry, _ = Run.objects.get_or_create(
            batch_id=run.batch_id,
            task_ref=run.task_ref,
            trial=run.trial,
            attempt=run.attempt + 1,
            defaults=copied,
        )
    return retry
