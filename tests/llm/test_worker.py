""" "Test connection" runs on a real Celery worker: the web request only queues the job and
the page's status partial polls it until the answer is in."""

import pytest
from django.urls import reverse

from apps.core.models import Job, JobStatus
from apps.llm.models import LLMCall
from tests.conftest import HTMX_HEADERS
from tests.llm_server import Reply
from tests.workers import WorkerProcess, purge_queues, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def worker(tmp_path, api_key):
    """Started after the key variable is set, so the worker process has it too."""
    purge_queues()
    process = WorkerProcess(concurrency=1, log_path=tmp_path / "worker.log").start()
    yield process
    process.stop()
    print((tmp_path / "worker.log").read_text()[-4000:])


def _poll_until_finished(client, job):
    url = reverse("core:job_status", args=[job.pk])

    def finished():
        response = client.get(url, **HTMX_HEADERS)
        return response if response.has_header("HX-Trigger") else None

    return wait_for(finished, timeout=90, interval=0.3, message="the test job to finish")


def test_htmx_test_connection_runs_on_a_worker(client_for, author, endpoint, llm_server, worker):
    llm_server.script(Reply.text("pong", usage=(21, 1), model="loop-large-2025"))
    client = client_for(author)
    response = client.post(reverse("llm:endpoint_test", args=[endpoint.pk]), **HTMX_HEADERS)
    assert response.status_code == 200
    job = Job.objects.get()
    assert f'id="job-status-{job.pk}"' in response.content.decode()

    final = _poll_until_finished(client, job)
    assert final["HX-Trigger"] == "job-finished"
    job.refresh_from_db()
    call = LLMCall.objects.get()
    assert job.status == JobStatus.SUCCEEDED, job.message
    assert job.message == (
        f"Connected. It answered “pong” · model loop-large-2025 · {call.latency_ms} ms · "
        f"21 tokens in, 1 out · $0.000062 (call #{call.pk})."
    )
    assert job.message in final.content.decode()
    assert (call.job_id, call.purpose, call.status) == (job.pk, "endpoint.test", "ok")


def test_a_hanging_endpoint_fails_the_job_at_the_cap_not_the_endpoint_timeout(
    client_for, author, endpoint, llm_server, worker
):
    from apps.llm.services import endpoint_update

    endpoint_update(endpoint=endpoint, request_timeout_s=3600)
    llm_server.script(Reply.hanging())
    client = client_for(author)
    client.post(reverse("llm:endpoint_test", args=[endpoint.pk]), **HTMX_HEADERS)
    job = Job.objects.get()
    _poll_until_finished(client, job)
    job.refresh_from_db()
    call = LLMCall.objects.get()
    assert job.status == JobStatus.FAILED
    assert job.message == (
        f"It failed: No answer within 10 s (the limit of this request). (call #{call.pk})"
    )
    assert call.request_params["timeout_s"] == 10.0
