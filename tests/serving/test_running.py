"""A trained model really served: ``transformers serve`` on loopback, started by the
serving job's work as a gpu worker runs it, answering chat completions with tools through
the app's own LLM client; stopped on click and after its idle timeout (injected clock),
its endpoint gone each time."""

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.core.models import JobStatus
from apps.llm.client import RetryPolicy, llm_chat
from apps.llm.models import ModelEndpoint
from apps.serving.models import Engine, ModelServer
from apps.serving.process import healthy
from apps.serving.selectors import model_server_ready
from apps.serving.services import model_server_start, model_server_stop
from apps.training.models import ModelKind, TrainingJob
from apps.training.services import trained_model_register, training_job_create
from tests.serving.conftest import LOOKUP, MALFORMED_CALL, PROMPT, Worker
from tests.workers import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
ONCE = RetryPolicy.from_settings(max_attempts=1)


class Clock:
    def __init__(self):
        self.now = timezone.now()

    def __call__(self):
        return self.now


def _ready(server: ModelServer) -> ModelServer:
    def ready():
        server.refresh_from_db()
        server.job.refresh_from_db()
        assert server.job.is_active, (server.job.message, server.log_tail[-3000:])
        return model_server_ready(server=server)

    wait_for(ready, timeout=180, interval=0.2, message="the model server's endpoint")
    return server


def _ask(endpoint, max_tokens=64):
    return llm_chat(
        endpoint=endpoint,
        messages=[{"role": "user", "content": PROMPT}],
        purpose="serving.test",
        tools=[LOOKUP],
        max_tokens=max_tokens,
        retry=ONCE,
    )


def _trained(project, author, training_version, path):
    training_job = training_job_create(
        project=project,
        user=author,
        dataset_version=training_version,
        backend="local",
        base_model="preset:tiny-qwen2",
        name="tiny coworker",
        enqueue=False,
    )
    return trained_model_register(training_job=training_job, kind=ModelKind.FULL, path=path)


def test_the_trained_model_answers_a_tool_call_and_stops_on_click(
    project, author, training_version, tool_model, settings
):
    settings.LLM_ALLOWED_NETWORKS = []  # only the served address itself may be reached
    trained = _trained(project, author, training_version, tool_model)
    server = model_server_start(project=project, user=author, trained_model=trained)
    with Worker(server.job_id, Clock()):
        server = _ready(server)
        endpoint = server.endpoint
        assert (server.engine, endpoint.name, endpoint.model) == (
            Engine.TRANSFORMERS,
            f"served-{server.pk}",
            tool_model,
        )
        assert endpoint.base_url == f"http://127.0.0.1:{server.port}/v1"
        assert endpoint.served_address == f"127.0.0.1:{server.port}"
        trained.refresh_from_db()
        assert trained.endpoint_id == endpoint.pk  # "Evaluate" needs no base URL typed

        result = _ask(endpoint)  # parsed by the server for Qwen2.5's template
        assert result.finish_reason == "tool_calls"
        assert [(c["name"], c["arguments"]) for c in result.tool_calls] == [
            ("lookup", '{"q": "apple"}')
        ]
        truncated = _ask(endpoint, max_tokens=6)  # cut inside the call: text, not a crash
        assert truncated.finish_reason == "length"
        assert truncated.tool_calls == []
        assert truncated.content.startswith("<tool_call>")

        model_server_stop(server=server)
    server.refresh_from_db()
    server.job.refresh_from_db()
    assert (server.job.status, server.endpoint_id) == (JobStatus.CANCELLED, None)
    assert not ModelEndpoint.objects.filter(pk=endpoint.pk).exists()
    assert not healthy(server)  # the process is gone with its port
    assert "Uvicorn running on http://127.0.0.1" in server.log_tail


def test_a_malformed_tool_call_reaches_the_run_as_text_and_idle_stops_it(
    project, author, broken_model
):
    clock = Clock()
    server = model_server_start(
        project=project, user=author, model_path=broken_model, idle_timeout_s=600
    )
    with Worker(server.job_id, clock):
        server = _ready(server)
        result = _ask(server.endpoint)
        assert (result.finish_reason, result.tool_calls) == ("stop", [])
        assert result.content == MALFORMED_CALL
        clock.now = timezone.now() + timedelta(seconds=601)
    server.refresh_from_db()
    server.job.refresh_from_db()
    assert (server.job.status, server.job.message) == (
        JobStatus.SUCCEEDED,
        "Stopped after 600 s without a request.",
    )
    assert ModelEndpoint.objects.filter(project=project).count() == 0


def test_a_lora_adapter_is_merged_into_its_base_and_served(
    project, author, training_version, lora_adapter
):
    trained = _trained(project, author, training_version, lora_adapter["final"])
    trained.kind = ModelKind.ADAPTER
    trained.save(update_fields=["kind"])
    TrainingJob.objects.filter(pk=trained.training_job_id).update(artifacts={"final": lora_adapter})
    trained.training_job.refresh_from_db()
    server = model_server_start(project=project, user=author, trained_model=trained)
    assert (server.model_path, server.adapter_path) == (
        lora_adapter["base_model"],
        lora_adapter["final"],
    )
    with Worker(server.job_id, Clock()):
        server = _ready(server)
        assert server.endpoint.model == server.served_model
        assert server.served_model.endswith(f"{server.pk}-merged")
        result = _ask(server.endpoint, max_tokens=4)
        assert (result.model, result.tool_calls) == (server.served_model, [])
        assert 1 <= result.tokens_out <= 4 and isinstance(result.content, str)
        model_server_stop(server=server)
    server.job.refresh_from_db()
    assert server.job.status == JobStatus.CANCELLED
