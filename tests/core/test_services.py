from datetime import timedelta

import pytest
from django.utils import timezone

from apps.core.exceptions import ApplicationError
from apps.core.models import Job, JobStatus
from apps.core.services import (
    job_cancel,
    job_claim,
    job_create,
    job_execute,
    worker_check_run,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def job(project):
    return job_create(project=project, kind="test", title="A test job", total=3)


def test_claim_once(job):
    assert job_claim(job_id=job.pk) is not None
    assert job_claim(job_id=job.pk) is None
    job.refresh_from_db()
    assert (job.status, job.attempts) == (JobStatus.RUNNING, 1)


def test_stale_running_job_can_be_taken_over(job):
    job_claim(job_id=job.pk)
    Job.objects.filter(pk=job.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    taken = job_claim(job_id=job.pk)
    assert taken is not None and taken.attempts == 2


def test_finished_job_is_not_claimed(job):
    Job.objects.filter(pk=job.pk).update(status=JobStatus.SUCCEEDED)
    assert job_claim(job_id=job.pk) is None


def test_execute_success_records_progress(job):
    def work(context):
        for i in range(3):
            context.progress(i + 1, 3, f"step {i + 1}")
        return "All three."

    job_execute(job_id=job.pk, work=work)
    job.refresh_from_db()
    assert (job.status, job.progress_done, job.message) == (JobStatus.SUCCEEDED, 3, "All three.")
    assert job.finished_at is not None


def test_execute_application_error_fails_with_message(job):
    def work(context):
        raise ApplicationError("The endpoint refused the key.")

    job_execute(job_id=job.pk, work=work)
    job.refresh_from_db()
    assert (job.status, job.message) == (JobStatus.FAILED, "The endpoint refused the key.")


def test_execute_unexpected_error_fails_generically(job):
    def work(context):
        raise KeyError("secret internals")

    job_execute(job_id=job.pk, work=work)
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert "secret internals" not in job.message


def test_cancel_pending_job_ends_it(job):
    job_cancel(job=job)
    job.refresh_from_db()
    assert job.status == JobStatus.CANCELLED
    assert job_claim(job_id=job.pk) is None


def test_cancel_running_job_stops_at_next_report(job):
    seen = []

    def work(context):
        context.progress(1, 3)
        job_cancel(job=Job.objects.get(pk=job.pk))
        seen.append("asked")
        context.progress(2, 3)
        seen.append("continued")

    job_execute(job_id=job.pk, work=work)
    job.refresh_from_db()
    assert seen == ["asked"]
    assert (job.status, job.progress_done) == (JobStatus.CANCELLED, 2)


def test_cancel_finished_job_refused(job):
    Job.objects.filter(pk=job.pk).update(status=JobStatus.FAILED)
    job.refresh_from_db()
    with pytest.raises(ApplicationError):
        job_cancel(job=job)


def test_worker_check_resumes_without_repeating_steps(project):
    job = job_create(
        project=project,
        kind="worker_check",
        title="check",
        params={"steps": 3, "step_seconds": 0},
        total=3,
    )
    Job.objects.filter(pk=job.pk).update(result={"steps": [{"step": 1, "worker": "earlier"}]})
    job_execute(job_id=job.pk, work=worker_check_run)
    job.refresh_from_db()
    assert [s["step"] for s in job.result["steps"]] == [1, 2, 3]
    assert job.result["steps"][0]["worker"] == "earlier"
    assert job.status == JobStatus.SUCCEEDED
