"""How long a claim on background work lives, and the thread that keeps it alive.

Every unit of background work (a job, a synthesis slot, a run) is claimed by a worker with a
conditional UPDATE that writes a fresh token and ``heartbeat_at`` (``apps.core.claims``).
While the worker works, its ``Heartbeat`` renews ``heartbeat_at`` every quarter of
``JOB_STALE_AFTER_S``; a claim that has not been renewed for ``JOB_STALE_AFTER_S`` belongs to
a dead process and may be taken over. The sweeper (``Claimable.sweep``) sends such work to
the workers again.

One thread per process renews every claim (``_Beater``), each on its own schedule: the first
renewal ``heartbeat_every()`` after the claim registered, then ``heartbeat_every()`` after
the previous one (claims due within a tenth of that are renewed in the same wake-up, a
little early). Renewals are one UPDATE per claim, one after the other on the thread's own
connection, so a claim's renewal can also wait behind the others due at the same moment
(milliseconds each; a database that hangs delays them all, as it would the work itself) —
far under ``JOB_STALE_AFTER_S``, which is four beats. It was one thread per claim, each
started and joined by the run (Thread.start and join were ~6 % of a threads-pool worker's
CPU outside waits in issue 15's profile) and each with a connection of its own once it beat
(64 runs in flight: 64 more connections to PostgreSQL); now it is one thread and one
connection per process, held only while claims are registered. Batching the renewals of
many claims into one UPDATE was not done: at the default ``JOB_STALE_AFTER_S`` (45 s) a run
of the bench lasts ~1.5 s and is never renewed at all, so it would gain nothing measurable.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
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
    """Renew a claim from the process's beater thread while the work runs.

    ``renew`` writes the heartbeat with an UPDATE fenced by the claim token and returns
    whether a row was updated; ``False`` means the claim was taken over and ``lost`` becomes
    true for this claim only (the work notices at its next checkpoint). A database error is
    logged and the next beat tries again: a short outage must not give the claim away while
    the worker is alive. The first renewal comes ``heartbeat_every()`` after ``__enter__``,
    and each next one ``heartbeat_every()`` after the previous ended; once ``__exit__`` has
    returned, ``renew`` is not called again (an exit waits for a renewal under way).

    Inside a test's wrapping transaction the beater's own connection could not see the row,
    so the claim is not registered there (nothing else could take the claim over anyway).
    """

    def __init__(self, renew: Callable[[], bool], *, name: str = "claim"):
        self.renew = renew
        self.name = name
        self.lost = False
        self._due = 0.0  # the beater's clock at the next renewal, kept by the beater
        self._active = False
        self._renewing = threading.Lock()

    def __enter__(self) -> Heartbeat:
        if not connection.in_atomic_block:
            self._active = True
            _beater().register(self)
        return self

    def __exit__(self, *exc) -> None:
        if not self._active:
            return
        _beater().unregister(self)
        # A renewal the beater has already picked up ends before the work goes on.
        renewal_ended = self._renewing.acquire(timeout=30)
        self._active = False
        if renewal_ended:
            self._renewing.release()

    def beat(self) -> bool:
        """One renewal, from the beater's thread; whether to keep renewing this claim."""
        with self._renewing:
            if not self._active:
                return False
            try:
                if not self.renew():
                    self.lost = True
                    return False
            except TRANSIENT_DB_ERRORS as exc:
                logger.warning("Heartbeat of %s failed (%s); trying again.", self.name, exc)
                with contextlib.suppress(Exception):
                    connection.close()
            except Exception:  # the work notices a lost claim at its next checkpoint
                logger.exception("Heartbeat of %s stopped", self.name)
                with contextlib.suppress(Exception):
                    connection.close()
                return False
            return True


class _Beater:
    """The one thread of a process that renews every registered claim when it is due.

    It sleeps until the earliest claim is due and renews the claims due by then one after
    the other on its own database connection, which it keeps while claims are registered
    and closes as soon as none is (and on a database error); after ``IDLE_S`` without claims
    the thread leaves, and the next registration starts another. ``clock`` is the monotonic
    clock it schedules by (a test's beater has a fake one).
    """

    IDLE_S = 5.0

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self._claims: dict[int, Heartbeat] = {}
        self._changed = threading.Condition(threading.Lock())
        self._thread: threading.Thread | None = None
        self._wake_at: float | None = None  # when the thread's current wait ends

    def register(self, claim: Heartbeat) -> None:
        with self._changed:
            claim._due = self._clock() + heartbeat_every()
            self._claims[id(claim)] = claim
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)
                self._thread.start()
            elif self._wake_at is None or claim._due < self._wake_at:
                self._changed.notify()

    def unregister(self, claim: Heartbeat) -> None:
        with self._changed:
            if self._claims.pop(id(claim), None) is not None and not self._claims:
                self._changed.notify()  # to close the connection now, not in 11 s

    def _run(self) -> None:
        try:
            while (due := self._wait_for_due()) is not None:
                for claim in due:
                    keep = claim.beat()
                    with self._changed:
                        if not keep:
                            self._claims.pop(id(claim), None)
                        elif id(claim) in self._claims:
                            claim._due = self._clock() + heartbeat_every()
        except Exception:
            logger.exception("The heartbeat thread stopped")
            with self._changed:
                self._thread = None
        finally:
            with contextlib.suppress(Exception):
                connection.close()

    def _wait_for_due(self) -> list[Heartbeat] | None:
        """The claims due now, once there are some; None when the thread should leave."""
        idle_since = None
        with self._changed:
            while True:
                now = self._clock()
                if self._claims:
                    idle_since = None
                    earliest = min(claim._due for claim in self._claims.values())
                    if earliest <= now:
                        self._wake_at = None
                        # Claims due a little later are renewed in the same wake-up (early,
                        # which is harmless): many claims, few wake-ups.
                        by = now + heartbeat_every() / 10
                        return sorted(
                            (c for c in self._claims.values() if c._due <= by),
                            key=lambda c: c._due,
                        )
                    self._wake_at = earliest
                elif idle_since is None:
                    idle_since = now
                    self._wake_at = None
                    self._changed.release()
                    try:  # no claim left: no connection held for nothing
                        with contextlib.suppress(Exception):
                            connection.close()
                    finally:
                        self._changed.acquire()
                    continue  # a claim may have come meanwhile
                elif now - idle_since >= self.IDLE_S:
                    self._thread = None
                    return None
                else:
                    self._wake_at = idle_since + self.IDLE_S
                self._changed.wait(self._wake_at - now)


_the_beater: _Beater | None = None
_the_beater_lock = threading.Lock()


def _beater() -> _Beater:
    global _the_beater
    if _the_beater is None:
        with _the_beater_lock:
            if _the_beater is None:
                _the_beater = _Beater()
    return _the_beater


def _forget_beater_after_fork() -> None:
    """A forked child (a prefork pool process) has none of its parent's threads: it starts
    a beater of its own at its first claim, with fresh locks."""
    global _the_beater, _the_beater_lock
    _the_beater = None
    _the_beater_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_beater_after_fork)
