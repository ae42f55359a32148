"""How one chat completion goes over the wire: the endpoint's cached openai client (built
once per configuration and process, on the guarded transport), the request sent through it,
its answer read as a dict, and every failure classified as retryable or not (Failure).
apps.llm.client holds the retries, slots and call log around it."""

import functools
import json
import os
import ssl
import threading
import time
from dataclasses import dataclass

import httpx2
import openai
from openai._models import FinalRequestOptions

from apps.core.safeinput import UnsafeInput, json_check, storable
from apps.llm.exceptions import (
    LLMConfigurationError,
)
from apps.llm.models import (
    ModelEndpoint,
    api_key_env_allowed,
    api_key_host_refusal,
)
from apps.llm.network import allowed_networks, base_url_refusal, guarded_http_client
from apps.llm.redaction import redact

ERROR_TEXT_LIMIT = 2000


@dataclass
class Failure:
    detail: str
    retryable: bool
    status: int | None = None
    retry_after: float | None = None
    body: object = None
    configuration: bool = False  # refused before any request: not the endpoint's answer


@dataclass(frozen=True)
class _EndpointClient:
    """The ``openai.OpenAI`` client of one endpoint configuration, and the parts of its chat
    completion request that every call shares (built once, by the SDK itself)."""

    openai: openai.OpenAI
    url: httpx2.URL
    headers: httpx2.Headers  # auth, the SDK's own headers, httpx's defaults, Host
    extensions: dict  # the timeout


_ENDPOINT_CLIENTS_LOCK = threading.Lock()


def endpoint_client(base_url: str, api_key: str, timeout: float, networks: tuple, served: str = ""):
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


def request_content(kwargs: dict) -> bytes:
    """The request's JSON body (``extra_body`` merged in), written as the SDK writes it."""
    body = {key: value for key, value in kwargs.items() if key != "extra_body"}
    body.update(kwargs.get("extra_body") or {})
    return json.dumps(
        body, default=json_default, ensure_ascii=False, separators=(",", ":"), allow_nan=False
    ).encode()


def create_completion(client: _EndpointClient, content: bytes):
    """POST one chat completion through the SDK client's own httpx client (its pool, its
    address guard, its timeout) and return the parsed JSON body, or the text of a body that
    is not JSON.

    ``client.openai.post`` did the same for as much CPU again as all the rest of
    ``llm_chat`` (``bench/llm_call.py``: 1.55 → 0.78 ms a call): it rebuilt the request
    options, headers and URL on every call, and built pydantic models of the answer that
    ``read_completion`` took apart again. Failures become the SDK's own exceptions, as
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


def classify(exc: openai.OpenAIError, endpoint: ModelEndpoint, timeout: float) -> Failure:
    if isinstance(exc, openai.APITimeoutError):
        return Failure(
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
        return Failure(f"Could not connect to {endpoint.base_url}{reason}.", retryable=True)
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        return Failure(
            f"HTTP {status}: {_error_text(exc.body, exc.response)}",
            retryable=status == 429 or status >= 500,
            status=status,
            retry_after=_retry_after(exc.response.headers),
            body=exc.body,
        )
    if isinstance(exc, openai.APIResponseValidationError):
        return Failure(
            "The endpoint answered with something that is not a chat completion.",
            retryable=True,
            status=exc.status_code,
            body=exc.body,
        )
    return Failure(f"{type(exc).__name__}: {exc}", retryable=False)


def read_completion(completion, endpoint: ModelEndpoint, latency_ms: int):
    """(fields, None) for a usable completion (the parsed JSON body), (None, failure) for
    anything else: a body that is not JSON or not shaped like a chat completion is the
    endpoint's fault, retried like a 5xx."""
    if not isinstance(completion, dict):
        return None, _not_a_completion(completion)
    choices = completion.get("choices")
    if not choices:
        return None, Failure(
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


def _not_a_completion(body) -> Failure:
    return Failure(
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
    return endpoint_client(
        endpoint.base_url,
        key or "not-needed",
        endpoint.request_timeout_s,
        allowed_networks(),
        endpoint.served_address,
    ).openai


def describe_openai_error(exc: Exception, endpoint: ModelEndpoint) -> tuple[str, bool]:
    """``(what went wrong, whether retrying may help)`` for an error of the openai client."""
    if isinstance(exc, openai.OpenAIError):
        failure = classify(exc, endpoint, endpoint.request_timeout_s)
        return failure.detail, failure.retryable
    return f"{type(exc).__name__}: {exc}", False


def json_default(value):
    if hasattr(value, "model_dump"):
        return value.model_dump(exclude_none=True)
    return str(value)
