"""POST /environments/{id}/validate returns a job that a real Celery worker finishes."""

import pytest

from apps.core.models import Job, JobStatus
from apps.environments.models import EnvironmentStatus, ValidationReport
from tests.workers import WorkerProcess, purge_queues, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def worker(tmp_path):
    purge_queues()
    process = WorkerProcess(concurrency=1, log_path=tmp_path / "worker.log").start()
    yield process
    process.stop()
    print((tmp_path / "worker.log").read_text()[-4000:])


def test_validate_job_is_finished_by_a_worker(worker, api_client_for, author, environment):
    api = api_client_for(author)
    response = api.post(f"/api/v1/environments/{environment.pk}/validate")
    assert response.status_code == 202
    job_id = response.json()["id"]

    def finished():
        body = api.get(f"/api/v1/jobs/{job_id}/").json()
        return body if body["status"] in (JobStatus.SUCCEEDED, JobStatus.FAILED) else None

    body = wait_for(finished, timeout=120, interval=0.3, message="the validation job")
    assert body["status"] == JobStatus.SUCCEEDED, body["message"]
    assert (body["progress_done"], body["progress_total"]) == (1, 1)
    assert Job.objects.get(pk=job_id).attempts == 1

    detail = api.get(f"/api/v1/environments/{environment.pk}/").json()
    report = ValidationReport.objects.get(environment=environment)
    assert detail["status"] == EnvironmentStatus.VALID
    assert detail["validation_current"] is True
    assert (detail["latest_validation"]["id"], detail["latest_validation"]["job"]) == (
        report.pk,
        job_id,
    )
    assert detail["latest_validation"]["valid"] is True
