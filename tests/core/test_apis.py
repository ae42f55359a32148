import pytest

from apps.core.models import JobStatus
from apps.core.services import job_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def job(project):
    return job_create(project=project, kind="test", title="Thing", total=2)


def test_job_retrieve(api_client_for, viewer, job):
    body = api_client_for(viewer).get(f"/api/v1/jobs/{job.pk}/").json()
    assert (body["status"], body["progress_total"], body["percent"]) == ("pending", 2, 0)


def test_job_retrieve_outsider_404(api_client_for, outsider, job):
    assert api_client_for(outsider).get(f"/api/v1/jobs/{job.pk}/").status_code == 404


def test_job_retrieve_anonymous_401(api_client_for, job):
    assert api_client_for().get(f"/api/v1/jobs/{job.pk}/").status_code == 401


def test_job_cancel_roles(api_client_for, viewer, author, job):
    assert api_client_for(viewer).post(f"/api/v1/jobs/{job.pk}/cancel/").status_code == 403
    job.refresh_from_db()
    assert job.status == JobStatus.PENDING
    response = api_client_for(author).post(f"/api/v1/jobs/{job.pk}/cancel/")
    assert response.json()["status"] == "cancelled"
    again = api_client_for(author).post(f"/api/v1/jobs/{job.pk}/cancel/")
    assert again.status_code == 400
    assert again.json()["message"] == "This job has already cancelled."
