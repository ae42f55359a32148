"""A real uvicorn server on a loopback port, in a thread, for the environment server tests;
``serve --workers`` in a subprocess."""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import uvicorn

from .helpers import SAMPLES


@contextlib.contextmanager
def running(app, **config) -> Iterator[str]:
    """Serve ``app`` on 127.0.0.1:<free port>; yields ``http://127.0.0.1:<port>``.
    ``config``: more ``uvicorn.Config`` options (``log_level="info"`` for the access log)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            **{"log_level": "warning", "lifespan": "on", "ws_max_size": 16 * 2**20, **config},
        )
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)
        sock.close()


def free_ports(n: int) -> int:
    """The first of ``n`` consecutive free loopback ports."""
    for _ in range(100):
        with socket.socket() as first:
            first.bind(("127.0.0.1", 0))
            port = first.getsockname()[1]
        try:
            for k in range(n):
                with socket.socket() as probe:
                    probe.bind(("127.0.0.1", port + k))
        except OSError:
            continue
        return port
    raise RuntimeError(f"no {n} consecutive free ports")


@contextlib.contextmanager
def serving_workers(n: int) -> Iterator[tuple[list[str], subprocess.Popen]]:
    """``coworkenv-env serve samples/*.json --workers n`` in a subprocess; yields the
    workers' URLs and the process, stopped by SIGTERM at the end."""
    port = free_ports(n)
    command = [sys.executable, "-m", "coworkenv_engine", "serve", *map(str, SAMPLES)]
    proc = subprocess.Popen([*command, "--workers", str(n), "--port", str(port)])
    urls = [f"http://127.0.0.1:{port + k}" for k in range(n)]
    try:
        deadline = time.monotonic() + 60
        while not all(_healthy(url) for url in urls):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the workers did not start")
            time.sleep(0.2)
        yield urls, proc
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def worker_pids(pid: int) -> list[int]:
    """The child processes of ``pid`` (Linux /proc)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [int(child) for child in children]


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False
