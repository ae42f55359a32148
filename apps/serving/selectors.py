"""Reads of model servers: the project's list, readiness and idleness."""

from datetime import datetime, timedelta

from django.db.models import Max

from apps.core.models import JobStatus
from apps.llm.models import LLMCall
from apps.serving.models import ModelServer


def model_server_list(*, project):
    return ModelServer.objects.filter(project=project).select_related(
        "job", "endpoint", "trained_model"
    )


def model_server_ready(*, server: ModelServer) -> bool:
    """Whether the server answers and its endpoint is registered (the row as last read)."""
    return (
        server.job.status == JobStatus.RUNNING
        and server.ready_at is not None
        and server.endpoint_id is not None
    )


def model_server_last_request_at(*, server: ModelServer) -> datetime | None:
    """When the app last sent its endpoint a request (ready_at if it never did)."""
    if server.endpoint_id is None:
        return server.ready_at
    last = LLMCall.objects.filter(endpoint_id=server.endpoint_id).aggregate(at=Max("created_at"))
    return max(filter(None, (last["at"], server.ready_at)), default=None)


def model_server_idle_expired(*, server: ModelServer, now: datetime) -> bool:
    """Whether the server has gone ``idle_timeout_s`` without a request (0: never)."""
    if not server.idle_timeout_s:
        return False
    since = model_server_last_request_at(server=server)
    return since is not None and now - since >= timedelta(seconds=server.idle_timeout_s)
