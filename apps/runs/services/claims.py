"""Claim a run and load what playing it needs: one statement per run, none compiled.

A run is a core ``Claimable`` (``RUNS``: its heartbeat, fenced writes, give-back and sweep).
Its claim and a lane's take are the ``Claimable``'s conditional UPDATE written as one
``UPDATE … RETURNING`` of the run's own row: the run is taken (pending → running, or a dead
holder's running run) and read back by the same statement, with its batch's job's
``cancel_requested`` and ``status`` as they are at that moment. Its SQL is written once per
process and database: the plain ORM (the core's UPDATE, then a SELECT) made a worker's CPU
per step on PostgreSQL 4.4 and 4.8 → 6.2 and 7.1 ms in two pairs (``bench/NOTES.md``,
"One claimable unit").

What the run plays against — its batch with the endpoints, its task, the task's
environment — changes rarely and is the same for a batch's hundreds of runs, so it comes
from a per-process cache, read again from the database when older than ``MAX_AGE_S``: an
edit of an endpoint, a batch or an environment committed before a run is claimed is seen by
that run at most ``MAX_AGE_S`` (1 s) later. The job's row is the exception: its
cancellation and status are the claim's own (fresh) values. Each run gets its own shallow
copies of the cached instances (threads of one worker play runs of one batch at once and
never share a model instance); their field values, JSON documents included, are shared and
read only.
"""

from __future__ import annotations

import copy
import threading
import time
import uuid
from datetime import datetime

from django.db import connections
from django.db.models import Q
from django.db.models.sql import Query

from apps.core.claims import Claim, Claimable
from apps.core.leases import worker_name
from apps.core.models import Job
from apps.environments.models import Environment, Task
from apps.runs.models import Run, RunBatch, RunStatus

RUNS = Claimable(Run, waiting=Q(status=RunStatus.PENDING), held=Q(status=RunStatus.RUNNING))

MAX_AGE_S = 1.0
_MAX_ENTRIES = 512
_clock = time.monotonic  # (tests move it on)


def claim_of(run: Run) -> Claim:
    """The claim this worker holds on ``run`` (its writes are fenced by the token)."""
    return Claim(RUNS, run.pk, run.claim_token)


class _Statements:
    """The claim's SQL, for one database, and its returned row read as a ``Run``."""

    def __init__(self, alias: str):
        connection = connections[alias]
        self.alias = alias
        quote = connection.ops.quote_name
        run, batch, job = Run._meta.db_table, RunBatch._meta.db_table, Job._meta.db_table
        run_q, batch_q, job_q = quote(run), quote(batch), quote(job)
        fields = Run._meta.concrete_fields
        self.attnames = [field.attname for field in fields]
        compiler = Query(Run).get_compiler(connection=connection)
        columns = [field.get_col(run) for field in fields]
        # (the backend's and the fields' converters, as the ORM applies them to a row read)
        self.converters = list(compiler.get_converters(columns).items())
        # the job's row as the claim saw it (a correlated subquery: the returned row's batch)
        job_of_run = (
            f"FROM {job_q} INNER JOIN {batch_q} ON ({batch_q}.{quote('job_id')} = "
            f"{job_q}.{quote('id')}) WHERE {batch_q}.{quote('id')} = {run_q}.{quote('batch_id')}"
        )
        returning = ", ".join(f"{run_q}.{quote(field.column)}" for field in fields)
        returning += (
            f", (SELECT {job_q}.{quote('cancel_requested')} {job_of_run})"
            f", (SELECT {job_q}.{quote('status')} {job_of_run})"
        )
        # _claim_fields' values; ``transcript``: a dead holder's checkpoint is dropped
        claim = (
            f"{quote('status')} = %s, {quote('claim_token')} = %s, "
            f"{quote('claims')} = ({quote('claims')} + 1), {quote('worker')} = %s, "
            f"{quote('started_at')} = %s, {quote('heartbeat_at')} = %s, "
            f"{quote('transcript')} = '[]'"
        )
        # run_claim: a pending run, or a running one whose holder stopped heartbeating
        self.claim = (
            f"UPDATE {run_q} SET {claim} WHERE {quote('id')} = %s AND "
            f"({quote('status')} = %s OR ({quote('status')} = %s AND "
            f"({quote('heartbeat_at')} < %s OR {quote('heartbeat_at')} IS NULL))) "
            f"RETURNING {returning}"
        )
        # take_next: the batch's first unsent pending run, marked sent and claimed at once.
        # The row's own conditions stay in the UPDATE's WHERE, so a concurrent writer's change
        # is seen (PostgreSQL rechecks them on the row it waited for) and two lanes never
        # take one run.
        first_unsent = (
            f"SELECT U0.{quote('id')} FROM {run_q} U0 "
            f"INNER JOIN {batch_q} U1 ON (U0.{quote('batch_id')} = U1.{quote('id')}) "
            f"INNER JOIN {job_q} U2 ON (U1.{quote('job_id')} = U2.{quote('id')}) "
            f"WHERE U0.{quote('batch_id')} = %s AND U0.{quote('status')} = %s AND "
            f"U0.{quote('enqueued_at')} IS NULL AND U2.{quote('cancel_requested')} = %s "
            f"ORDER BY U0.{quote('id')} ASC LIMIT 1"
        )
        if connection.features.has_select_for_update_skip_locked:
            # PostgreSQL: lanes asking at once each get a run of their own, instead of all
            # picking the same first one, waiting on its row lock and finding it taken (one
            # wins, the others ask again: at C = 64 most takes were such retries).
            first_unsent += " FOR UPDATE OF U0 SKIP LOCKED"
        self.take = (
            f"UPDATE {run_q} SET {claim}, {quote('enqueued_at')} = %s "
            f"WHERE {quote('id')} = ({first_unsent}) AND {quote('status')} = %s AND "
            f"{quote('enqueued_at')} IS NULL RETURNING {returning}"
        )

    def instance(self, values: list) -> Run:
        for position, (functions, expression) in self.converters:
            for function in functions:
                values[position] = function(values[position], expression, connections[self.alias])
        return Run.from_db(self.alias, self.attnames, values)


_STATEMENTS: dict[str, _Statements] = {}


def _statements(alias: str) -> _Statements:
    statements = _STATEMENTS.get(alias)
    if statements is None:
        statements = _STATEMENTS[alias] = _Statements(alias)
    return statements


def _claim_values(now: datetime, connection) -> list:
    stamp = connection.ops.adapt_datetimefield_value(now)
    return [RunStatus.RUNNING.value, uuid.uuid4().hex, worker_name(), stamp, stamp]


def claim_run(run_id: int, *, now: datetime, before: datetime, using: str = "default"):
    """Claim run ``run_id`` (pending, or running with no heartbeat since ``before``) and
    return it loaded; None if it is finished or alive elsewhere."""
    connection = connections[using]
    statements = _statements(using)
    params = [
        *_claim_values(now, connection),
        run_id,
        RunStatus.PENDING.value,
        RunStatus.RUNNING.value,
        connection.ops.adapt_datetimefield_value(before),
    ]
    return _execute(statements.claim, params, statements, using)


def take_next(batch_id: int, *, now: datetime, using: str = "default"):
    """Take and claim the batch's first unsent pending run (marked sent), unless the batch's
    job was asked to cancel; None if another lane won that run or none is left."""
    connection = connections[using]
    statements = _statements(using)
    stamp = connection.ops.adapt_datetimefield_value(now)
    params = [
        *_claim_values(now, connection),
        stamp,
        batch_id,
        RunStatus.PENDING.value,
        False,
        RunStatus.PENDING.value,
    ]
    return _execute(statements.take, params, statements, using)


def _execute(sql: str, params: list, statements: _Statements, using: str) -> Run | None:
    with connections[using].cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    if not rows:
        return None
    values = list(rows[0])
    cancel_requested, job_status = values[-2:]
    run = statements.instance(values[:-2])
    batch = _batch(run.batch_id, using)
    batch.job.cancel_requested = bool(cancel_requested)
    batch.job.status = job_status
    Run.batch.field.set_cached_value(run, batch)
    Run.task.field.set_cached_value(run, _task(run.task_id, using))
    return run


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


def _batch(pk: int, using: str) -> RunBatch:
    batch = _BATCHES.get(pk, using)
    if batch is None:
        raise RunBatch.DoesNotExist(f"Run batch {pk} does not exist.")
    return _own(batch, "job", "endpoint", "simulator_endpoint", "judge_endpoint")


def _task(pk: int | None, using: str) -> Task | None:
    task = None if pk is None else _TASKS.get(pk, using)
    if task is None:
        return None
    environment = _ENVIRONMENTS.get(task.environment_id, using)
    if environment is None:  # deleted meanwhile, with its tasks
        return None
    task = copy.copy(task)
    Task.environment.field.set_cached_value(task, copy.copy(environment))
    return task
