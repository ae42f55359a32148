"""The call log: one LLMCall row per attempt, written in a short transaction of its own
(or kept in a CallLogBuffer and written in bulk), and the checks made before the first
attempt (the base URL, the API key), whose refusals are logged like any failed attempt."""

import functools
import os
import time
import uuid

from django.db import transaction

from apps.core.safeinput import storable
from apps.core.timings import timed
from apps.llm.exceptions import (
    LLMConfigurationError,
)
from apps.llm.models import (
    LLMCall,
    LLMCallStatus,
    ModelEndpoint,
    api_key_env_allowed,
    api_key_host_refusal,
)
from apps.llm.network import allowed_networks, base_url_refusal
from apps.llm.transport import (
    ERROR_TEXT_LIMIT,
)


class CallLogBuffer:
    """Call log rows of successful attempts, kept in memory and written in bulk: at the
    latest ``flush_every_s`` after the first one waiting, and whenever the owner calls
    ``flush`` (a run does at its end). A process killed in between loses those rows (the
    work they belong to is replayed, and logs its calls again)."""

    def __init__(self, *, flush_every_s: float = 5.0):
        self.flush_every_s = flush_every_s
        self.rows: list[LLMCall] = []
        self._first_at = 0.0

    def add(self, row: LLMCall) -> None:
        if not self.rows:
            self._first_at = time.monotonic()
        self.rows.append(row)
        if time.monotonic() - self._first_at >= self.flush_every_s:
            self.flush()

    def unwritten(self, rows: list[LLMCall]) -> None:
        """``rows``, which a flush wrote in a transaction that was then rolled back, wait
        again (as new rows) to be written."""
        for row in rows:
            row.pk = None
            row._state.adding = True
        self.rows = rows + [row for row in self.rows if all(row is not old for old in rows)]

    def flush(self) -> None:
        """Write the rows waiting, in one bulk INSERT."""
        if not self.rows:
            return
        rows, self.rows = self.rows, []
        # (within the caller's transaction if it has one: a run's closing write)
        with timed("call_log"), transaction.atomic(savepoint=False):
            LLMCall.objects.bulk_create(rows)


class CallLog:
    """Writes one LLMCall row per attempt, each in its own short transaction (or, for a
    successful attempt, into the caller's ``CallLogBuffer``)."""

    def __init__(self, *, endpoint, job, purpose, messages, params, buffer=None):
        self.endpoint = endpoint
        self.job = job
        self.purpose = purpose
        self.messages = _without_image_data(messages)
        self.params = params
        self.group = uuid.uuid4()
        self.buffer = buffer

    def write(self, *, attempt: int, status: str, **fields) -> LLMCall:
        fields = {name: storable(value) for name, value in fields.items()}
        if "error" in fields:
            fields["error"] = fields["error"][:ERROR_TEXT_LIMIT]
        row = LLMCall(
            project_id=self.endpoint.project_id,
            endpoint=self.endpoint,
            endpoint_name=self.endpoint.name,
            model=self.endpoint.model,
            job=self.job,
            purpose=self.purpose,
            group=self.group,
            attempt=attempt,
            status=status,
            request_messages=self.messages,
            request_params=self.params,
            **fields,
        )
        if self.buffer is not None and status == LLMCallStatus.OK:
            self.buffer.add(row)
            return row
        with timed("call_log"), transaction.atomic(durable=True):
            row.save(force_insert=True)
        return row


def check_base_url(endpoint: ModelEndpoint, log: CallLog) -> None:
    """Refuse a base URL of the wrong shape or with a refused IP literal before any request
    (a row saved before the rule, or written around the services). Host names are checked at
    the connection itself, after resolution (``apps.llm.network.GuardedNetworkBackend``)."""
    refusal = _base_url_refusal(endpoint.base_url, allowed_networks(), endpoint.served_address)
    if refusal is None:
        return
    detail = f"Refused to connect: {refusal}"
    call = log.write(attempt=1, status=LLMCallStatus.ERROR, error=detail)
    raise LLMConfigurationError(
        f"Endpoint “{endpoint.name}” cannot be used: {detail}",
        detail=detail,
        endpoint=endpoint.name,
        attempts=1,
        call_id=call.pk,
    )


@functools.lru_cache(maxsize=64)
def _base_url_refusal(base_url: str, networks: tuple, served: str = "") -> str | None:
    """``base_url_refusal`` without name resolution, once per URL and allowed networks (it
    parses the URL and any IP literal: a twentieth of a call's CPU when done every time)."""
    return base_url_refusal(base_url, resolve_names=False, served=served)


def api_key_of(endpoint: ModelEndpoint, log: CallLog) -> str:
    if not endpoint.api_key_env:
        return ""
    # Checked again here, not only when the endpoint is saved: a row saved before the rule
    # (or written around the form) must not send another server variable to its base URL.
    allowed = api_key_env_allowed(endpoint.api_key_env)
    refusal = api_key_host_refusal(endpoint.api_key_env, endpoint.base_url) if allowed else None
    value = os.environ.get(endpoint.api_key_env, "") if allowed and not refusal else ""
    if value:
        return value
    if not allowed:
        detail = (
            f"{endpoint.api_key_env} is not an API key variable (its name must end in API_KEY)."
        )
    else:
        detail = refusal or f"Environment variable {endpoint.api_key_env} is not set on the server."
    call = log.write(attempt=1, status=LLMCallStatus.ERROR, error=detail)
    raise LLMConfigurationError(
        f"Endpoint “{endpoint.name}” cannot be used: {detail}",
        detail=detail,
        endpoint=endpoint.name,
        attempts=1,
        call_id=call.pk,
    )


def _without_image_data(messages: list[dict]) -> list[dict]:
    """The messages as logged: an ``image_url`` part's ``data:`` URL (megabytes of base64,
    resent with every request of a conversation) is kept as its media type and size only."""
    out = []
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            out.append(message)
            continue
        parts = []
        for part in content:
            image = part.get("image_url") if isinstance(part, dict) else None
            url = image.get("url") if isinstance(image, dict) else None
            if isinstance(url, str) and url.startswith("data:") and "," in url:
                head, body = url.split(",", 1)
                part = {**part, "image_url": {**image, "url": f"{head},… ({len(body)} chars)"}}
            parts.append(part)
        out.append({**message, "content": parts})
    return out
