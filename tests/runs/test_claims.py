"""A run's claim (``apps.runs.services.claims``): the core's conditional UPDATE, then the run
as stored with its job's cancellation as of the claim, and its batch, endpoints and task
from the worker's cache — edits seen within ``MAX_AGE_S``, and no model instance shared
between two runs."""

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from apps.core.models import Job, JobStatus
from apps.llm.services import endpoint_create, endpoint_update
from apps.runs.models import Executor, PolicyKind, Run, RunStatus
from apps.runs.services import (
    BatchSettings,
    TaskSelection,
    claims,
    run_batch_create,
    run_claim,
    run_execute,
)
from apps.runs.services.progress import take_next

pytestmark = pytest.mark.django_db(transaction=True)


def celery_batch(project, author, environments, *, trials: int, concurrency: int):
    endpoint = endpoint_create(
        project=project,
        created_by=author,
        name="claims",
        base_url="http://127.0.0.1:9/v1",
        model="before",
    )
    return run_batch_create(
        project=project,
        user=author,
        policy_kind=PolicyKind.ENDPOINT,
        endpoint=endpoint,
        selection=TaskSelection(environments=tuple(e.pk for e in environments)),
        settings=BatchSettings(trials=trials, concurrency=concurrency),
        executor=Executor.CELERY,
    )


@pytest.fixture
def batch(project, author, sample_environments):
    return celery_batch(project, author, sample_environments[:1], trials=4, concurrency=2)


def pending(batch) -> list[int]:
    return list(
        Run.objects.filter(batch=batch, status=RunStatus.PENDING)
        .order_by("id")
        .values_list("pk", flat=True)
    )


def in_threads(work, arguments) -> None:
    """``work(argument)`` in a thread each, all at once, each closing its own connection."""

    def run(argument):
        try:
            work(argument)
        finally:
            connection.close()  # this thread's own

    threads = [threading.Thread(target=run, args=(argument,)) for argument in arguments]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_a_claimed_run_is_loaded_as_its_row_says(batch):
    run_id = pending(batch)[0]
    Run.objects.filter(pk=run_id).update(
        transcript=[{"role": "user", "content": "a dead holder's checkpoint"}],
        heartbeat_at=timezone.now() - timedelta(hours=1),
    )
    run = run_claim(run_id=run_id)
    stored = Run.objects.get(pk=run_id)
    for field in Run._meta.concrete_fields:
        assert getattr(run, field.attname) == getattr(stored, field.attname), field.name
    assert (run.status, run.claims, run.transcript) == (RunStatus.RUNNING, 1, [])
    assert run.claim_token and run.started_at.tzinfo is not None
    assert run.batch == batch and run.batch.endpoint.model == "before"
    assert run.task.pk == run.task_id and run.task.environment.pk == run.environment_id
    assert run_claim(run_id=run_id) is None  # alive: never claimed twice


def test_two_runs_of_one_batch_share_no_model_instance(batch):
    first, second = (run_claim(run_id=pk) for pk in pending(batch)[:2])
    pairs = [
        (first, second),
        (first.batch, second.batch),
        (first.batch.job, second.batch.job),
        (first.batch.endpoint, second.batch.endpoint),
        (first.task, second.task),
        (first.task.environment, second.task.environment),
    ]
    for one, other in pairs:
        assert one is not other
    first.batch.job.cancel_requested = True
    first.batch.endpoint.model = "changed by one run"
    assert not second.batch.job.cancel_requested
    assert second.batch.endpoint.model == "before"


def test_runs_claimed_by_threads_at_once_share_no_model_instance(batch):
    claimed, runs = [], pending(batch)
    in_threads(lambda run_id: claimed.append(run_claim(run_id=run_id)), runs)
    assert len(claimed) == len(runs) >= 4
    for attribute in (
        lambda run: run.batch,
        lambda run: run.batch.job,
        lambda run: run.batch.endpoint,
        lambda run: run.task.environment,
    ):
        assert len({id(attribute(run)) for run in claimed}) == len(claimed)


def test_threads_claiming_at_once_read_the_batch_once(batch, monkeypatch):
    """Lanes starting together wait for the one read of their batch (with its job and
    endpoints) instead of each reading it; each still gets its own copy."""
    claims.clear()
    reads = []
    load = claims._BATCHES.load_many

    def slow_load(pks, using):
        reads.append(sorted(pks))
        time.sleep(0.1)  # the other lanes ask meanwhile
        return load(pks, using)

    monkeypatch.setattr(claims._BATCHES, "load_many", slow_load)
    claimed = []
    in_threads(lambda run_id: claimed.append(run_claim(run_id=run_id)), pending(batch))
    assert reads == [[batch.pk]]
    assert len({id(run.batch) for run in claimed}) == len(claimed) >= 4


def test_an_endpoint_edit_is_seen_within_max_age(batch, claims_age):
    first, second, third = pending(batch)[:3]
    assert run_claim(run_id=first).batch.endpoint.model == "before"
    endpoint_update(endpoint=batch.endpoint, model="after")
    # a run claimed at once may still play against the endpoint as it was (the cache's age)
    assert run_claim(run_id=second).batch.endpoint.model in {"before", "after"}
    claims_age(claims.MAX_AGE_S)
    assert run_claim(run_id=third).batch.endpoint.model == "after"
    assert claims.MAX_AGE_S <= 1.0


def test_stale_entries_in_use_are_read_again_together_and_unused_ones_dropped(
    sample_environments, claims_age, monkeypatch
):
    """Once ``MAX_AGE_S`` old, the entries asked for since their read are read again with
    the one asked for, in one query; an entry nobody asked for goes (a finished batch's
    tasks are not read again every second forever)."""
    from apps.environments.models import Task

    claims.clear()
    hot, cold, asked = (
        Task.objects.filter(environment=environment).first()
        for environment in sample_environments[:3]
    )
    reads = []
    load = claims._TASKS.load_many
    monkeypatch.setattr(
        claims._TASKS, "load_many", lambda pks, using: reads.append(sorted(pks)) or load(pks, using)
    )
    for task in (hot, cold):
        claims._TASKS.get(task.pk, "default")
    claims._TASKS.get(hot.pk, "default")  # in use since its read
    Task.objects.filter(pk=hot.pk).update(title="edited")
    claims_age(claims.MAX_AGE_S)
    claims._TASKS.get(asked.pk, "default")
    assert reads[-1] == sorted([hot.pk, asked.pk])
    assert cold.pk not in claims._TASKS.entries
    assert claims._TASKS.get(hot.pk, "default").title == "edited"
    assert len(reads) == 3  # hot, cold, then hot and asked together (hot fresh since)


def test_the_job_is_the_claims_own_not_the_caches(batch):
    first, second = pending(batch)[:2]
    assert not run_claim(run_id=first).batch.job.cancel_requested  # batch now cached
    Job.objects.filter(pk=batch.job_id).update(cancel_requested=True, status=JobStatus.RUNNING)
    run = run_claim(run_id=second)
    assert (run.batch.job.cancel_requested, run.batch.job.status) == (True, JobStatus.RUNNING)


def test_a_run_sent_through_the_broker_sees_its_job_cancelled(batch):
    first, second = pending(batch)[:2]
    run_claim(run_id=first)  # batch now cached
    Job.objects.filter(pk=batch.job_id).update(cancel_requested=True)
    run_execute(run_id=second)
    assert Run.objects.filter(pk=second).values_list("status", "error").get() == (
        RunStatus.CANCELLED,
        "Cancelled before it started.",
    )


def unsent(batch) -> list[int]:
    return list(
        Run.objects.filter(batch=batch, status=RunStatus.PENDING, enqueued_at__isnull=True)
        .order_by("id")
        .values_list("pk", flat=True)
    )


def test_a_lane_takes_the_first_unsent_run_and_none_once_cancelled(batch):
    runs = unsent(batch)  # (the batch's first ``concurrency`` runs went to the broker)
    taken = take_next(batch)
    assert taken.pk == runs[0] and taken.enqueued_at is not None
    assert taken.status == RunStatus.RUNNING and taken.batch.endpoint.model == "before"
    Run.objects.filter(pk=runs[1]).update(enqueued_at=timezone.now())  # sent to the broker
    assert take_next(batch).pk == runs[2]
    Job.objects.filter(pk=batch.job_id).update(cancel_requested=True)
    assert take_next(batch) is None
    assert Run.objects.get(pk=runs[3]).status == RunStatus.PENDING


def test_lanes_taking_at_once_never_hold_one_run(batch):
    runs, taken, lock = unsent(batch), [], threading.Lock()

    def lane(_):
        while (run := take_next(batch)) is not None:
            with lock:
                taken.append(run.pk)

    in_threads(lane, range(4))
    assert sorted(taken) == runs  # each unsent run taken once, by one lane


def test_a_lane_closes_its_run_and_takes_the_next_in_one_transaction(batch, monkeypatch):
    """The run's call log, outcome and the lane's next run are written together: a take that
    fails leaves neither the outcome nor the call log (the run is still held, to be swept and
    played again, never half-closed), and one that succeeds commits all three."""
    from django.db import OperationalError

    from apps.llm.call_log import CallLogBuffer
    from apps.llm.models import LLMCall
    from apps.runs.services import execution
    from apps.runs.services.execution import _close, _Outcome

    def call_log(run):
        buffer = CallLogBuffer()
        buffer.add(
            LLMCall(
                project_id=run.project_id,
                endpoint=run.batch.endpoint,
                job_id=run.batch.job_id,
                purpose="run.agent",
                status="ok",
            )
        )
        return buffer

    ours = run_claim(run_id=pending(batch)[0])
    calls_before = LLMCall.objects.count()

    def broken_take(batch):
        raise OperationalError("the database went away")

    monkeypatch.setattr(execution, "take_next", broken_take)
    unwritten = call_log(ours)
    with pytest.raises(OperationalError):
        _close(ours, _Outcome(RunStatus.SUCCEEDED), unwritten, keep_next=True)
    assert Run.objects.get(pk=ours.pk).status == RunStatus.RUNNING
    assert LLMCall.objects.count() == calls_before
    # the calls wait again, to be logged on their own (they were made, and paid for)
    assert len(unwritten.rows) == 1 and unwritten.rows[0].pk is None
    unwritten.flush()
    assert LLMCall.objects.count() == calls_before + 1
    calls_before += 1

    monkeypatch.undo()
    first_unsent = unsent(batch)[0]
    took, next_run = _close(ours, _Outcome(RunStatus.SUCCEEDED), call_log(ours), keep_next=True)
    assert took and next_run.pk == first_unsent
    assert Run.objects.get(pk=ours.pk).status == RunStatus.SUCCEEDED
    assert Run.objects.get(pk=next_run.pk).status == RunStatus.RUNNING
    assert LLMCall.objects.count() == calls_before + 1


def test_a_database_error_while_closing_gives_the_run_back(
    project, author, sample_environments, monkeypatch
):
    """The outcome cannot be written (the database went away mid-close): the run is given
    back, pending, to be played again at once by its retried message, and the error is
    raised for the task to retry."""
    from django.db import OperationalError

    from apps.core.claims import Claim

    batch = run_batch_create(
        project=project,
        user=author,
        policy_kind=PolicyKind.ORACLE,
        selection=TaskSelection(environments=(sample_environments[0].pk,)),
        settings=BatchSettings(trials=2, concurrency=1),
        executor=Executor.CELERY,
    )
    first = pending(batch)[0]

    def unreachable(claim, **values):
        raise OperationalError("the database went away")

    monkeypatch.setattr(Claim, "finish", unreachable)
    with pytest.raises(OperationalError):
        run_execute(run_id=first, lane=lambda: True)
    run = Run.objects.get(pk=first)
    assert (run.status, run.claim_token, run.heartbeat_at) == (RunStatus.PENDING, "", None)
    assert run.enqueued_at is not None  # its own message is retried, not sent again
    monkeypatch.undo()
    assert run_execute(run_id=first).status == RunStatus.SUCCEEDED


def test_dispatch_with_nothing_unsent_takes_no_lock(batch, django_assert_num_queries):
    """A batch's ending lanes each refresh it: with nothing left to send, none of them waits
    for the batch's row lock (on PostgreSQL they queued on it one after another)."""
    from apps.runs.services.progress import batch_dispatch

    while take_next(batch) is not None:
        pass
    with django_assert_num_queries(1):  # the look for an unsent run, no SELECT … FOR UPDATE
        assert batch_dispatch(batch=batch) == 0


def test_the_outcome_is_written_only_while_the_run_is_held(batch, monkeypatch):
    """``_close`` writes the outcome fenced by the claim and sets it on the object; a run
    taken over keeps the other worker's result."""
    from decimal import Decimal

    from apps.llm.call_log import CallLogBuffer
    from apps.runs.services.execution import _close, _Outcome

    now = timezone.now()
    monkeypatch.setattr(timezone, "now", lambda: now)
    ours, theirs = (run_claim(run_id=pk) for pk in pending(batch)[:2])
    fields = {
        "transcript": [{"role": "assistant", "content": "« fini » — 完了 \u2028", "n": 1.5}],
        "score": 0.75,
        "passed": True,
        "cost": Decimal("0.001234"),
    }
    assert _close(ours, _Outcome(RunStatus.SUCCEEDED, fields=fields), CallLogBuffer()) == (
        False,
        None,
    )
    stored = Run.objects.get(pk=ours.pk)
    for name, value in {"status": RunStatus.SUCCEEDED, "finished_at": now, **fields}.items():
        assert getattr(stored, name) == getattr(ours, name) == value, name
    assert ours.closed_here
    Run.objects.filter(pk=theirs.pk).update(claim_token="taken-over")
    _close(theirs, _Outcome(RunStatus.ERRORED, "late"), CallLogBuffer(), keep_next=True)
    assert not theirs.closed_here
    assert Run.objects.get(pk=theirs.pk).status == RunStatus.RUNNING
