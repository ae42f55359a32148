import pytest
from django.urls import reverse

from apps.core.models import Job, JobStatus
from apps.core.services import job_create
from tests.conftest import HTMX_HEADERS

pytestmark = pytest.mark.django_db


@pytest.fixture
def job(project, author):
    return job_create(
        project=project, kind="test", title="Validate things", total=4, started_by=author
    )


def test_job_detail(client_for, viewer, job):
    response = client_for(viewer).get(reverse("core:job_detail", args=[job.pk]))
    assert response.status_code == 200
    assert b"Validate things" in response.content
    # A viewer cannot cancel.
    assert b">Cancel<" not in response.content


def test_job_detail_outsider_404(client_for, outsider, job):
    assert client_for(outsider).get(reverse("core:job_detail", args=[job.pk])).status_code == 404


def test_job_detail_anonymous(client, job):
    assert client.get(reverse("core:job_detail", args=[job.pk])).status_code == 302


def test_status_partial_polls_while_active_and_stops_when_done(client_for, viewer, job):
    client = client_for(viewer)
    url = reverse("core:job_status", args=[job.pk])
    active = client.get(url, **HTMX_HEADERS).content.decode()
    assert 'hx-trigger="every 2s"' in active
    assert "<html" not in active
    Job.objects.filter(pk=job.pk).update(status=JobStatus.SUCCEEDED, progress_done=4)
    done = client.get(url, **HTMX_HEADERS).content.decode()
    assert "every 2s" not in done
    assert 'data-status="succeeded"' in done


def test_cancel_by_author(client_for, author, job):
    response = client_for(author).post(reverse("core:job_cancel", args=[job.pk]))
    assert response.status_code == 302
    job.refresh_from_db()
    assert job.status == JobStatus.CANCELLED


def test_cancel_by_viewer_forbidden(client_for, viewer, job):
    assert client_for(viewer).post(reverse("core:job_cancel", args=[job.pk])).status_code == 403
    job.refresh_from_db()
    assert job.status == JobStatus.PENDING


def test_cancel_wrong_method(client_for, author, job):
    assert client_for(author).get(reverse("core:job_cancel", args=[job.pk])).status_code == 405


def test_cancel_htmx_redirects_client(client_for, author, job):
    response = client_for(author).post(reverse("core:job_cancel", args=[job.pk]), **HTMX_HEADERS)
    assert response["HX-Redirect"] == reverse("core:job_detail", args=[job.pk])


def test_job_list_filters_and_htmx(client_for, viewer, project, job):
    job_create(project=project, kind="test", title="Old finished", total=0)
    Job.objects.filter(title="Old finished").update(status=JobStatus.SUCCEEDED)
    client = client_for(viewer)
    page = client.get(reverse("core:job_list", args=[project.slug]), {"status": "succeeded"})
    assert [j.title for j in page.context["page"].object_list] == ["Old finished"]
    partial = client.get(reverse("core:job_list", args=[project.slug]), **HTMX_HEADERS)
    assert partial.content.lstrip().startswith(b'<div id="job-rows">')


def test_job_list_outsider_404(client_for, outsider, project):
    assert (
        client_for(outsider).get(reverse("core:job_list", args=[project.slug])).status_code == 404
    )


def test_job_list_query_count_is_flat(client_for, viewer, project, django_assert_max_num_queries):
    for i in range(30):
        job_create(project=project, kind="test", title=f"job {i}", started_by=viewer)
    client = client_for(viewer)
    with django_assert_max_num_queries(12):
        assert client.get(reverse("core:job_list", args=[project.slug])).status_code == 200


def test_worker_check_start_by_author(
    client_for, author, project, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as callbacks:
        response = client_for(author).post(reverse("core:worker_check", args=[project.slug]))
    job = Job.objects.get(kind="worker_check")
    assert response["Location"] == reverse("core:job_detail", args=[job.pk])
    assert len(callbacks) == 1  # enqueued after commit


def test_worker_check_viewer_forbidden(client_for, viewer, project):
    assert (
        client_for(viewer).post(reverse("core:worker_check", args=[project.slug])).status_code
        == 403
    )
    assert not Job.objects.exists()


def test_worker_check_outsider_404(client_for, outsider, project):
    assert (
        client_for(outsider).post(reverse("core:worker_check", args=[project.slug])).status_code
        == 404
    )


def test_job_detail_names_the_kind_for_people(client_for, viewer, project):
    validation = job_create(project=project, kind="environment_validation", title="Validate x")
    page = client_for(viewer).get(reverse("core:job_detail", args=[validation.pk]))
    body = page.content.decode()
    assert '<span data-testid="job-kind">Environment validation</span>' in body
    assert "environment_validation" not in body
    other = job_create(project=project, kind="training.fine_tune", title="Train")
    assert other.kind_label == "Training fine tune"
