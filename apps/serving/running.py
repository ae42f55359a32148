"""The work of a ``model_server`` job on its gpu worker: start the server, register its
endpoint once it answers, and keep it until it is stopped, idle or gone.

Each poll (``SERVING_POLL_S``) appends the server's new output to the log tail, reports
through the job (its heartbeat, and where a stop click is noticed) and checks the idle
timeout against ``clock`` (injected by the tests). However the loop ends — stop, idle,
the server exiting, the claim lost — the process group is stopped and the endpoint
deleted.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from apps.core.exceptions import ApplicationError
from apps.core.services import JobContext, job_execute
from apps.serving import process
from apps.serving.models import LOG_TAIL_CHARS, ModelServer
from apps.serving.selectors import model_server_idle_expired
from apps.serving.services import model_server_register, model_server_unregister


def _append_log(server: ModelServer, text: str) -> None:
    if text:
        server.log_tail = (server.log_tail + text)[-LOG_TAIL_CHARS:]
        ModelServer.objects.filter(pk=server.pk).update(log_tail=server.log_tail)


def _prepare(server: ModelServer) -> list[str]:
    server.engine = process.choose_engine()
    server.host = settings.SERVING_HOST
    server.port = process.free_port(server.host)
    server.served_model = process.served_model(server)
    command = process.server_command(server)
    server.command = " ".join(command)
    server.ready_at = None
    server.save(update_fields=["engine", "host", "port", "served_model", "command", "ready_at"])
    return command


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1][:500] if lines else "no output."


def _poll(context: JobContext, server: ModelServer, running, started: datetime, now) -> str:
    """One look at the server; a closing message once it is to stop, else ''."""
    code = running.poll()
    if code is not None:
        raise ApplicationError(
            f"The server exited with status {code}: {_last_line(server.log_tail)}"
        )
    if server.ready_at is None:
        if process.healthy(server):
            model_server_register(server=server, now=now)
        elif now - started > timedelta(seconds=settings.SERVING_START_TIMEOUT_S):
            raise ApplicationError(
                f"The server did not answer within {settings.SERVING_START_TIMEOUT_S} s: "
                f"{_last_line(server.log_tail)}"
            )
    elif model_server_idle_expired(server=server, now=now):
        return f"Stopped after {server.idle_timeout_s} s without a request."
    message = f"Serving at {server.base_url}" if server.ready_at else "Loading the model…"
    context.progress(0, None, message)
    return ""


def model_server_run(context: JobContext, *, clock: Callable[[], datetime] = timezone.now) -> str:
    """Serve until stopped; the job's closing message."""
    server = ModelServer.objects.select_related("job", "project").get(job=context.job)
    command = _prepare(server)
    log_path = Path(settings.SERVING_ROOT) / str(server.project_id) / f"{server.pk}.log"
    log = process.LogTail(log_path)
    _append_log(server, f"[coworkenv] attempt {context.job.attempts}: {server.command}\n")
    running = process.launch(command, log_path)
    started = clock()
    try:
        while True:
            _append_log(server, log.read())
            closing = _poll(context, server, running, started, clock())
            if closing:
                return closing
            process.wait_interval()
    finally:
        process.stop(running)
        _append_log(server, log.read())
        model_server_unregister(server=server)


def model_server_run_in_thread(*, server: ModelServer) -> threading.Thread:
    """Work the server's job in a thread of this process, as its gpu worker would, for a
    caller that runs without workers (an experiment advanced with ``--sync``). It stops as
    any server does: ``model_server_stop``, its idle timeout, or this process ending."""
    thread = threading.Thread(
        target=job_execute,
        kwargs={"job_id": server.job_id, "work": model_server_run},
        name=f"model-server-{server.pk}",
        daemon=True,
    )
    thread.start()
    return thread
