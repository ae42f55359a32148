"""Writes for model servers: start, stop, the endpoint they register, and the sweep.

What another app calls (the experiments recipe, the training pages)::

    server = model_server_start(project=p, trained_model=tm, user=u)   # or model_path="…"
    server = model_server_wait_ready(server=server, timeout_s=600)     # endpoint registered
    llm_chat(endpoint=server.endpoint, …)
    model_server_stop(server=server)

A server is a ``core.Job`` of kind ``model_server`` worked by ``serve_model_task`` on the
``gpu`` queue (``apps.serving.running``): claimed, heartbeated, cancellable. While its
server answers it is the model endpoint ``served-<id>`` of the project, whose one allowed
non-public address is the server's own (``ModelEndpoint.served_address``); the endpoint is
deleted when the server stops: on click, after its idle timeout, or when its worker dies
(``model_servers_sweep``).
"""

from __future__ import annotations

import re
import time
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from apps.core.exceptions import ApplicationError
from apps.core.leases import stale_after
from apps.core.models import Job, JobStatus
from apps.core.services import job_cancel, job_create, job_finish, send_task
from apps.llm.models import ModelEndpoint
from apps.llm.services import endpoint_create, endpoint_delete
from apps.serving.models import MODEL_SERVER_KIND, ModelServer
from apps.training.models import ModelKind, TrainedModel
from apps.training.selectors import trained_model_base
from apps.training.services.evaluation import tool_call_parser

SERVE_TASK = "apps.serving.tasks.serve_model_task"
MAX_IDLE_TIMEOUT_S = 7 * 24 * 3600
# A hub id (org/name) or an absolute local folder; never a flag, a preset or a URL.
MODEL_PATH = re.compile(r"^(/[^\s\x00-\x1f]*|[A-Za-z0-9][\w.-]*/[\w.-]+)$")


def _model_of(trained_model: TrainedModel | None, model_path: str, project) -> dict:
    if (trained_model is None) == (not model_path):
        raise ApplicationError("Name either a trained model or a model path to serve.")
    if trained_model is None:
        return {"model_path": model_path.strip(), "adapter_path": ""}
    if trained_model.project_id != project.pk:
        raise ApplicationError("That trained model belongs to another project.")
    if trained_model.kind == ModelKind.REMOTE or not trained_model.path:
        raise ApplicationError("The provider hosts this model; it has no weights to serve.")
    if trained_model.kind == ModelKind.ADAPTER:
        return {"model_path": trained_model_base(trained_model), "adapter_path": trained_model.path}
    return {"model_path": trained_model.path, "adapter_path": ""}


def _check_path(path: str, field: str) -> None:
    if not MODEL_PATH.match(path) or ".." in path.split("/"):
        raise ApplicationError(
            "Enter a Hugging Face model id (org/name) or an absolute folder on the worker.",
            {"fields": {field: ["A model id like Qwen/Qwen2.5-0.5B-Instruct or /models/mine."]}},
        )


@transaction.atomic
def model_server_start(
    *,
    project,
    user=None,
    trained_model: TrainedModel | None = None,
    model_path: str = "",
    idle_timeout_s: int | None = None,
) -> ModelServer:
    """Queue a server for ``trained_model`` (its full weights, or its LoRA adapter on its
    base model) or for ``model_path`` (a hub id or a folder on the gpu worker, e.g. the base
    model of a before/after). ``idle_timeout_s``: stopped after this long without a request
    through its endpoint (default ``SERVING_IDLE_TIMEOUT_S``; 0 never)."""
    model = _model_of(trained_model, model_path, project)
    _check_path(model["model_path"], "model_path")
    if model["adapter_path"]:
        _check_path(model["adapter_path"], "model_path")
    idle = settings.SERVING_IDLE_TIMEOUT_S if idle_timeout_s is None else idle_timeout_s
    if not 0 <= idle <= MAX_IDLE_TIMEOUT_S:
        raise ApplicationError(
            "The idle timeout is between 0 (never) and 7 days.",
            {"fields": {"idle_timeout_s": ["Between 0 and 604800 seconds."]}},
        )
    name = model["adapter_path"] or model["model_path"]
    job = job_create(
        project=project,
        kind=MODEL_SERVER_KIND,
        title=f"Serve {name}"[:200],
        started_by=user,
        enqueue=lambda job_id: send_task(SERVE_TASK, job_id),
    )
    Job.objects.filter(pk=job.pk).update(enqueued_at=timezone.now())
    server = ModelServer(
        project=project,
        job=job,
        trained_model=trained_model,
        tool_call_parser=tool_call_parser(
            trained_model.base_model if trained_model else model["model_path"]
        ),
        idle_timeout_s=idle,
        **model,
    )
    server.full_clean()
    server.save()
    return server


def model_server_stop(*, server: ModelServer) -> ModelServer:
    """Ask the server to stop: a queued one ends at once, a running one within a poll (its
    worker stops the process and deletes the endpoint)."""
    if not server.job.is_active:
        raise ApplicationError("This server has already stopped.")
    job_cancel(job=server.job)
    server.refresh_from_db()
    return server


def model_server_wait_ready(
    *, server: ModelServer, timeout_s: float, poll_s: float = 1.0
) -> ModelServer:
    """Block until the server answers and its endpoint is registered (for a job that goes
    on with it, e.g. an experiment's student batch); ApplicationError if it ended or is not
    ready within ``timeout_s``."""
    from apps.serving.selectors import model_server_ready

    deadline = time.monotonic() + timeout_s
    while True:
        server.refresh_from_db()
        server.job.refresh_from_db()
        if model_server_ready(server=server):
            return server
        if not server.job.is_active:
            raise ApplicationError(f"The model server stopped: {server.job.message}")
        if time.monotonic() >= deadline:
            raise ApplicationError(f"The model server was not ready within {timeout_s:g} s.")
        time.sleep(poll_s)


@transaction.atomic
def model_server_register(*, server: ModelServer, now: datetime) -> ModelEndpoint:
    """The server answers: make it the project's endpoint ``served-<id>`` (allowed to reach
    exactly the server's address and port), and the trained model's endpoint."""
    endpoint = ModelEndpoint.objects.filter(
        project_id=server.project_id, name=f"served-{server.pk}"
    ).first() or endpoint_create(
        project=server.project,
        created_by=server.job.started_by,
        name=f"served-{server.pk}",
        base_url=server.base_url,
        model=server.served_model,
        temperature=0.0,
        max_concurrency=settings.SERVING_MAX_CONCURRENCY,
        max_tokens=settings.SERVING_MAX_TOKENS,
        served_address=f"{server.host}:{server.port}",
    )
    server.endpoint = endpoint
    server.ready_at = now
    server.save(update_fields=["endpoint", "ready_at"])
    if server.trained_model_id:
        TrainedModel.objects.filter(pk=server.trained_model_id).update(endpoint=endpoint)
    return endpoint


def model_server_unregister(*, server: ModelServer) -> None:
    """The server is gone: so is its endpoint (run batches keep its name and model)."""
    endpoint = ModelEndpoint.objects.filter(pk=server.endpoint_id).first()
    if endpoint is not None:
        endpoint_delete(endpoint=endpoint)
    ModelServer.objects.filter(pk=server.pk).update(endpoint=None)
    server.endpoint = None


def model_servers_sweep(*, now: datetime | None = None) -> dict:
    """Servers whose worker died (running, silent for ``JOB_STALE_AFTER_S``) are marked
    stopped and their endpoint deleted: a server dies with its worker, so there is nothing
    to take over. Servers still queued that long after they were sent are sent again (the
    message was lost). Returns ``{"stopped": [job ids], "sent": [job ids]}``."""
    now = now or timezone.now()
    before = now - stale_after()
    servers = Job.objects.filter(kind=MODEL_SERVER_KIND)
    silent = Q(heartbeat_at__lt=before) | Q(heartbeat_at__isnull=True)
    stopped = []
    for job_id in servers.filter(silent, status=JobStatus.RUNNING).values_list("pk", flat=True):
        with transaction.atomic():
            job = servers.select_for_update().filter(silent, pk=job_id, status="running").first()
            if job is None:
                continue
            job_finish(
                job=job,
                status=JobStatus.FAILED,
                message="Its worker stopped, and the server with it; start it again.",
            )
            model_server_unregister(server=ModelServer.objects.get(job=job))
        stopped.append(job_id)
    sent = []
    lost = servers.filter(Q(enqueued_at__lt=before) | Q(enqueued_at__isnull=True))
    for job_id in lost.filter(status=JobStatus.PENDING).values_list("pk", flat=True):
        if lost.filter(pk=job_id, status=JobStatus.PENDING).update(enqueued_at=now):
            send_task(SERVE_TASK, job_id)
            sent.append(job_id)
    return {"stopped": stopped, "sent": sent}
