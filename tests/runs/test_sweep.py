"""The runs sweeper: the runs of a batch that nobody works on although they were sent are sent
again, once per period, and every active batch is moved along."""

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.core.models import Job, JobStatus
from apps.runs.models import Executor, Run, RunStatus
from apps.runs.services import (
    BatchSettings,
    TaskSelection,
    run_batch_create,
    run_batch_execute_inline,
    run_claim,
    run_execute,
    runs_sweep,
)
from tests.workers import purge_queues, queued_messages

pytestmark = pytest.mark.django_db

TASK = "apps.runs.tasks.execute_run_task"


@pytest.fixture(autouse=True)
def stale_after_30s(settings):
    settings.JOB_STALE_AFTER_S = 30
    purge_queues()
    yield
    purge_queues()


def ago(seconds: float):
    return timezone.now() - timedelta(seconds=seconds)


def make_batch(project, author, environment, executor=Executor.CELERY, **settings):
    return run_batch_create(
        project=project,
        user=author,
        selection=TaskSelection(environments=(environment.pk,)),
        settings=BatchSettings(**settings),
        executor=executor,
    )


def test_runs_of_a_dead_worker_are_sent_again_once(project, author, sample_environments):
    batch = make_batch(project, author, sample_environments[0], trials=3, concurrency=3)
    sent = list(Run.objects.filter(batch=batch, enqueued_at__isnull=False).order_by("id"))
    assert len(sent) == 3
    dead, alive, lost = (run.pk for run in sent)
    run_claim(run_id=dead)
    run_claim(run_id=alive)
    Run.objects.filter(pk__in=[dead, alive, lost]).update(enqueued_at=ago(31))
    Run.objects.filter(pk=dead).update(heartbeat_at=ago(31))

    assert runs_sweep() == {"sent": [dead, lost], "batches": [batch.pk]}
    assert runs_sweep() == {"sent": [], "batches": [batch.pk]}  # once per period
    assert queued_messages("llm") == [(TASK, [dead]), (TASK, [lost])]
    assert Run.objects.get(pk=dead).status == RunStatus.RUNNING  # until a worker takes it
    taken = run_claim(run_id=dead)
    assert (taken.claims, taken.status) == (2, RunStatus.RUNNING)
    assert run_claim(run_id=alive) is None  # a live claim is never taken


def test_a_batch_whose_last_refresh_was_lost_is_finished_by_the_sweeper(
    project, author, sample_environments
):
    batch = make_batch(project, author, sample_environments[0], trials=1, concurrency=2)
    run_batch_execute_inline(batch=batch)
    runs = Run.objects.filter(batch=batch).count()
    # The worker that closed the last run died before the batch's job was finished.
    Job.objects.filter(pk=batch.job_id).update(
        status=JobStatus.RUNNING, progress_done=0, finished_at=None
    )
    assert runs_sweep() == {"sent": [], "batches": [batch.pk]}
    job = Job.objects.get(pk=batch.job_id)
    assert (job.status, job.progress_done, job.progress_total) == (
        JobStatus.SUCCEEDED,
        runs,
        runs,
    )
    assert runs_sweep() == {"sent": [], "batches": []}


def test_runs_played_in_process_are_left_to_their_process(project, author, sample_environments):
    batch = make_batch(project, author, sample_environments[0], executor=Executor.INLINE, trials=1)
    run = Run.objects.filter(batch=batch).first()
    run_claim(run_id=run.pk)  # the process playing it died
    Run.objects.filter(batch=batch).update(enqueued_at=ago(99), heartbeat_at=ago(99))
    assert runs_sweep() == {"sent": [], "batches": []}
    assert queued_messages("llm") == []


def test_a_run_that_killed_its_worker_too_often_is_errored_not_retried(
    project, author, sample_environments, settings
):
    settings.JOB_MAX_CLAIMS = 3
    batch = make_batch(project, author, sample_environments[0], trials=1, concurrency=1)
    run = Run.objects.filter(batch=batch).order_by("id").first()
    Run.objects.filter(pk=run.pk).update(
        status=RunStatus.RUNNING, claims=3, heartbeat_at=ago(31), enqueued_at=ago(31)
    )
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert (run.status, run.retryable, run.claims) == (RunStatus.ERRORED, False, 4)
    assert run.error == (
        "Its worker stopped 3 times while playing it (killed, perhaps for lack of memory); "
        "it was not started again."
    )
    assert not Run.objects.filter(batch=batch, task_ref=run.task_ref, attempt=2).exists()
