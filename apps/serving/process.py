"""The server process on the worker: which well-kept server, its command, its port, its
health, and stopping it (its whole process group).

vLLM where it is installed (GPU nodes), otherwise ``transformers serve`` through
``apps.serving.transformers_server`` (CPU). Each server runs in its own process group and
is told to die with the worker thread that started it (``PR_SET_PDEATHSIG``), so a worker
killed with ``kill -9`` leaves no server behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from django.conf import settings

from apps.serving.models import Engine, ModelServer

STOP_GRACE_S = 10.0
HEALTH_TIMEOUT_S = 2.0
PR_SET_PDEATHSIG = 1


def choose_engine() -> str:
    """``SERVING_ENGINE``, or vLLM when it is importable here, else transformers."""
    if settings.SERVING_ENGINE != "auto":
        return settings.SERVING_ENGINE
    return Engine.VLLM if importlib.util.find_spec("vllm") else Engine.TRANSFORMERS


def free_port(host: str) -> int:
    """A port nothing listens on now (the server binds it a moment later)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def served_model(server: ModelServer) -> str:
    """The model name requests will carry: vLLM is given ``served-<id>``; a pinned
    ``transformers serve`` answers to its model folder only (an adapter's: the folder it
    is merged into, under ``SERVING_ROOT``)."""
    if server.engine == Engine.VLLM:
        return f"served-{server.pk}"
    if server.adapter_path:
        return str(Path(settings.SERVING_ROOT) / str(server.project_id) / f"{server.pk}-merged")
    return server.model_path


def server_command(server: ModelServer) -> list[str]:
    """The command that serves ``server`` on its host and port, with tool calling on."""
    host, port = server.host, str(server.port)
    if server.engine == Engine.VLLM:
        vllm = str(Path(sys.executable).with_name("vllm"))
        if server.adapter_path:
            command = [vllm, "serve", server.model_path, "--enable-lora"]
            command += ["--lora-modules", f"{server.served_model}={server.adapter_path}"]
        else:
            command = [vllm, "serve", server.model_path]
            command += ["--served-model-name", server.served_model]
        command += ["--enable-auto-tool-choice", "--tool-call-parser", server.tool_call_parser]
        return [*command, "--host", host, "--port", port]
    device = "cpu" if settings.SERVING_DEVICE == "cpu" else "auto"
    # transformers parses by model type; hermes is the one parser it can be given besides
    hermes = ["--tool-call-parser", "hermes"] if server.tool_call_parser == "hermes" else []
    model = [server.model_path]
    if server.adapter_path:
        model = ["--adapter", server.adapter_path, "--merge-into", server.served_model]
    return [
        sys.executable,
        "-m",
        "apps.serving.transformers_server",
        *model,
        *hermes,
        "--host",
        host,
        "--port",
        port,
        "--device",
        device,
        "--log-level",
        "info",
    ]


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def launch(command: list[str], log_path: Path) -> subprocess.Popen:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(settings.BASE_DIR), os.environ.get("PYTHONPATH", "")) if p
        ),
        "PYTHONUNBUFFERED": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    with open(log_path, "ab") as log_file:
        return subprocess.Popen(
            command,
            cwd=settings.BASE_DIR,
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )


def healthy(server: ModelServer) -> bool:
    """Whether the server answers ``GET /health`` with 200 (both servers have it; each
    starts answering once its model is loaded)."""
    url = server.base_url.removesuffix("/v1") + "/health"
    try:
        with urllib.request.urlopen(url, timeout=HEALTH_TIMEOUT_S) as response:
            return response.status == 200
    except (OSError, urllib.error.URLError):
        return False


def stop(process: subprocess.Popen) -> None:
    """SIGTERM to the server's process group, SIGKILL after a grace period."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)
        try:
            process.wait(timeout=STOP_GRACE_S)
            return
        except subprocess.TimeoutExpired:
            continue


class LogTail:
    """New text of a growing log file, from where the last read stopped."""

    def __init__(self, path: Path):
        self.path = path
        self.offset = path.stat().st_size if path.exists() else 0

    def read(self) -> str:
        if not self.path.exists():
            return ""
        with open(self.path, "rb") as handle:
            handle.seek(self.offset)
            data = handle.read()
        self.offset += len(data)
        return data.decode("utf-8", errors="replace")


def wait_interval() -> None:
    time.sleep(settings.SERVING_POLL_S)
