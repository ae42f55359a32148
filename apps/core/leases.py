"""How long a claim on background work lives, and the thread that keeps it alive.

Every unit of background work (a job, a synthesis slot, a run) is claimed by a worker with a
conditional UPDATE that writes a fresh token and ``heartbeat_at``. While the worker works, a
``Heartbeat`` thread renews ``heartbeat_at`` every quarter of ``JOB_STALE_AFTER_S``; a claim
that has not been renewed for ``JOB_STALE_AFTER_S`` belongs to a dead process and may be
taken over. The sweeper (``apps.core.services.jobs_sweep`` and one per app) sends such work
to the workers again.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
from collections.abc import Callable
from datetime import timedelta

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection

logger = logging.getLogger(__name__)

# Errors that say "the database is not reachable right now" (refused, dropped, locked):
# the work is put back and the task is retried, never failed.
TRANSIENT_DB_ERRORS = (OperationalError, InterfaceError)


def stale_after() -> timedelta:
    return timedelta(seconds=settings.JOB_STALE_AFTER_S)


def heartbeat_every() -> float:
    return max(0.2, settings.JOB_STALE_AFTER_S / 4)


def max_claims() -> int:
    return settings.JOB_MAX_CLAIMS


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class Heartbeat:
    """Renew a claim from a background thread while the work runs.

    ``renew`` writes the heartbeat with an UPDATE fenced by the claim token and returns
    whether a row was updated; ``False`` means the claim was taken over and ``lost`` becomes
    true (the work notices at its next checkpoint). A database error is logged and the next
    beat tries again: a short outage must not give the claim away while the worker is alive.

    Inside a test's wrapping transaction the thread's own connection could not see the row,
    so no thread is started there (nothing else could take the claim over anyway).
    """

    def __init__(self, renew: Callable[[], bool], *, name: str = "claim"):
        self.renew = renew
        self.name = name
        self.lost = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Heartbeat:
        if not connection.in_atomic_block:
            self._thread = threading.Thread(
                target=self._beat, name=f"heartbeat {self.name}", daemon=True
            )
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _beat(self) -> None:
        try:
            while not self._stop.wait(heartbeat_every()):
                try:
                    if not self.renew():
                        self.lost = True
                        return
                except TRANSIENT_DB_ERRORS as exc:
                    logger.warning("Heartbeat of %s failed (%s); trying again.", self.name, exc)
                    with contextlib.suppress(Exception):
                        connection.close()
        except Exception:  # the work notices a lost claim at its next checkpoint
            logger.exception("Heartbeat of %s stopped", self.name)
        finally:
            with contextlib.suppress(Exception):
                connection.close()
