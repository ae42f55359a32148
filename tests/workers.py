"""Start a real Celery worker process against the test database and the configured broker."""

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parent.parent


def worker_environment() -> dict[str, str]:
    """The environment a worker needs to see the test database that pytest-django created."""
    env = os.environ.copy()
    env["DJANGO_SETTINGS_MODULE"] = "tests.settings"
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        env["DATABASE_URL"] = f"sqlite://{Path(db['NAME']).resolve()}"
    else:
        credentials = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
        host = f"{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}"
        env["DATABASE_URL"] = f"postgres://{credentials}@{host}/{db['NAME']}"
    env["COWORKENV_VAR_DIR"] = str(settings.VAR_DIR)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def purge_queues() -> None:
    from coworkenv_web.celery import app

    with app.connection_for_write() as conn:
        for queue in ("default", "llm", "gpu"):
            with contextlib.suppress(Exception):
                conn.default_channel.queue_purge(queue)


class WorkerProcess:
    def __init__(self, *, queues: str = "default,llm,gpu", concurrency: int = 2, log_path=None):
        self.queues = queues
        self.concurrency = concurrency
        self.log_path = log_path
        self.process: subprocess.Popen | None = None

    def start(self) -> "WorkerProcess":
        log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "coworkenv_web",
                "worker",
                "-Q",
                self.queues,
                "--concurrency",
                str(self.concurrency),
                "--loglevel",
                "INFO",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
            ],
            cwd=ROOT,
            env=worker_environment(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return self

    def kill(self) -> None:
        """Kill the worker and its pool children at once, as a crash or OOM would."""
        if self.process and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()


def wait_for(predicate, *, timeout: float = 60, interval: float = 0.2, message: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"Timed out after {timeout}s waiting for {message}.")
