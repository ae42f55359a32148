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

import json
import logging
import random
import re
import time
from dataclasses import dataclass, field
from decimal import Decimal

import openai
from django.conf import settings

from apps.core.timings import timed
from apps.llm.call_log import CallLog, CallLogBuffer, api_key_of, check_base_url
from apps.llm.concurrency import SlotTimeout, endpoint_slot, ensure_outside_transaction
from apps.llm.exceptions import (
    LLMConfigurationError,
    LLMOutputError,
    LLMRequestError,
    LLMUnavailable,
)
from apps.llm.jsontext import JSONExtractionError, extract_json_object
from apps.llm.models import (
    LLMCallStatus,
    ModelEndpoint,
)
from apps.llm.network import AddressRefused, allowed_networks
from apps.llm.redaction import body_excerpt
from apps.llm.transport import (
    Failure,
    classify,
    create_completion,
    endpoint_client,
    json_default,
    read_completion,
    request_content,
)

logger = logging.getLogger(__name__)


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
    kwargs, summary = _request(
        endpoint,
        _plain_json(list(messages)),
        tools=tools,
        tool_choice=tool_choice,
        response_schema=response_schema,
        schema_name=schema_name,
        describe_schema=describe_schema,
        temperature=temperature,
        max_tokens=max_tokens,
        extra_body=extra_body,
    )
    summary["timeout_s"] = timeout
    log = CallLog(
        endpoint=endpoint,
        job=job,
        purpose=purpose,
        messages=kwargs["messages"],
        params=summary,
        buffer=call_log,
    )
    check_base_url(endpoint, log)
    client = endpoint_client(
        endpoint.base_url,
        api_key_of(endpoint, log) or "not-needed",
        timeout,
        allowed_networks(),  # part of the cache key: pooled connections were checked under it
        endpoint.served_address,
    )
    content = request_content(kwargs)
    waited, attempt = 0.0, 0
    while True:
        attempt += 1
        completion, failure, latency_ms = _attempt(
            client, content, endpoint, policy, timeout, log, attempt
        )
        if failure is None:
            result, failure = read_completion(completion, endpoint, latency_ms)
            if failure is None:
                return _result(endpoint, log, attempt, result, latency_ms)
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
            raise _given_up(failure, endpoint, attempt, call)
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


def _request(endpoint: ModelEndpoint, messages: list[dict], **options) -> tuple[dict, dict]:
    """The request's keyword arguments, and their summary for the call log."""
    tools, tool_choice = options["tools"], options["tool_choice"]
    temperature, max_tokens = options["temperature"], options["max_tokens"]
    kwargs: dict = {
        "model": endpoint.model,
        "temperature": endpoint.temperature if temperature is None else temperature,
        "max_tokens": endpoint.max_tokens if max_tokens is None else max_tokens,
    }
    summary = {
        "model": endpoint.model,
        "temperature": kwargs["temperature"],
        "max_tokens": kwargs["max_tokens"],
        "timeout_s": None,
        "tools": [_tool_name(tool) for tool in tools or []],
        "tool_choice": tool_choice,
        "response_format": None,
    }
    if tools:
        kwargs["tools"] = tools
    if tool_choice is not None:
        kwargs["tool_choice"] = tool_choice
    schema = options["response_schema"]
    if schema is not None and endpoint.supports_json_schema:
        kwargs["response_format"] = {
            "type": "json_schema",
            "json_schema": {
                "name": _schema_name(options["schema_name"]),
                "schema": schema,
                "strict": False,
            },
        }
        summary["response_format"] = "json_schema"
    elif schema is not None:
        described = schema if options["describe_schema"] else None
        messages = _with_json_instruction(messages, described)
        summary["response_format"] = "prompt"
    if options["extra_body"]:
        kwargs["extra_body"] = options["extra_body"]
    kwargs["messages"] = messages
    return kwargs, summary


def _attempt(client, content: bytes, endpoint, policy, timeout: float, log: CallLog, attempt: int):
    """One attempt in one of the endpoint's slots: (completion, failure, latency in ms)."""
    try:
        with endpoint_slot(endpoint, timeout=policy.slot_wait_s):
            started = time.monotonic()
            try:
                with timed("model"):
                    completion = create_completion(client, content)
                failure = None
            except openai.OpenAIError as exc:
                completion = None
                failure = classify(exc, endpoint, timeout)
            except AddressRefused as exc:  # raised by the connection, before any packet
                completion = None
                failure = Failure(
                    f"Refused to connect: {exc.message}", retryable=False, configuration=True
                )
            return completion, failure, round((time.monotonic() - started) * 1000)
    except SlotTimeout as exc:
        call = log.write(attempt=attempt, status=LLMCallStatus.ERROR, error=str(exc))
        raise LLMUnavailable(
            f"Endpoint “{endpoint.name}” is unavailable: {exc}",
            detail=str(exc),
            endpoint=endpoint.name,
            attempts=attempt,
            call_id=call.pk,
        ) from None


def _result(endpoint, log: CallLog, attempt: int, result: dict, latency_ms: int) -> LLMResult:
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


def _given_up(failure: Failure, endpoint, attempt: int, call) -> Exception:
    """The error a caller gets once no attempt is left, in words a person can act on."""
    if failure.configuration:
        error_class = LLMConfigurationError
        message = f"Endpoint “{endpoint.name}” cannot be used: {failure.detail}"
    elif failure.retryable:
        error_class = LLMUnavailable
        message = (
            f"Endpoint “{endpoint.name}” is unavailable after {attempt} "
            f"attempt{'s' if attempt != 1 else ''}: {failure.detail}"
        )
    else:
        error_class = LLMRequestError
        message = f"Endpoint “{endpoint.name}” refused the request: {failure.detail}"
    return error_class(
        message,
        detail=failure.detail,
        endpoint=endpoint.name,
        status=failure.status,
        attempts=attempt,
        call_id=call.pk,
    )


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


def _next_delay(failure: Failure, policy: RetryPolicy, attempt: int, waited: float):
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
    return json.loads(json.dumps(value, default=json_default))
