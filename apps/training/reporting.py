"""How the training entry point reports back. Pure Python (no Django, stdlib only).

Every event is one JSON object with a ``type``:

- ``started``   ``{"resumed_from_step": int, "data_sha256": {"train": hex, …}, "total_steps"}``
- ``metrics``   ``{"step", "epoch", "loss", "eval_loss", "learning_rate", "grad_norm",
  "tokens_per_second", "max_rss_gb", "max_gpu_memory_gb"}`` (absent values omitted)
- ``checkpoint`` ``{"step", "path"}``
- ``log``       ``{"line"}``
- ``finished``  ``{"status": "succeeded"|"failed"|"cancelled", "message", "artifacts"}``

Two reporters: ``EventsFileReporter`` appends the events to a JSONL file that the ``local``
backend's supervising worker tails into the database; ``HttpReporter`` POSTs each event to
the job's callback URL with its secret (the ``command`` backend), and learns from the answer
whether someone asked to cancel.
"""

from __future__ import annotations

import json
import logging
import os
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)


def sendable(value: Any) -> Any:
    """``value`` with NUL and lone surrogates in its strings replaced by U+FFFD: the app's
    API refuses both (a training script's stderr may carry either), and a refused
    ``finished`` event would leave the job running."""
    if isinstance(value, str):
        if "\x00" in value or any("\ud800" <= c <= "\udfff" for c in value):
            return "".join(
                "\ufffd" if c == "\x00" or "\ud800" <= c <= "\udfff" else c for c in value
            )
        return value
    if isinstance(value, dict):
        return {sendable(k): sendable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [sendable(v) for v in value]
    return value


class Reporter:
    cancel_requested = False

    def emit(self, event: dict[str, Any]) -> None:  # pragma: no cover - interface
        raise NotImplementedError


class EventsFileReporter(Reporter):
    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def emit(self, event: dict[str, Any]) -> None:
        line = json.dumps({**event, "time": time.time()}, ensure_ascii=False) + "\n"
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()


class HttpReporter(Reporter):
    """POST ``{"events": [event]}`` with ``Authorization: Bearer <secret>``; the answer is
    ``{"cancel": bool}``. A failed POST is retried a few times, then logged and dropped:
    losing a metrics point must not stop a training run."""

    def __init__(self, url: str, secret: str, *, attempts: int = 3, timeout: float = 15.0):
        self.url = url
        self.secret = secret
        self.attempts = attempts
        self.timeout = timeout

    def emit(self, event: dict[str, Any]) -> None:
        body = json.dumps({"events": [sendable({**event, "time": time.time()})]}).encode()
        request = urllib.request.Request(
            self.url,
            data=body,
            method="POST",
            headers={
                "Content-Type": "application/json",
                "Authorization": f"Bearer {self.secret}",
            },
        )
        for attempt in range(1, self.attempts + 1):
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    answer = json.loads(response.read() or b"{}")
                self.cancel_requested = bool(answer.get("cancel"))
                return
            except urllib.error.HTTPError as exc:
                if exc.code == 410:  # the job has ended (cancelled): stop training
                    self.cancel_requested = True
                    return
                if exc.code < 500:  # refused (wrong secret): retrying will not help
                    logger.error("The callback refused an event: HTTP %s", exc.code)
                    return
            except (urllib.error.URLError, OSError, ValueError) as exc:
                logger.warning("Callback attempt %s failed: %s", attempt, exc)
            time.sleep(min(2**attempt, 10))
        logger.error("Could not report an event of type %s.", event.get("type"))


def reporter_from_config(config: dict[str, Any]) -> Reporter:
    report = config.get("report") or {}
    if report.get("events_file"):
        return EventsFileReporter(report["events_file"])
    if report.get("callback_url"):
        secret = report.get("callback_secret") or os.environ.get("COWORKENV_CALLBACK_SECRET", "")
        return HttpReporter(report["callback_url"], secret)
    raise ValueError("The config's `report` names neither an events_file nor a callback_url.")
