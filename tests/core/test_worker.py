"""A real Celery worker process picks up a job on the configured broker."""

import pytest

from apps.core.models import Job, JobStatus
from apps.core.services import worker_check_start
from apps.core.tasks import check_worker_task
from tests.workers import WorkerProcess, purge_queues, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def worker(tmp_path):
    purge_queues()
    process = WorkerProcess(concurrency=2, log_path=tmp_path / "worker.log").start()
    yield process
    process.stop()
    print((tmp_path / "worker.log").read_text()[-4000:])


def test_worker_runs_job_and_reports_progress(worker, project, author):
    job = worker_check_start(project=project, started_by=author, steps=4, step_seconds=0.3)
    seen_progress = set()

    def finished():
        row = Job.objects.get(pk=job.pk)
        seen_progress.add(row.progress_done)
        return row.status in (JobStatus.SUCCEEDED, JobStatus.FAILED)

    wait_for(finished, timeout=90, interval=0.1, message="the worker to finish the job")
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED, job.message
    assert job.progress_done == job.progress_total == 4
    assert [s["step"] for s in job.result["steps"]] == [1, 2, 3, 4]
    assert len(seen_progress - {0, 4}) >= 1  # progress was visible while it ran
    assert job.attempts == 1


def test_second_delivery_does_not_run_the_job_twice(worker, project, author):
    job = worker_check_start(project=project, started_by=author, steps=5, step_seconds=0.4)
    # At-least-once delivery: the same message arrives again while the first copy runs.
    wait_for(
        lambda: Job.objects.get(pk=job.pk).status == JobStatus.RUNNING,
        timeout=90,
        message="the first delivery to start",
    )
    check_worker_task.delay(job.pk)
    wait_for(
        lambda: Job.objects.get(pk=job.pk).status == JobStatus.SUCCEEDED,
        timeout=90,
        message="the job to finish",
    )
    check_worker_task.delay(job.pk)  # and once more after it finished
    # A job queued behind the duplicate finishing means the duplicate was consumed.
    sentinel = worker_check_start(project=project, started_by=author, steps=1, step_seconds=0)
    wait_for(
        lambda: Job.objects.get(pk=sentinel.pk).status == JobStatus.SUCCEEDED,
        timeout=90,
        message="the sentinel job",
    )
    job.refresh_from_db()
    assert job.attempts == 1
    assert [s["step"] for s in job.result["steps"]] == [1, 2, 3, 4, 5]
    assert len({s["worker"] for s in job.result["steps"]}) == 1
