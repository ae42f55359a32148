"""The one way CoworkEnv talks to a language model.

``llm_chat`` sends one chat completion request to a ``ModelEndpoint`` through the official
``openai`` client and returns an ``LLMResult``; ``llm_json`` does the same and parses one
JSON object from the answer. Every attempt holds one of the endpoint's concurrency slots
(shared by all workers, see ``concurrency.py``) and leaves one ``LLMCall`` row, written in a
short transaction of its own so the log survives whatever happens to the caller.

Retries: connection errors, timeouts, 429 and 5xx are retried with exponential backoff and
full jitter (a ``Retry-After`` / ``retry-after-ms`` header sets the wait instead, capped);
any other 4xx is raised at once as ``LLMRequestError``. When the attempts or the total wait
run out, ``LLMUnavailable`` is raised.
"""

import functools
import json
import logging
import os
import random
import re
import ssl
import threading
import time
import uuid
from dataclasses import dataclass, field
from decimal import Decimal

import httpx2
import openai
from django.conf import settings
from django.db import transaction
from openai._models import FinalRequestOptions

from apps.core.safeinput import UnsafeInput, json_check, storable
from apps.core.timings import timed
from apps.llm.concurrency import SlotTimeout, endpoint_slot, ensure_outside_transaction
from apps.llm.exceptions import (
    LLMConfigurationError,
    LLMOutputError,
    LLMRequestError,
    LLMUnavailable,
)
from apps.llm.jsontext import JSONExtractionError, extract_json_object
from apps.llm.models import (
    LLMCall,
    LLMCallStatus,
    ModelEndpoint,
    api_key_env_allowed,
    api_key_host_refusal,
)
from apps.llm.network import AddressRefused, allowed_networks, base_url_refusal, guarded_http_client
from apps.llm.redaction import body_excerpt, redact

logger = logging.getLogger(__name__)

ERROR_TEXT_LIMIT = 2000


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try. Defaults come from settings (``LLM_*``); override per call."""

    max_attempts: int = 4
    max_total_wait_s: float = 180.0
    base_delay_s: float = 1.0
    max_delay_s: float = 30.0
    retry_after_cap_s: float = 60.0
    slot_wait_s: float = 900.0

    @classmethod
    def from_settings(cls, **overrides) -> "RetryPolicy":
        values = {
            "max_attempts": getattr(settings, "LLM_MAX_ATTEMPTS", cls.max_attempts),
            "max_total_wait_s": getattr(settings, "LLM_MAX_TOTAL_WAIT_S", cls.max_total_wait_s),
            "base_delay_s": getattr(settings, "LLM_BACKOFF_BASE_S", cls.base_delay_s),
            "max_delay_s": getattr(settings, "LLM_BACKOFF_MAX_S", cls.max_delay_s),
            "retry_after_cap_s": getattr(settings, "LLM_RETRY_AFTER_CAP_S", cls.retry_after_cap_s),
            "slot_wait_s": getattr(settings, "LLM_SLOT_WAIT_S", cls.slot_wait_s),
        }
        values.update(overrides)
        return cls(**values)

    def backoff(self, attempt: int) -> float:
        """Full jitter: uniform in [0, min(max, base · 2^(attempt-1))]."""
        ceiling = min(self.max_delay_s, self.base_delay_s * (2 ** (attempt - 1)))
        return random.uniform(0, ceiling)


@dataclass(frozen=True)
class LLMResult:
    content: str | None
    tool_calls: list[dict]  # [{"id", "name", "arguments" (a JSON string, as the model wrote it)}]
    finish_reason: str | None
    tokens_in: int
    tokens_out: int
    latency_ms: int
    cost: Decimal
    call_id: int | None  # None while its row waits in a CallLogBuffer
    model: str
    attempts: int = 1

    def as_message(self) -> dict:
        """The answer as an assistant message in OpenAI chat format (for transcripts)."""
        message: dict = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {"name": call["name"], "arguments": call["arguments"]},
                }
                for call in self.tool_calls
            ]
        return message


@dataclass(frozen=True)
class LLMJSONResult:
    data: dict
    result: LLMResult  # the answer that parsed
    results: list[LLMResult] = field(default_factory=list)  # every answer, re-asks included

    @property
    def tokens_in(self) -> int:
        return sum(r.tokens_in for r in self.results)

    @property
    def tokens_out(self) -> int:
        return sum(r.tokens_out for r in self.results)

    @property
    def cost(self) -> Decimal:
        return sum((r.cost for r in self.results), Decimal("0"))

    @property
    def latency_ms(self) -> int:
        return sum(r.latency_ms for r in self.results)


@dataclass
class _Failure:
    detail: str
    retryable: bool
    status: int | None = None
    retry_after: float | None = None
    body: object = None
    configuration: bool = False  # refused before any request: not the endpoint's answer


# --- public API -------------------------------------------------------------------------


def llm_chat(
    *,
    endpoint: ModelEndpoint,
    messages: list[dict],
    purpose: str,
    job=None,
    tools: list[dict] | None = None,
    tool_choice: str | dict | None = None,
    response_schema: dict | None = None,
    schema_name: str = "result",
    describe_schema: bool = True,
    temperature: float | None = None,
    max_tokens: int | None = None,
    extra_body: dict | None = None,
    retry: RetryPolicy | None = None,
    timeout_s: float | None = None,
    call_log: "CallLogBuffer | None" = None,
) -> LLMResult:
    """Send one chat completion request (retrying transient failures) and log every attempt.

    ``call_log``: the row of a successful attempt goes into this buffer, written in bulk
    later (its ``call_id`` is then None); failed attempts are written at once.

    ``response_schema``: a JSON Schema the answer must follow. Sent as ``response_format``
    when the endpoint supports it; otherwise an instruction to answer with JSON only (and,
    with ``describe_schema``, the schema itself) is added to the system message.

    Must not be called inside a database transaction: the call log and the concurrency
    slots are committed as they happen, so that other workers and a later reader see them.
    """
    ensure_outside_transaction("llm_chat()")
    policy = retry or RetryPolicy.from_settings()
    timeout = float(endpoint.request_timeout_s if timeout_s is None else timeout_s)
    messages = _plain_json(list(messages))
    kwargs: dict = {
        "model": endpoint.model,
        "temperature": endpoint.temperature if temperature is None else temperature,
        "max_tokens": endpoint.max_tokens if max_tokens is None else max_tokens,
    }
    summary = {
        "model": endpoint.model,
        "temperature": kwargs["temperature"],
        "max_tokens": kwargs["max_tokens"],
        "timeout_s": timeout,
        "tools": [_tool_name(tool) for tool in tools or []],
        "tool_choice": tool_choice,
        "response_format": None,
    }
    if tools:
        kwargs["tools"] = tools
    if tool_choice is not None:
        kwargs["tool_choice"] = tool_choice
    if response_schema is not None:
        if endpoint.supports_json_schema:
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": _schema_name(schema_name),
                    "schema": response_schema,
                    "strict": False,
                },
            }
            summary["response_format"] = "json_schema"
        else:
            messages = _with_json_instruction(
                messages, response_schema if describe_schema else None
            )
            summary["response_format"] = "prompt"
    if extra_body:
        kwargs["extra_body"] = extra_body
    kwargs["messages"] = messages

    log = _CallLog(
        endpoint=endpoint,
        job=job,
        purpose=purpose,
        messages=messages,
        params=summary,
        buffer=call_log,
    )
    _check_base_url(endpoint, log)
    api_key = _api_key(endpoint, log)

    waited = 0.0
    attempt = 0
    client = _endpoint_client(
        endpoint.base_url,
        api_key or "not-needed",
        timeout,
        allowed_networks(),  # part of the cache key: pooled connections were checked under it
        endpoint.served_address,
    )
    content = _request_content(kwargs)
    while True:
        attempt += 1
        try:
            with endpoint_slot(endpoint, timeout=policy.slot_wait_s):
                started = time.monotonic()
                try:
                    with timed("model"):
                        completion = _create_completion(client, content)
                    failure = None
                except openai.OpenAIError as exc:
                    completion = None
                    failure = _classify(exc, endpoint, timeout)
                except AddressRefused as exc:  # raised by the connection, before any packet
                    completion = None
                    failure = _Failure(
                        f"Refused to connect: {exc.message}", retryable=False, configuration=True
                    )
                latency_ms = round((time.monotonic() - started) * 1000)
        except SlotTimeout as exc:
            call = log.write(attempt=attempt, status=LLMCallStatus.ERROR, error=str(exc))
            raise LLMUnavailable(
                f"Endpoint “{endpoint.name}” is unavailable: {exc}",
                detail=str(exc),
                endpoint=endpoint.name,
                attempts=attempt,
                call_id=call.pk,
            ) from None

        if failure is None:
            result, failure = _read_completion(completion, endpoint, latency_ms)
            if failure is None:
                call = log.write(
                    attempt=attempt,
                    status=LLMCallStatus.OK,
                    response=result["response"],
                    tokens_in=result["tokens_in"],
                    tokens_out=result["tokens_out"],
                    latency_ms=latency_ms,
                    cost=result["cost"],
                )
                return LLMResult(
                    content=result["response"]["content"],
                    tool_calls=result["response"]["tool_calls"],
                    finish_reason=result["response"]["finish_reason"],
                    tokens_in=result["tokens_in"],
                    tokens_out=result["tokens_out"],
                    latency_ms=latency_ms,
                    cost=result["cost"],
                    call_id=call.pk,
                    model=result["response"]["model"] or endpoint.model,
                    attempts=attempt,
                )

        delay = _next_delay(failure, policy, attempt, waited)
        call = log.write(
            attempt=attempt,
            status=LLMCallStatus.RETRYING if delay is not None else LLMCallStatus.ERROR,
            error=failure.detail,
            http_status=failure.status,
            latency_ms=latency_ms,
            response={"error_body": body_excerpt(failure.body)} if failure.body else {},
        )
        if delay is None:
            error_class = LLMUnavailable if failure.retryable else LLMRequestError
            if failure.configuration:
                error_class = LLMConfigurationError
            if failure.configuration:
                message = f"Endpoint “{endpoint.name}” cannot be used: {failure.detail}"
            elif failure.retryable:
                message = (
                    f"Endpoint “{endpoint.name}” is unavailable after {attempt} "
                    f"attempt{'s' if attempt != 1 else ''}: {failure.detail}"
                )
            else:
                message = f"Endpoint “{endpoint.name}” refused the request: {failure.detail}"
            raise error_class(
                message,
                detail=failure.detail,
                endpoint=endpoint.name,
                status=failure.status,
                attempts=attempt,
                call_id=call.pk,
            )
        logger.info(
            "LLM %s attempt %s to %s failed (%s); retrying in %.2fs",
            purpose,
            attempt,
            endpoint.name,
            failure.detail,
            delay,
        )
        time.sleep(delay)
        waited += delay


def llm_json(
    *,
    endpoint: ModelEndpoint,
    messages: list[dict],
    purpose: str,
    schema: dict | None = None,
    schema_name: str = "result",
    describe_schema: bool = True,
    job=None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    retry: RetryPolicy | None = None,
    reask: int = 0,
) -> LLMJSONResult:
    """Ask for one JSON object and return it parsed (tolerantly: fences and prose are fine).

    With ``reask`` > 0, an unusable answer is sent back with the reason and the model is
    asked again, up to ``reask`` times. Raises ``LLMOutputError`` (with an excerpt of the
    answer and the ``LLMResult`` as ``.result``) when no complete object can be read.
    """
    conversation = list(messages)
    results: list[LLMResult] = []
    while True:
        result = llm_chat(
            endpoint=endpoint,
            messages=conversation,
            purpose=purpose,
            job=job,
            response_schema=schema if schema is not None else {"type": "object"},
            schema_name=schema_name,
            describe_schema=describe_schema and schema is not None,
            temperature=temperature,
            max_tokens=max_tokens,
            retry=retry,
        )
        results.append(result)
        try:
            data = parse_json_answer(result)
        except LLMOutputError as exc:
            if len(results) > reask:
                raise
            conversation = [
                *messages,
                {"role": "assistant", "content": result.content or ""},
                {
                    "role": "user",
                    "content": f"{exc.detail} Reply again with the complete JSON object only: "
                    "no prose, no code fences.",
                },
            ]
            continue
        return LLMJSONResult(data=data, result=result, results=results)


def parse_json_answer(result: LLMResult) -> dict:
    """The JSON object in an answer's text, or ``LLMOutputError`` saying why there is none."""
    try:
        return extract_json_object(result.content)
    except JSONExtractionError as exc:
        detail = exc.message
        truncated = exc.truncated
        if result.finish_reason == "length":
            truncated = True
            detail = (
                f"The answer was cut off at the token limit (finish_reason=length). {exc.message}"
            )
        label = "It ends" if truncated else "It reads"
        raise LLMOutputError(
            f"Unusable answer (LLM call #{result.call_id}): {detail}"
            + (f" {label}: “{exc.excerpt}”" if exc.excerpt else ""),
            detail=detail,
            excerpt=exc.excerpt,
            truncated=truncated,
            result=result,
            call_id=result.call_id,
            attempts=result.attempts,
        ) from None


# --- internals ----------------------------------------------------------------------------


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


class _CallLog:
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


def _check_base_url(endpoint: ModelEndpoint, log: _CallLog) -> None:
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


def _api_key(endpoint: ModelEndpoint, log: _CallLog) -> str:
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


@dataclass(frozen=True)
class _EndpointClient:
    """The ``openai.OpenAI`` client of one endpoint configuration, and the parts of its chat
    completion request that every call shares (built once, by the SDK itself)."""

    openai: openai.OpenAI
    url: httpx2.URL
    headers: httpx2.Headers  # auth, the SDK's own headers, httpx's defaults, Host
    extensions: dict  # the timeout


_ENDPOINT_CLIENTS_LOCK = threading.Lock()


def _endpoint_client(
    base_url: str, api_key: str, timeout: float, networks: tuple, served: str = ""
):
    """One client per endpoint configuration and process, reused across calls.

    The client is thread-safe, and its pool keeps connections alive. Built by one thread
    while the process's others wanting it wait: a threads worker's lanes all make their
    first call at a batch's start, and each built a client (and a pool whose connections
    were dropped with it) where one was kept. Every connection goes through the address
    guard of ``apps.llm.network``. No retries inside the client: ``llm_chat`` retries (and
    logs each attempt) itself.
    """
    with _ENDPOINT_CLIENTS_LOCK:
        return _built_endpoint_client(base_url, api_key, timeout, networks, served)


@functools.lru_cache(maxsize=32)
def _built_endpoint_client(
    base_url: str, api_key: str, timeout: float, networks: tuple, served: str
):
    client = openai.OpenAI(
        base_url=base_url,
        api_key=api_key,
        timeout=timeout,
        max_retries=0,
        http_client=guarded_http_client(timeout=timeout, served=served),
    )
    # What ``client.post("/chat/completions", ...)`` would send but the body. Every input of
    # it (key, base URL, timeout) is in this cache's key, and the SDK's retry count is 0.
    template = client._build_request(
        FinalRequestOptions.construct(method="post", url="/chat/completions")
    )
    headers = template.headers.copy()
    del headers["Content-Length"]  # the empty template's; each request sets its own
    return _EndpointClient(client, template.url, headers, template.extensions)


def _request_content(kwargs: dict) -> bytes:
    """The request's JSON body (``extra_body`` merged in), written as the SDK writes it."""
    body = {key: value for key, value in kwargs.items() if key != "extra_body"}
    body.update(kwargs.get("extra_body") or {})
    return json.dumps(
        body, default=_json_default, ensure_ascii=False, separators=(",", ":"), allow_nan=False
    ).encode()


def _create_completion(client: _EndpointClient, content: bytes):
    """POST one chat completion through the SDK client's own httpx client (its pool, its
    address guard, its timeout) and return the parsed JSON body, or the text of a body that
    is not JSON.

    ``client.openai.post`` did the same for as much CPU again as all the rest of
    ``llm_chat`` (``bench/llm_call.py``: 1.55 → 0.78 ms a call): it rebuilt the request
    options, headers and URL on every call, and built pydantic models of the answer that
    ``_read_completion`` took apart again. Failures become the SDK's own exceptions, as
    its ``request`` makes them: a timeout ``APITimeoutError``, any other transport error
    (TLS included, as the SDK counts it) ``APIConnectionError`` with the httpx error as its
    cause, a non-2xx answer the ``APIStatusError`` subclass the SDK picks for that status
    (``_make_status_error_from_response``: body, headers, message).
    ``tests/llm/test_client_http.py`` compares both ways on the loopback server."""
    http = client.openai._client
    request = httpx2.Request(
        "POST",
        client.url,
        headers=client.headers,
        cookies=http.cookies,
        content=content,
        extensions=client.extensions,
    )
    try:
        response = http.send(request)
    except httpx2.TimeoutException as exc:
        raise openai.APITimeoutError(request=request) from exc
    except (httpx2.RequestError, ssl.SSLError) as exc:
        raise openai.APIConnectionError(request=request) from exc
    if not response.is_success:
        raise client.openai._make_status_error_from_response(response) from None
    try:
        return json.loads(response.content)
    except (ValueError, RecursionError):  # not JSON (a proxy's HTML page, a cut-off body)
        return response.text


def _classify(exc: openai.OpenAIError, endpoint: ModelEndpoint, timeout: float) -> _Failure:
    if isinstance(exc, openai.APITimeoutError):
        return _Failure(
            f"No answer within {timeout:g} s"
            + (
                " (the endpoint's request timeout)."
                if timeout == endpoint.request_timeout_s
                else " (the limit of this request)."
            ),
            retryable=True,
        )
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        reason = f" ({type(cause).__name__}: {cause})" if cause else ""
        return _Failure(f"Could not connect to {endpoint.base_url}{reason}.", retryable=True)
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        return _Failure(
            f"HTTP {status}: {_error_text(exc.body, exc.response)}",
            retryable=status == 429 or status >= 500,
            status=status,
            retry_after=_retry_after(exc.response.headers),
            body=exc.body,
        )
    if isinstance(exc, openai.APIResponseValidationError):
        return _Failure(
            "The endpoint answered with something that is not a chat completion.",
            retryable=True,
            status=exc.status_code,
            body=exc.body,
        )
    return _Failure(f"{type(exc).__name__}: {exc}", retryable=False)


def _read_completion(completion, endpoint: ModelEndpoint, latency_ms: int):
    """(fields, None) for a usable completion (the parsed JSON body), (None, failure) for
    anything else: a body that is not JSON or not shaped like a chat completion is the
    endpoint's fault, retried like a 5xx."""
    if not isinstance(completion, dict):
        return None, _not_a_completion(completion)
    choices = completion.get("choices")
    if not choices:
        return None, _Failure(
            "The endpoint answered without any choices.", retryable=True, status=200
        )
    choice = choices[0] if isinstance(choices, list) else None
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
        return None, _not_a_completion(completion)
    content = message.get("content")
    tool_calls = _tool_calls(message.get("tool_calls"))
    if tool_calls is None or not isinstance(content, str | None):
        return None, _not_a_completion(completion)
    usage = completion.get("usage")
    if not isinstance(usage, dict):
        usage = {}
    tokens_in = _token_count(usage.get("prompt_tokens"))
    tokens_out = _token_count(usage.get("completion_tokens"))
    # The answer is data from outside: NUL and lone surrogates become U+FFFD here, once, so
    # that the call log, transcripts and drafts can always store it.
    response = storable(
        {
            "id": _text_or_none(completion.get("id")),
            "model": _text_or_none(completion.get("model")),
            "content": content,
            "tool_calls": [
                {**call, "arguments": _storable_arguments(call["arguments"])} for call in tool_calls
            ],
            "finish_reason": _text_or_none(choice.get("finish_reason")),
        }
    )
    return {
        "response": response,
        "tokens_in": tokens_in,
        "tokens_out": tokens_out,
        "cost": endpoint.cost_of(tokens_in, tokens_out),
    }, None


def _not_a_completion(body) -> _Failure:
    return _Failure(
        "The endpoint answered HTTP 200 with a body that is not a chat completion.",
        retryable=True,
        status=200,
        body=body,
    )


def _tool_calls(calls) -> list[dict] | None:
    """``[{"id", "name", "arguments"}]`` from a message's ``tool_calls``; None when they are
    not a list of calls with a name. A custom (non-function) tool call gives its input as
    the arguments."""
    if not calls:
        return []
    if not isinstance(calls, list):
        return None
    out = []
    for call in calls:
        if not isinstance(call, dict):
            return None
        function = call.get("function")
        if isinstance(function, dict):
            name, arguments = function.get("name"), function.get("arguments") or ""
        else:
            custom = call.get("custom")
            if not isinstance(custom, dict):
                return None
            name, arguments = custom.get("name"), custom.get("input") or ""
        if not isinstance(name, str):
            return None
        out.append({"id": _text_or_none(call.get("id")), "name": name, "arguments": arguments})
    return out


def _token_count(value) -> int:
    return max(0, int(value)) if isinstance(value, int | float) and value == value else 0


def _text_or_none(value) -> str | None:
    return value if isinstance(value, str) else None


def _storable_arguments(arguments):
    """Tool-call arguments are JSON text: an escaped NUL or lone surrogate inside it would
    only appear once parsed, so such a text is parsed and written again, storable."""
    if not isinstance(arguments, str) or "\\u" not in arguments:
        return arguments
    try:
        json_check(json.loads(arguments))
    except UnsafeInput:
        return json.dumps(storable(json.loads(arguments)), ensure_ascii=False)
    except (ValueError, RecursionError):
        pass  # not JSON: the agent loop reports that to the model as it is
    return arguments


def _next_delay(failure: _Failure, policy: RetryPolicy, attempt: int, waited: float):
    """Seconds to sleep before the next attempt, or None to give up."""
    if not failure.retryable or attempt >= policy.max_attempts:
        return None
    remaining = policy.max_total_wait_s - waited
    if failure.retry_after is not None:
        delay = min(max(failure.retry_after, 0.0), policy.retry_after_cap_s)
        return delay if delay <= remaining else None
    if remaining <= 0:
        return None
    return min(policy.backoff(attempt), remaining)


def _retry_after(headers) -> float | None:
    """Seconds the server asked us to wait: ``retry-after-ms`` first, then ``Retry-After``
    (seconds or an HTTP date)."""
    value = headers.get("retry-after-ms")
    if value:
        try:
            return float(value) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _error_text(body, response) -> str:
    """The error message the server gave, shortened and with credentials redacted."""
    return redact(_error_message(body, response))


def _error_message(body, response) -> str:
    """The error message the server gave: ``{"error": {"message"}}``, ``{"message"}``,
    ``{"detail"}`` or its text, shortened."""
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict):
            for key in ("message", "detail", "error"):
                if isinstance(error.get(key), str) and error[key]:
                    return error[key][:500]
        elif isinstance(error, str) and error:
            return error[:500]
        return json.dumps(body)[:500]
    if isinstance(body, str) and body.strip():
        return " ".join(body.split())[:500]
    return response.reason_phrase or "no message"


def _tool_name(tool: dict) -> str:
    if isinstance(tool, dict):
        function = tool.get("function")
        if isinstance(function, dict):
            return str(function.get("name", ""))
        return str(tool.get("name", ""))
    return str(tool)


def _schema_name(name: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9_-]", "_", name or "result")[:64]
    return cleaned or "result"


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


def _with_json_instruction(messages: list[dict], schema: dict | None) -> list[dict]:
    instruction = (
        "Answer with one JSON object only: no prose before or after it and no code fences."
    )
    if schema is not None:
        instruction += " It must validate against this JSON Schema:\n" + json.dumps(schema)
    if (
        messages
        and messages[0].get("role") == "system"
        and isinstance(messages[0].get("content"), str)
    ):
        first = {**messages[0], "content": messages[0]["content"].rstrip() + "\n\n" + instruction}
        return [first, *messages[1:]]
    return [{"role": "system", "content": instruction}, *messages]


def _plain_json(value):
    """A JSON-safe copy (messages may carry objects from the openai SDK)."""
    return json.loads(json.dumps(value, default=_json_default))


def _json_default(value):
    if hasattr(value, "model_dump"):
        return value.model_dump(exclude_none=True)
    return str(value)


def endpoint_openai_client(endpoint: ModelEndpoint) -> openai.OpenAI:
    """An ``openai.OpenAI`` client for an endpoint's other APIs (files, fine-tuning jobs),
    with the same key rules as ``llm_chat``: only an *API_KEY variable, only to the hosts
    LLM_KEY_HOSTS allows; the base URL and every connection through the address guard. No
    retries inside the client: callers poll and retry themselves."""
    refusal = base_url_refusal(
        endpoint.base_url, resolve_names=False, served=endpoint.served_address
    )
    if refusal is not None:
        detail = f"Refused to connect: {refusal}"
        raise LLMConfigurationError(
            f"Endpoint “{endpoint.name}” cannot be used: {detail}",
            detail=detail,
            endpoint=endpoint.name,
        )
    key = ""
    if endpoint.api_key_env:
        allowed = api_key_env_allowed(endpoint.api_key_env)
        refusal = api_key_host_refusal(endpoint.api_key_env, endpoint.base_url) if allowed else None
        key = os.environ.get(endpoint.api_key_env, "") if allowed and not refusal else ""
        if not key:
            if not allowed:
                detail = f"{endpoint.api_key_env} is not an API key variable."
            else:
                detail = refusal or f"Environment variable {endpoint.api_key_env} is not set."
            raise LLMConfigurationError(
                f"Endpoint “{endpoint.name}” cannot be used: {detail}",
                detail=detail,
                endpoint=endpoint.name,
            )
    return _endpoint_client(
        endpoint.base_url,
        key or "not-needed",
        endpoint.request_timeout_s,
        allowed_networks(),
        endpoint.served_address,
    ).openai


def describe_openai_error(exc: Exception, endpoint: ModelEndpoint) -> tuple[str, bool]:
    """``(what went wrong, whether retrying may help)`` for an error of the openai client."""
    if isinstance(exc, openai.OpenAIError):
        failure = _classify(exc, endpoint, endpoint.request_timeout_s)
        return failure.detail, failure.retryable
    return f"{type(exc).__name__}: {exc}", False
