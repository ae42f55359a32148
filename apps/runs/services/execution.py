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
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q, Value
from django.db.models.functions import Greatest
from django.utils import timezone
from django.utils.module_loading import import_string

from apps.core.leases import (
    TRANSIENT_DB_ERRORS,
    Heartbeat,
    max_claims,
    stale_after,
)
from apps.core.models import ACTIVE_JOB_STATUSES, Job, JobStatus
from apps.core.services import send_task
from apps.core.text import count_of
from apps.core.timings import Timings, collecting, timed
from apps.environments.models import Environment
from apps.environments.specs import environment_document, environment_documents
from apps.llm.call_log import CallLogBuffer
from apps.llm.exceptions import LLMError
from apps.llm.judge import LLMJudge
from apps.runs.agent import LLMAgentPolicy, LLMUsage, LLMUserSimulator
from apps.runs.context import ContextOverflow
from apps.runs.models import (
    Executor,
    PolicyKind,
    Run,
    RunBatch,
    RunRole,
    RunStatus,
    UserSide,
)
from apps.runs.services import claims
from apps.runs.services.groups import rollout_group_score, rollout_groups_score
from coworkenv_engine import spec as engine_spec
from coworkenv_engine.policies import OraclePolicy
from coworkenv_engine.problems import SpecError
from coworkenv_engine.runner import run_task
from coworkenv_engine.simulator import Limits

logger = logging.getLogger(__name__)


class RunCancelled(Exception):
    """The batch was cancelled while this run was playing."""


class RunUnavailable(Exception):
    """The run cannot be played at all (its task is gone, its spec no longer loads):
    re-running would not help."""


def final_runs_q(batch: RunBatch) -> Q:
    """Runs that close their slot: graded, cancelled, or errored with no attempt left."""
    return (
        Q(status__in=[RunStatus.SUCCEEDED, RunStatus.CANCELLED])
        | Q(status=RunStatus.ERRORED, retryable=False)
        | Q(status=RunStatus.ERRORED, attempt__gte=batch.max_attempts)
    )


def run_claim(*, run_id: int, stale: timedelta | None = None) -> Run | None:
    """Take a run for this worker, loaded, or None if it is finished or alive elsewhere
    (see ``claims``)."""
    now = timezone.now()
    return claims.claim_run(run_id, now=now, before=now - (stale or stale_after()))


class _CancelCheck:
    """Called before every model request: stops the run if another worker took the run over
    (the heartbeat thread found its claim gone) or its batch was cancelled. The batch is
    looked up at most every ``EVERY_S`` seconds, not once per step; the first look is at the
    job row loaded with the claim a moment ago, without a query."""

    EVERY_S = 1.0

    def __init__(self, run: Run, heartbeat: Heartbeat):
        self.run = run
        self.heartbeat = heartbeat
        self._checked = time.monotonic()
        self._first = True

    def __call__(self) -> None:
        if self.heartbeat.lost:
            raise RunCancelled
        if self._first:
            self._first = False
            if self.run.batch.job.cancel_requested:
                raise RunCancelled
        now = time.monotonic()
        if now - self._checked < self.EVERY_S:
            return
        self._checked = now
        with timed("cancel_check"):
            cancelled = Job.objects.filter(pk=self.run.batch.job_id, cancel_requested=True)
            if cancelled.exists():
                raise RunCancelled


class _LoadedSpecs:
    """Loaded specs by (environment id, revision, spec hash), so that a worker replaying an
    environment for many trials builds and checks it once (every edit bumps the revision).
    The least recently used is dropped past ``SIZE`` (a first-in-first-out cache smaller than
    a batch's environments missed on every run: its lanes go through them in turn).

    The first lane of a process to miss a spec of a batch loads the batch's environments
    it has not loaded yet — up to ``PRELOAD`` of them, their rows read together
    (``environment_documents``) — while the process's other lanes of that batch wait for it:
    a threads worker's lanes all start at once, and loading 32 environments one by one (seven
    queries each, ~4.5 ms on PostgreSQL) under one GIL held back their first calls and the
    worker's consumer handing out the batch's other first runs. A spec still missing after
    that (an environment edited meanwhile, or past ``PRELOAD``) is built alone, by one thread
    while the process's others wanting it wait."""

    SIZE = 256
    PRELOAD = 64

    def __init__(self):
        self._entries: OrderedDict[tuple, tuple] = OrderedDict()
        self._lock = threading.Lock()
        self._building: dict[int, threading.Lock] = {}
        self._preloading: dict[int, threading.Lock] = {}
        self._preloaded: set[int] = set()

    def get(self, environment, batch_id: int | None = None) -> tuple[object, str, int]:
        """The environment's loaded spec, its hash and its revision."""
        key = (environment.pk, environment.revision, environment.spec_hash)
        cached = self._cached(key)
        if cached is not None:
            return cached
        if batch_id is not None:
            self._preload(batch_id)
            cached = self._cached(key)
            if cached is not None:
                return cached
        with self._lock:
            building = self._building.setdefault(environment.pk, threading.Lock())
        with building:
            # The spec is built from the environment's rows as they are now, so its revision
            # and hash are read now too (the instance a run got may be up to a second old).
            environment = Environment.objects.select_related("latest_validation").get(
                pk=environment.pk
            )
            key = (environment.pk, environment.revision, environment.spec_hash)
            cached = self._cached(key)  # built by the thread this one waited for
            if cached is None:
                cached = self._build(environment, environment_document(environment))
        return cached

    def _preload(self, batch_id: int) -> None:
        """Load the batch's environments this process lacks, once per batch and process."""
        with self._lock:
            if batch_id in self._preloaded:
                return
            preloading = self._preloading.setdefault(batch_id, threading.Lock())
        with preloading:
            with self._lock:
                if batch_id in self._preloaded:
                    return  # done by the thread this one waited for
            ids = (
                Run.objects.filter(batch_id=batch_id, environment__isnull=False)
                .values_list("environment_id", flat=True)
                .distinct()
            )
            environments = Environment.objects.filter(pk__in=list(ids)).select_related(
                "latest_validation"
            )
            missing = [
                environment
                for environment in environments.order_by("pk")
                if self._cached((environment.pk, environment.revision, environment.spec_hash))
                is None
            ][: self.PRELOAD]
            for environment, document in zip(
                missing, environment_documents(missing).values(), strict=True
            ):
                try:
                    self._build(environment, document)
                except SpecError:
                    continue  # the run that plays it builds it alone and reports why
            with self._lock:
                self._preloaded.add(batch_id)
                self._preloading.pop(batch_id, None)
                while len(self._preloaded) > self.SIZE:
                    self._preloaded.pop()

    def _build(self, environment, document: dict) -> tuple[object, str, int]:
        # A document its last validation accepted as it is (same canonical hash) is built
        # without checking it again.
        report = environment.latest_validation
        certified = report.spec_hash if report is not None and report.valid else None
        document, spec = engine_spec.load_canonical(document, certified_hash=certified)
        spec_hash = environment.spec_hash or engine_spec.canonical_hash(document)
        cached = (spec, spec_hash, environment.revision)
        with self._lock:
            self._entries[(environment.pk, environment.revision, environment.spec_hash)] = cached
            while len(self._entries) > self.SIZE:
                self._entries.popitem(last=False)
        return cached

    def _cached(self, key: tuple) -> tuple | None:
        with self._lock:
            cached = self._entries.get(key)
            if cached is not None:
                self._entries.move_to_end(key)
            return cached


_LOADED_SPECS = _LoadedSpecs()


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
                _progress_now_and_then(run.batch)
            elif not took:
                next_run = _move_along(run, keep=keep_next)
            else:  # the lane found nothing left to take: the batch's full refresh
                _refresh(run.batch, keep=False)
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
        _score_groups(batch, run.task_ref)
    keep = keep and run.status != RunStatus.CANCELLED
    return _refresh(batch, keep=keep)[1]


def _retries(run: Run) -> bool:
    return (
        run.status == RunStatus.ERRORED and run.retryable and run.attempt < run.batch.max_attempts
    )


def _flush_if_possible(call_log: CallLogBuffer) -> None:
    try:
        call_log.flush()
    except TRANSIENT_DB_ERRORS:
        logger.warning("Could not write a run's call log: the database is unavailable.")


def _score_groups(batch: RunBatch, task_ref: int | None = None) -> None:
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
            fields = _play(run, usage, heartbeat, call_log)
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


class _TurnCheckpoints:
    """The policy, and at each turn's end the transcript so far stored on the run — at most
    one write per turn, and only once the run has played ``RUN_CHECKPOINT_EVERY_S`` since
    it started or since the last one (short runs write nothing until their outcome).

    A checkpoint is for the run page and progress, not a point to resume from: a run taken
    over after its worker died plays again from its start (its claim drops the checkpoint),
    because the model's answers, the simulated user's and the context manager's summaries
    of the lost part cannot be had again (sampled, not recorded: the call log of a killed
    worker's run is in its memory), and a trajectory spliced from two samplings would not
    be one episode of the policy. Replays are exact on the environment's side (the engine
    is deterministic in the seed and the calls), so the replayed run is a fresh, whole
    episode, graded once."""

    def __init__(self, policy, run: Run):
        self.policy = policy
        self.name = policy.name
        self.run = run
        self.turn = 0
        self.every_s = settings.RUN_CHECKPOINT_EVERY_S
        self.last = time.monotonic()
        self.written = 0

    def act(self, view):
        if view.turn > self.turn and view.round == 0:
            self.turn = view.turn
            now = time.monotonic()
            if now - self.last >= self.every_s:
                self.last = now
                self._store(view.messages[:-1])  # through the end of the turn before
        return self.policy.act(view)

    def _store(self, transcript: list[dict]) -> None:
        with timed("checkpoint"):
            claims.claim_of(self.run).renew(transcript=transcript)
        self.written += 1


def _play(
    run: Run, usage: LLMUsage, heartbeat: Heartbeat, call_log: CallLogBuffer | None = None
) -> dict:
    batch = run.batch
    task = run.task
    if task is None:
        raise RunUnavailable(
            "The task was deleted (or replaced by a whole-spec edit) after the batch was made."
        )
    try:
        spec, spec_hash, revision = _LOADED_SPECS.get(task.environment, run.batch_id)
    except Environment.DoesNotExist:
        raise RunUnavailable("The task's environment was deleted.") from None
    except SpecError as exc:
        first = exc.problems[0].message if exc.problems else str(exc)
        raise RunUnavailable(f"The environment's spec does not load: {first}") from None
    before_call = _CancelCheck(run, heartbeat)
    if batch.policy_kind == PolicyKind.ORACLE:
        policy = OraclePolicy()
    else:
        if batch.endpoint is None:
            raise RunUnavailable("The batch's model endpoint was deleted.")
        policy = LLMAgentPolicy(
            endpoint=batch.endpoint,
            job=batch.job,
            usage=usage,
            before_call=before_call,
            temperature=batch.temperature,
            call_log=call_log,
        )
    user_turn = None
    if batch.user_side == UserSide.SIMULATOR:
        if batch.simulator_endpoint is None:
            raise RunUnavailable("The batch's user-simulator endpoint was deleted.")
        user_turn = LLMUserSimulator(
            endpoint=batch.simulator_endpoint,
            job=batch.job,
            usage=usage,
            before_call=before_call,
            call_log=call_log,
        )
    judge = None
    if batch.judge_endpoint is not None:
        judge = LLMJudge(
            endpoint=batch.judge_endpoint,
            project_id=batch.project_id,
            job=batch.job,
            on_result=usage.add,
            before_call=before_call,
        )
    elif batch.judge_model:
        raise RunUnavailable("The batch's judge endpoint was deleted.")
    result = run_task(
        spec,
        task.key,
        _TurnCheckpoints(policy, run),
        judge=judge,
        seed=run.seed,
        faults=batch.faults,
        limits=Limits(
            max_calls=batch.max_tool_calls, max_rounds_per_turn=batch.max_rounds_per_turn
        ),
        user_turn=user_turn,
    )
    if judge is not None and judge.interrupted is not None:
        raise judge.interrupted  # the batch was cancelled while the judge was about to ask
    if judge is not None and judge.outage is not None:
        # The judge could not score (after the client's retries): the grading is not the
        # agent's, so the run errors and is re-run like any other errored trial.
        raise judge.outage
    data = result.to_dict()
    grading = data["grading"]
    return {
        "policy_name": result.policy,
        "environment_revision": revision,
        "spec_hash": spec_hash,
        "transcript": data["transcript"],
        "tools": data["tools"],
        "audit_log": data["audit_log"],
        "exogenous_log": data["exogenous_log"],
        "final_state_hash": result.state_hash,
        "verdicts": grading["verdicts"],
        "scoring": grading["config"],
        "completion": grading["completion"],
        "safety": grading["safety"],
        "robustness": grading["robustness"],
        "score": grading["score"],
        "passed": grading["passed"],
        "strict": grading["strict"],
        "stop_reason": result.stop_reason,
        "tool_calls": len(result.audit_log),
        "tool_errors": len(result.tool_errors),
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
                        next_run = _take_next(run.batch)
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


def batch_refresh(*, batch: RunBatch) -> Job:
    """Count finished slots into the batch's job, finish the job when every slot has a final
    run, cancel what is left once cancellation was asked, else enqueue the next runs.

    Race-free: progress only grows (GREATEST of the stored and the recounted value), and the
    job is finished by a conditional UPDATE that only one caller wins.
    """
    return _refresh(batch, keep=False)[0]


# When this process last wrote each batch's progress (lanes write it at most once a second).
_PROGRESS_WRITTEN: dict[int, float] = {}


def _refresh(batch: RunBatch, *, keep: bool) -> tuple[Job | None, Run | None]:
    """``batch_refresh``; with ``keep`` (a lane whose run just ended), the batch's next run
    is taken and claimed for the caller to play (see ``run_execute``): the place the ended
    run held goes to it, so the batch's in-flight count stays as it was and no batch-wide
    lock or recount is needed (the job is then not read: None is returned for it).
    Progress is then written at most once a second per process. Only when nothing is left
    to take does the lane do the full refresh (and may finish the job)."""
    if keep:
        kept = _take_next(batch)
        if kept is not None:
            _progress_now_and_then(batch)
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
        _score_groups(batch)  # groups whose own scoring call was lost
        _finish_job(batch)
    elif job.cancel_requested:
        if not Run.objects.filter(batch=batch, status=RunStatus.RUNNING).exists():
            _finish_job(batch)
    else:
        batch_dispatch(batch=batch)
    job.refresh_from_db()
    return job, None


def _progress_now_and_then(batch: RunBatch) -> None:
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


def _take_next(batch: RunBatch) -> Run | None:
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
