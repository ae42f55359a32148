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


def worker_environment(*, sqlite_timeout: float | None = None) -> dict[str, str]:
    """The environment a worker needs to see the test database that pytest-django created.

    ``sqlite_timeout``: how long the worker waits for a locked SQLite database before its
    query fails (the default is 20 s)."""
    env = os.environ.copy()
    env["DJANGO_SETTINGS_MODULE"] = "tests.settings"
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        env["DATABASE_URL"] = f"sqlite://{Path(db['NAME']).resolve()}"
        if sqlite_timeout is not None:
            env["DATABASE_URL"] += f"?timeout={sqlite_timeout}"
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
    def __init__(
        self,
        *,
        queues: str = "default,llm,gpu",
        concurrency: int = 2,
        log_path=None,
        sqlite_timeout: float | None = None,
        pool: str = "prefork",
        hostname: str | None = None,
        env: dict[str, str] | None = None,
    ):
        self.queues = queues
        self.concurrency = concurrency
        self.log_path = log_path
        self.sqlite_timeout = sqlite_timeout
        self.pool = pool
        self.hostname = hostname
        self.env = env or {}
        self.process: subprocess.Popen | None = None

    def arguments(self) -> list[str]:
        return [
            "worker",
            "-Q",
            self.queues,
            "--concurrency",
            str(self.concurrency),
            "--pool",
            self.pool,
            "--loglevel",
            "INFO",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            *(["--hostname", self.hostname] if self.hostname else []),
        ]

    def start(self) -> "WorkerProcess":
        log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "coworkenv_web", *self.arguments()],
            cwd=ROOT,
            env={**worker_environment(sqlite_timeout=self.sqlite_timeout), **self.env},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return self

    def pool_children(self) -> list[int]:
        """The pids of the worker's pool processes (the children of its main process)."""
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        return [int(pid) for pid in children.read_text().split()]

    def log(self) -> str:
        return Path(self.log_path).read_text() if self.log_path else ""

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


class BeatProcess(WorkerProcess):
    """Celery beat with the project's schedule (the sweepers, every JOB_SWEEP_EVERY_S); its
    schedule file lives in the test run's var folder, like the local mode's under var/."""

    def arguments(self) -> list[str]:
        return ["beat", "--loglevel", "INFO"]


class WorkerGroup:
    """The worker and beat processes one test starts, each logging to its own file in
    ``log_dir``; ``stop_all`` stops every one still running and prints the end of each log
    (pytest shows it when the test fails)."""

    def __init__(self, log_dir, *, tail: int = 3000):
        self.log_dir = Path(log_dir)
        self.tail = tail
        self.started: list[tuple[str, WorkerProcess]] = []

    def start(self, name: str, *, kind: type[WorkerProcess] | None = None, **kwargs):
        """Start a worker (or ``kind=BeatProcess``) named ``name``; its log is
        ``<log_dir>/<name>.log``."""
        process = (kind or WorkerProcess)(log_path=self.log_dir / f"{name}.log", **kwargs)
        self.started.append((name, process.start()))
        return process

    def stop_all(self) -> None:
        for name, process in self.started:
            process.stop()
            print(f"--- {name}\n{process.log()[-self.tail :]}")


@contextlib.contextmanager
def worker_group(log_dir, *, tail: int = 3000):
    """The queues purged, then a ``WorkerGroup`` whose processes are all stopped (and their
    logs printed) on the way out, whatever happened; yields its ``start``. A test module's
    fixture is then::

        @pytest.fixture
        def processes(tmp_path):
            with worker_group(tmp_path) as start:
                yield start
    """
    purge_queues()
    group = WorkerGroup(log_dir, tail=tail)
    try:
        yield group.start
    finally:
        group.stop_all()


class DatabaseOutage:
    """The database refuses the workers for a while; this test process keeps its own
    connection (it is the one that ends the outage).

    PostgreSQL: the test database stops accepting connections (``ALLOW_CONNECTIONS false``)
    and every other connection to it is terminated, so workers get "terminating connection"
    and then "not currently accepting connections". SQLite: another connection holds an
    exclusive lock, so every other connection gets "database is locked" (start the workers
    with a short ``sqlite_timeout``).
    """

    def __init__(self):
        self.db = connection.settings_dict
        self._lock = None
        self.postgres = not self.db["ENGINE"].endswith("sqlite3")

    def _admin(self):
        import psycopg

        return psycopg.connect(
            dbname="postgres",
            user=self.db["USER"],
            password=self.db["PASSWORD"] or None,
            host=self.db["HOST"] or "127.0.0.1",
            port=self.db["PORT"] or 5432,
            autocommit=True,
        )

    def begin(self) -> None:
        if self.postgres:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                own = cursor.fetchone()[0]
            with self._admin() as admin:
                name = self.db["NAME"]
                admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false')
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = %s AND pid <> %s",
                    (name, own),
                )
        else:
            import sqlite3

            self._lock = sqlite3.connect(self.db["NAME"], timeout=30, isolation_level=None)
            self._lock.execute("BEGIN EXCLUSIVE")

    def end(self) -> None:
        if self.postgres:
            with self._admin() as admin:
                admin.execute(f'ALTER DATABASE "{self.db["NAME"]}" WITH ALLOW_CONNECTIONS true')
        elif self._lock is not None:
            self._lock.execute("ROLLBACK")
            self._lock.close()
            self._lock = None

    def __enter__(self) -> "DatabaseOutage":
        self.begin()
        return self

    def __exit__(self, *exc) -> None:
        self.end()


def queued_messages(queue: str) -> list[tuple[str, list]]:
    """Take every message waiting in a queue: (task name, args) each, in queue order."""
    from coworkenv_web.celery import app

    messages = []
    with app.connection_for_read() as conn:
        channel = conn.default_channel
        while (message := channel.basic_get(queue, no_ack=True)) is not None:
            args, _kwargs, _embed = message.decode()
            messages.append((message.headers["task"], list(args)))
    return messages


def wait_for(predicate, *, timeout: float = 60, interval: float = 0.2, message: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"Timed out after {timeout}s waiting for {message}.")
