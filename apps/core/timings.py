"""Where the time of a unit of background work goes, phase by phase (for benchmarks).

Code marks its phases with ``with timed("slot_wait"): ...``; nothing is measured unless the
caller collects (``with collecting() as timings``), so the marks cost one context-variable
read in production. A thread of its own (a heartbeat) adds to a ``Timings`` it was handed.

The runs benchmark sets ``RUN_TIMINGS_FILE``; every run then appends one JSON line with its
phases (seconds and counts) to that file (see ``apps.runs.services.execution``).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import threading
import time

_current: contextvars.ContextVar[Timings | None] = contextvars.ContextVar(
    "coworkenv_timings", default=None
)


class Timings:
    """Seconds and counts per phase name (thread-safe: a heartbeat thread adds to it)."""

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self.counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def add(self, name: str, seconds: float, count: int = 1) -> None:
        with self._lock:
            self.seconds[name] = self.seconds.get(name, 0.0) + seconds
            self.counts[name] = self.counts.get(name, 0) + count

    @contextlib.contextmanager
    def timed(self, name: str):
        started = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - started)

    def to_dict(self) -> dict:
        with self._lock:
            return {
                "seconds": {k: round(v, 6) for k, v in self.seconds.items()},
                "counts": dict(self.counts),
            }

    def append_to(self, path: str, **extra) -> None:
        """One JSON line, appended in one write (lines from many processes do not mix)."""
        line = json.dumps({**extra, **self.to_dict()}) + "\n"
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)


def current() -> Timings | None:
    return _current.get()


@contextlib.contextmanager
def timed(name: str):
    """Add the block's duration to the current ``Timings``, if one is collecting."""
    timings = _current.get()
    if timings is None:
        yield
        return
    started = time.perf_counter()
    try:
        yield
    finally:
        timings.add(name, time.perf_counter() - started)


@contextlib.contextmanager
def collecting(timings: Timings | None = None):
    """Collect the phases marked inside the block (in this thread) into ``timings``."""
    timings = timings if timings is not None else Timings()
    token = _current.set(timings)
    try:
        yield timings
    finally:
        _current.reset(token)
