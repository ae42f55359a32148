"""Starting and stopping model servers (rows only, no process), the idle rule with an
injected clock, and the sweep for a worker that died: the server is marked stopped and its
endpoint goes."""

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.core.exceptions import ApplicationError
from apps.core.models import Job, JobStatus
from apps.core.services import job_claim
from apps.llm.client import llm_chat
from apps.llm.exceptions import LLMConfigurationError
from apps.llm.models import LLMCall, ModelEndpoint
from apps.llm.services import endpoint_create
from apps.serving.models import MODEL_SERVER_KIND, ModelServer
from apps.serving.selectors import model_server_idle_expired, model_server_ready
from apps.serving.services import (
    model_server_register,
    model_server_start,
    model_server_stop,
    model_servers_sweep,
)
from apps.training.models import ModelKind
from tests.llm_server import LoopbackLLMServer, Reply
from tests.serving.conftest import HUB_MODEL
from tests.workers import queued_messages

pytestmark = pytest.mark.django_db


@pytest.fixture
def trained(register_trained):
    return register_trained(ModelKind.ADAPTER, name="Qwen 0.5B coworker")


def _running(server: ModelServer, port: int) -> ModelServer:
    """The server as its worker leaves it once it answers on ``port``."""
    assert job_claim(job_id=server.job_id) is not None
    server.host, server.port, server.served_model = "127.0.0.1", port, HUB_MODEL
    server.save(update_fields=["host", "port", "served_model"])
    server.refresh_from_db()
    model_server_register(server=server, now=timezone.now())
    return server


def test_start_queues_a_job_for_an_adapter_on_its_base_model(project, author, trained):
    server = model_server_start(project=project, user=author, trained_model=trained)
    assert (server.model_path, server.adapter_path, server.tool_call_parser) == (
        HUB_MODEL,
        "/models/run-1/final",
        "hermes",
    )
    assert (server.job.kind, server.job.status, server.job.title) == (
        MODEL_SERVER_KIND,
        JobStatus.PENDING,
        "Serve /models/run-1/final",
    )
    assert server.idle_timeout_s == 1800
    assert not model_server_ready(server=server)


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("", "Name either a trained model or a model path to serve."),
        ("--trust-remote-code", "Enter a Hugging Face model id"),
        ("preset:tiny-qwen2", "Enter a Hugging Face model id"),
        ("https://example.com/model", "Enter a Hugging Face model id"),
        ("/models/../etc", "Enter a Hugging Face model id"),
        ("relative/../x", "Enter a Hugging Face model id"),
    ],
)
def test_start_refuses_bad_paths_and_creates_nothing(project, author, path, why):
    with pytest.raises(ApplicationError) as refused:
        model_server_start(project=project, user=author, model_path=path)
    assert refused.value.message.startswith(why)
    assert not Job.objects.exists() and not ModelServer.objects.exists()


def test_start_refuses_another_projects_model_and_a_bad_timeout(
    project, other_project, author, trained
):
    with pytest.raises(ApplicationError, match="belongs to another project"):
        model_server_start(project=other_project, user=author, trained_model=trained)
    with pytest.raises(ApplicationError, match="between 0"):
        model_server_start(project=project, model_path=HUB_MODEL, idle_timeout_s=-1)
    trained.kind = ModelKind.REMOTE
    trained.save()
    with pytest.raises(ApplicationError, match="provider hosts"):
        model_server_start(project=project, trained_model=trained)
    assert not ModelServer.objects.exists()


def test_stop_ends_a_queued_server_at_once_and_refuses_twice(project, author):
    server = model_server_start(project=project, user=author, model_path=HUB_MODEL)
    server = model_server_stop(server=server)
    assert server.job.status == JobStatus.CANCELLED
    with pytest.raises(ApplicationError, match="already stopped"):
        model_server_stop(server=server)


def test_the_endpoint_reaches_exactly_the_served_address(project, author, settings):
    settings.LLM_ALLOWED_NETWORKS = []
    with LoopbackLLMServer() as served, LoopbackLLMServer() as other:
        served.responder = lambda request: Reply.text("served")
        server = _running(model_server_start(project=project, model_path=HUB_MODEL), served.port)
        assert model_server_ready(server=server)
        answer = llm_chat(
            endpoint=server.endpoint, messages=[{"role": "user", "content": "hi"}], purpose="t"
        )
        assert answer.content == "served"
        # The same loopback host on another port is refused, as is a hand-made endpoint.
        ModelEndpoint.objects.filter(pk=server.endpoint_id).update(base_url=other.base_url)
        server.endpoint.refresh_from_db()
        with pytest.raises(LLMConfigurationError, match="loopback address"):
            llm_chat(
                endpoint=server.endpoint, messages=[{"role": "user", "content": "hi"}], purpose="t"
            )
        with pytest.raises(ApplicationError) as refused:
            endpoint_create(project=project, name="mine", base_url=served.base_url, model="m")
        assert "loopback address" in refused.value.extra["fields"]["base_url"][0]
        assert other.requests == []


def test_idle_is_measured_from_the_last_request(project):
    server = _running(
        model_server_start(project=project, model_path=HUB_MODEL, idle_timeout_s=60), 9
    )
    ready = server.ready_at
    assert not model_server_idle_expired(server=server, now=ready + timedelta(seconds=59))
    assert model_server_idle_expired(server=server, now=ready + timedelta(seconds=60))
    call = LLMCall.objects.create(
        project=project,
        endpoint=server.endpoint,
        endpoint_name="x",
        model="m",
        purpose="t",
        status="ok",
    )
    LLMCall.objects.filter(pk=call.pk).update(created_at=ready + timedelta(seconds=50))
    assert not model_server_idle_expired(server=server, now=ready + timedelta(seconds=109))
    assert model_server_idle_expired(server=server, now=ready + timedelta(seconds=110))
    server.idle_timeout_s = 0
    assert not model_server_idle_expired(server=server, now=ready + timedelta(days=30))


def test_the_sweep_stops_a_server_whose_worker_died_and_its_endpoint_goes(
    project, trained, settings
):
    server = _running(model_server_start(project=project, trained_model=trained), 9)
    trained.refresh_from_db()
    assert trained.endpoint_id == server.endpoint_id
    beat = server.job.heartbeat_at
    stale = beat + timedelta(seconds=settings.JOB_STALE_AFTER_S)
    assert model_servers_sweep(now=stale - timedelta(seconds=1)) == {"stopped": [], "sent": []}
    assert model_servers_sweep(now=stale + timedelta(seconds=1)) == {
        "stopped": [server.job_id],
        "sent": [],
    }
    server.refresh_from_db()
    server.job.refresh_from_db()
    assert server.job.status == JobStatus.FAILED
    assert server.job.message.startswith("Its worker stopped")
    assert server.endpoint_id is None and not ModelEndpoint.objects.exists()
    trained.refresh_from_db()
    assert trained.endpoint_id is None


def test_the_sweep_sends_a_lost_queued_server_again_once(project, settings):
    server = model_server_start(project=project, model_path=HUB_MODEL)
    queued_messages("gpu")  # whatever earlier tests left
    later = timezone.now() + timedelta(seconds=settings.JOB_STALE_AFTER_S + 1)
    assert model_servers_sweep(now=later) == {"stopped": [], "sent": [server.job_id]}
    assert model_servers_sweep(now=later) == {"stopped": [], "sent": []}
    assert queued_messages("gpu") == [("apps.serving.tasks.serve_model_task", [server.job_id])]
