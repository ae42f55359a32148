"""The jobs sweeper: a job whose worker died, or whose message was lost, is sent again, once
per period, however many sweepers run; and the claim/heartbeat it relies on."""

import os
import threading
from datetime import timedelta

import pytest
from django.db import OperationalError, connection
from django.utils import timezone

from apps.core.models import Job, JobStatus
from apps.core.services import (
    JobLost,
    job_claim,
    job_execute,
    job_report_progress,
    jobs_sweep,
    worker_check_start,
)
from tests.workers import purge_queues, queued_messages

TASK = "apps.core.tasks.check_worker_task"


@pytest.fixture(autouse=True)
def short_stale(settings):
    settings.JOB_STALE_AFTER_S = 30
    settings.JOB_MAX_CLAIMS = 3
    purge_queues()
    yield
    purge_queues()


def ago(seconds: float):
    return timezone.now() - timedelta(seconds=seconds)


@pytest.mark.django_db
def test_job_records_its_task_and_when_it_was_sent(project, author):
    job = worker_check_start(project=project, started_by=author, steps=1)
    job.refresh_from_db()
    assert job.task_name == TASK
    assert job.enqueued_at is not None
    assert (job.status, job.claim_token, job.worker) == (JobStatus.PENDING, "", "")


@pytest.mark.django_db
def test_a_job_whose_worker_died_is_sent_again_once_per_period(project, author):
    job = worker_check_start(project=project, started_by=author, steps=1)
    first = job_claim(job_id=job.pk)
    assert first.worker.endswith(f":{os.getpid()}")
    assert jobs_sweep() == {"sent": []}  # alive: its heartbeat is fresh

    Job.objects.filter(pk=job.pk).update(heartbeat_at=ago(31), enqueued_at=ago(31))
    assert jobs_sweep() == {"sent": [job.pk]}
    assert jobs_sweep() == {"sent": []}  # already sent in this period
    assert queued_messages("default") == [(TASK, [job.pk])]

    second = job_claim(job_id=job.pk)  # the message sent again takes the job over
    assert (second.attempts, second.status) == (2, JobStatus.RUNNING)
    assert second.claim_token != first.claim_token
    with pytest.raises(JobLost):  # the presumed-dead first holder is fenced off
        job_report_progress(job=first, done=1)
    job_report_progress(job=second, done=1)
    assert Job.objects.get(pk=job.pk).progress_done == 1


@pytest.mark.django_db
def test_a_pending_job_whose_message_was_lost_is_sent_after_the_stale_period(project, author):
    fresh = worker_check_start(project=project, started_by=author, steps=1)
    lost = worker_check_start(project=project, started_by=author, steps=1)
    Job.objects.filter(pk=lost.pk).update(enqueued_at=ago(31))
    assert jobs_sweep() == {"sent": [lost.pk]}
    assert queued_messages("default") == [(TASK, [lost.pk])]
    assert Job.objects.get(pk=fresh.pk).status == JobStatus.PENDING


@pytest.mark.django_db
def test_finished_jobs_and_jobs_without_a_task_are_never_sent(project, author):
    done = worker_check_start(project=project, started_by=author, steps=1)
    Job.objects.filter(pk=done.pk).update(status=JobStatus.SUCCEEDED, enqueued_at=ago(99))
    unit_claimed = Job.objects.create(
        project=project, kind="run_batch", title="A batch", status=JobStatus.RUNNING
    )
    Job.objects.filter(pk=unit_claimed.pk).update(heartbeat_at=ago(99))
    assert unit_claimed.task_name == ""  # a run batch or a synthesis: swept by its app
    assert jobs_sweep() == {"sent": []}
    assert queued_messages("default") == []


@pytest.mark.django_db(transaction=True)
def test_two_sweepers_at_once_send_each_job_once(project, author):
    jobs = [worker_check_start(project=project, started_by=author, steps=1) for _ in range(6)]
    ids = [job.pk for job in jobs]
    purge_queues()  # the creation's own messages
    Job.objects.filter(pk__in=ids[:3]).update(
        status=JobStatus.RUNNING, heartbeat_at=ago(31), enqueued_at=ago(31)
    )
    Job.objects.filter(pk__in=ids[3:]).update(enqueued_at=ago(31))
    barrier = threading.Barrier(2)
    outcomes = []

    def sweep():
        try:
            barrier.wait()
            outcomes.append(jobs_sweep()["sent"])
        finally:
            connection.close()

    threads = [threading.Thread(target=sweep) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    sent = sorted(outcomes[0] + outcomes[1])
    assert sent == ids
    assert sorted(args[0] for _, args in queued_messages("default")) == ids


@pytest.mark.django_db
def test_a_job_that_killed_its_worker_too_often_is_failed_not_retried(project, author):
    job = worker_check_start(project=project, started_by=author, steps=1)
    Job.objects.filter(pk=job.pk).update(status=JobStatus.RUNNING, attempts=3, heartbeat_at=ago(31))
    assert job_claim(job_id=job.pk) is None
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert job.message == (
        "Its worker stopped 3 times while working on it (killed, perhaps for lack of memory); "
        "it was not started again."
    )


@pytest.mark.django_db
def test_a_database_error_gives_the_claim_back_and_is_raised_for_a_retry(project, author):
    job = worker_check_start(project=project, started_by=author, steps=1)

    def work(context):
        raise OperationalError("server closed the connection unexpectedly")

    with pytest.raises(OperationalError):
        job_execute(job_id=job.pk, work=work)
    job.refresh_from_db()
    assert (job.status, job.claim_token, job.heartbeat_at, job.attempts) == (
        JobStatus.PENDING,
        "",
        None,
        0,  # given back: not counted as a claim whose worker died
    )
    assert job_claim(job_id=job.pk).attempts == 1  # the retried task takes it at once
