"""Claim a run (``RUNS``, the core ``Claimable``) and load what playing it needs.

The claim is the core's conditional UPDATE; the claimed run is then read back with its
batch's job's ``cancel_requested`` and ``status`` as they are at that moment (one SELECT of
the run's own row).

What the run plays against — its batch with the endpoints, its task, the task's
environment — changes rarely and is the same for a batch's hundreds of runs, so it comes
from a per-process cache, read again from the database when older than ``MAX_AGE_S``: an
edit of an endpoint, a batch or an environment committed before a run is claimed is seen by
that run at most ``MAX_AGE_S`` (1 s) later. Loading them with every run instead (one
``select_related`` SELECT of eight models) made a worker's CPU per step 4.8 → 7.1 ms on
PostgreSQL (``bench/NOTES.md``, "One claimable unit"). Each run gets its own shallow copies
of the cached instances (threads of one worker play runs of one batch at once and never
share a model instance); their field values, JSON documents included, are shared and read
only.
"""

from __future__ import annotations

import copy
import threading
import time
from datetime import datetime

from django.db import connection, transaction
from django.db.models import F, Q

from apps.core.claims import Claim, Claimable
from apps.environments.models import Environment, Task
from apps.runs.models import Run, RunBatch, RunStatus

RUNS = Claimable(Run, waiting=Q(status=RunStatus.PENDING), held=Q(status=RunStatus.RUNNING))

MAX_AGE_S = 1.0
_MAX_ENTRIES = 512
_clock = time.monotonic  # (tests move it on)


def claim_of(run: Run) -> Claim:
    """The claim this worker holds on ``run`` (its writes are fenced by the token)."""
    return Claim(RUNS, run.pk, run.claim_token)


def _claimed(pk: int, *, now: datetime, before=None, when: Q | None = None, **values):
    # A run taken over plays again from its start: a dead holder's checkpoint is dropped.
    claim = RUNS.claim(
        pk,
        now=now,
        before=before,
        when=when,
        status=RunStatus.RUNNING,
        started_at=now,
        transcript=[],
        **values,
    )
    if claim is None:
        return None
    run = Run.objects.annotate(
        job_cancel_requested=F("batch__job__cancel_requested"), job_status=F("batch__job__status")
    ).get(pk=pk)
    batch = _batch(run.batch_id)
    batch.job.cancel_requested = run.job_cancel_requested
    batch.job.status = run.job_status
    Run.batch.field.set_cached_value(run, batch)
    Run.task.field.set_cached_value(run, _task(run.task_id))
    return run


def claim_run(run_id: int, *, now: datetime, before: datetime) -> Run | None:
    """Claim run ``run_id`` (pending, or running with no heartbeat since ``before``) and
    return it loaded; None if it is finished or alive elsewhere."""
    return _claimed(run_id, now=now, before=before)


def take_next(batch_id: int, *, now: datetime) -> Run | None:
    """Take and claim the batch's first unsent pending run (marked sent), unless the batch's
    job was asked to cancel; None if another lane won that run or none is left. The claim
    checks again that the run is unsent, so two lanes never take one run; on PostgreSQL
    lanes asking at once each skip the runs the others are taking (``SKIP LOCKED``) instead
    of all waiting on the first one's row lock and finding it taken."""
    unsent = Run.objects.filter(
        batch_id=batch_id,
        status=RunStatus.PENDING,
        enqueued_at__isnull=True,
        batch__job__cancel_requested=False,
    ).order_by("pk")
    if connection.features.has_select_for_update_skip_locked:
        unsent = unsent.select_for_update(skip_locked=True, of=("self",))
    with transaction.atomic(savepoint=False):
        pk = unsent.values_list("pk", flat=True).first()
        if pk is None:
            return None
        return _claimed(pk, now=now, when=Q(enqueued_at__isnull=True), enqueued_at=now)


class _Cache:
    """Instances by id, each read again once older than ``MAX_AGE_S``.

    A read is made by one thread while the process's others wait for it (a threads worker's
    lanes all claim at a batch's start, and each read the batch where one read was kept),
    and it reads every entry that has gone stale with the one asked for, in one query: a
    batch's lanes go through its tasks and environments in turn, and reading each of them
    again on its own once a second was a fifth of a PostgreSQL worker's queries."""

    def __init__(self, load_many):
        self.load_many = load_many  # (ids, database alias) -> {id: instance}
        self.entries: dict[int, tuple[float, object]] = {}
        self.used: set[int] = set()  # entries asked for since they were read
        self.lock = threading.Lock()
        self.reading = threading.Lock()

    def get(self, pk: int, using: str):
        entry = self.entries.get(pk)
        if entry is not None and _clock() - entry[0] < MAX_AGE_S:
            self.used.add(pk)
            return entry[1]
        with self.reading:
            now = _clock()
            entry = self.entries.get(pk)
            if entry is not None and now - entry[0] < MAX_AGE_S:
                self.used.add(pk)
                return entry[1]  # read by the thread this one waited for
            with self.lock:
                # stale entries still in use are read again with this one; the others go
                stale = [key for key, kept in self.entries.items() if now - kept[0] >= MAX_AGE_S]
                for key in stale:
                    if key not in self.used:
                        del self.entries[key]
                again = [key for key in stale if key in self.used][:_MAX_ENTRIES]
                self.used.difference_update(again)
                self.used.discard(pk)
            wanted = {pk, *again}
            loaded = self.load_many(wanted, using)
            with self.lock:  # a threads-pool worker claims many runs at once
                for key in wanted:
                    if key in loaded:
                        self.entries[key] = (now, loaded[key])
                    else:  # deleted
                        self.entries.pop(key, None)
                if len(self.entries) > _MAX_ENTRIES:
                    self.entries = dict(list(self.entries.items())[-_MAX_ENTRIES:])
                    self.used &= self.entries.keys()
        return loaded.get(pk)

    def clear(self) -> None:
        with self.lock:
            self.entries.clear()
            self.used.clear()


def _load_batches(pks, using: str) -> dict[int, RunBatch]:
    batches = RunBatch.objects.using(using).select_related(
        "job", "endpoint", "simulator_endpoint", "judge_endpoint"
    )
    return {batch.pk: batch for batch in batches.filter(pk__in=pks)}


_BATCHES = _Cache(_load_batches)
_TASKS = _Cache(lambda pks, using: Task.objects.using(using).in_bulk(pks))
_ENVIRONMENTS = _Cache(lambda pks, using: Environment.objects.using(using).in_bulk(pks))


def clear() -> None:
    """Forget every cached instance (tests: ids come back after a rollback)."""
    for cache in (_BATCHES, _TASKS, _ENVIRONMENTS):
        cache.clear()


def _own(instance, *relations: str):
    """A shallow copy of a cached instance for one run, with copies of its related ones."""
    clone = copy.copy(instance)  # (Django's copy has its own related-objects cache)
    for name in relations:
        related = getattr(instance, name)
        if related is not None:
            related = copy.copy(related)
        instance._meta.get_field(name).set_cached_value(clone, related)
    return clone


def _batch(pk: int, using: str = "default") -> RunBatch:
    batch = _BATCHES.get(pk, using)
    if batch is None:
        raise RunBatch.DoesNotExist(f"Run batch {pk} does not exist.")
    return _own(batch, "job", "endpoint", "simulator_endpoint", "judge_endpoint")


def _task(pk: int | None, using: str = "default") -> Task | None:
    task = None if pk is None else _TASKS.get(pk, using)
    if task is None:
        return None
    environment = _ENVIRONMENTS.get(task.environment_id, using)
    if environment is None:  # deleted meanwhile, with its tasks
        return None
    task = copy.copy(task)
    Task.environment.field.set_cached_value(task, copy.copy(environment))
    return task
