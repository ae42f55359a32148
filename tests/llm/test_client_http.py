"""llm_chat's HTTP exchange: it posts through the openai client's own httpx client with a
request built once per endpoint, and reads the JSON itself. What goes on the wire, and the
exceptions a failure becomes, are the same as the SDK's ``chat.completions.create`` — each
test here sends the same thing both ways to the loopback server and compares."""

import json
import socket

import httpx2
import openai
import pytest

import apps.llm.client as client_module
import apps.llm.transport as transport_module
from apps.llm.client import RetryPolicy, llm_chat
from apps.llm.exceptions import LLMRequestError, LLMUnavailable
from apps.llm.models import LLMCall, LLMCallStatus
from apps.llm.services import endpoint_create
from apps.llm.transport import endpoint_openai_client
from tests.llm_server import Reply

pytestmark = pytest.mark.django_db

HELLO = [{"role": "user", "content": "Say hi."}]
ONCE = RetryPolicy(max_attempts=1, slot_wait_s=10)


def chat(endpoint, **kwargs):
    kwargs.setdefault("messages", HELLO)
    kwargs.setdefault("purpose", "test.chat")
    return llm_chat(endpoint=endpoint, **kwargs)


def sdk_create(endpoint):
    """The same request through the SDK's own method, for comparison."""
    return endpoint_openai_client(endpoint).chat.completions.create(
        model=endpoint.model,
        messages=HELLO,
        temperature=endpoint.temperature,
        max_tokens=endpoint.max_tokens,
    )


@pytest.fixture
def classified(monkeypatch):
    """The openai exceptions llm_chat's attempts ended with, in order."""
    seen = []
    classify = transport_module.classify

    def spy(exc, endpoint, timeout):
        seen.append(exc)
        return classify(exc, endpoint, timeout)

    monkeypatch.setattr(client_module, "classify", spy)  # where llm_chat looks it up
    return seen


def test_the_request_is_the_one_the_sdk_sends(endpoint, llm_server):
    llm_server.script(Reply.text("a"), Reply.text("b"))
    chat(endpoint)
    sdk_create(endpoint)
    ours, theirs = llm_server.chat_requests()
    assert ours.method == theirs.method == "POST"
    assert ours.path == theirs.path == "/v1/chat/completions"
    assert ours.headers == theirs.headers  # auth, user agent, x-stainless-*, timeout, length
    assert ours.body == theirs.body


@pytest.mark.parametrize(
    "reply",
    [
        Reply.rate_limited(2),
        Reply.error(500, "upstream exploded"),
        Reply.error(404, "no such model"),
        Reply(status=302, headers={"Location": "http://127.0.0.1:9/elsewhere"}, body=b""),
        Reply(status=503, body=b"<html>Service Unavailable</html>"),
    ],
    ids=["429-retry-after", "500", "404", "302-not-followed", "503-html"],
)
def test_an_error_status_is_the_sdk_s_exception(endpoint, llm_server, classified, reply):
    llm_server.script(reply, reply)
    with pytest.raises(openai.APIStatusError) as sdk:
        sdk_create(endpoint)
    retryable = reply.status == 429 or reply.status >= 500
    with pytest.raises(LLMUnavailable if retryable else LLMRequestError):
        chat(endpoint, retry=ONCE)
    [ours] = classified
    assert type(ours) is type(sdk.value)
    assert (ours.status_code, ours.body, str(ours)) == (
        sdk.value.status_code,
        sdk.value.body,
        str(sdk.value),
    )
    assert ours.response.headers.get("retry-after") == sdk.value.response.headers.get("retry-after")
    assert len(llm_server.chat_requests()) == 2  # the redirect was not followed
    assert LLMCall.objects.get().http_status == reply.status


def test_429_retry_after_sets_the_wait(endpoint, llm_server, classified):
    llm_server.script(Reply.rate_limited(0.5), Reply.text("ok"))
    assert chat(endpoint).content == "ok"
    assert isinstance(classified[0], openai.RateLimitError)
    first, second = llm_server.chat_requests()
    assert second.received_at - first.received_at >= 0.5


def test_a_timeout_is_the_sdk_s_timeout_error(endpoint, llm_server, classified):
    llm_server.script(Reply.hanging(), Reply.hanging())
    with pytest.raises(openai.APITimeoutError) as sdk:
        sdk_create(endpoint)
    with pytest.raises(LLMUnavailable) as raised:
        chat(endpoint, retry=ONCE)
    [ours] = classified
    assert type(ours) is type(sdk.value)
    assert type(ours.__cause__) is type(sdk.value.__cause__) is httpx2.ReadTimeout
    assert raised.value.detail == "No answer within 0.5 s (the endpoint's request timeout)."


def test_a_refused_connection_is_the_sdk_s_connection_error(project, api_key, classified):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again before the client connects
    endpoint = endpoint_create(
        project=project, name="nowhere", base_url=f"http://127.0.0.1:{port}/v1", model="m"
    )
    with pytest.raises(openai.APIConnectionError) as sdk:
        sdk_create(endpoint)
    with pytest.raises(LLMUnavailable) as raised:
        chat(endpoint, retry=ONCE)
    [ours] = classified
    assert type(ours) is type(sdk.value) is openai.APIConnectionError
    assert type(ours.__cause__) is type(sdk.value.__cause__) is httpx2.ConnectError
    assert raised.value.detail.startswith(
        f"Could not connect to http://127.0.0.1:{port}/v1 (ConnectError: "
    )


NOT_A_COMPLETION = "The endpoint answered HTTP 200 with a body that is not a chat completion."
NO_CHOICES = "The endpoint answered without any choices."


def completion(message: dict | None = None, **fields) -> dict:
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "loop-large",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
    }
    body.update(fields)
    return body


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (Reply.garbage(), NOT_A_COMPLETION),
        (Reply(body=b"<html>hi</html>", headers={"Content-Type": "text/html"}), NOT_A_COMPLETION),
        (
            Reply(body='{"choices": [', headers={"Content-Type": "application/json"}),
            NOT_A_COMPLETION,
        ),
        (Reply(body=["not", "an", "object"]), NOT_A_COMPLETION),
        (Reply(body="null", headers={"Content-Type": "application/json"}), NOT_A_COMPLETION),
        (Reply(body={"object": "chat.completion"}), NO_CHOICES),
        (Reply(body=completion(choices=[])), NO_CHOICES),
        (Reply(body=completion(choices="all of them")), NOT_A_COMPLETION),
        (Reply(body=completion(choices=[7])), NOT_A_COMPLETION),
        (Reply(body=completion(None)), NOT_A_COMPLETION),
        (Reply(body=completion({"role": "assistant", "content": 42})), NOT_A_COMPLETION),
        (
            Reply(body=completion({"role": "assistant", "content": None, "tool_calls": "x"})),
            NOT_A_COMPLETION,
        ),
        (
            Reply(
                body=completion(
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [{"id": "c1", "function": {"arguments": "{}"}}],
                    }
                )
            ),
            NOT_A_COMPLETION,
        ),
        (
            Reply(body=completion({"role": "assistant", "content": None, "tool_calls": [None]})),
            NOT_A_COMPLETION,
        ),
    ],
    ids=[
        "html",
        "html-declared",
        "cut-off-json",
        "json-list",
        "json-null",
        "no-choices",
        "empty-choices",
        "choices-not-a-list",
        "choice-not-an-object",
        "no-message",
        "content-not-text",
        "tool-calls-not-a-list",
        "tool-call-without-name",
        "tool-call-not-an-object",
    ],
)
def test_a_200_that_is_not_a_usable_completion_is_retried(endpoint, llm_server, reply, error):
    llm_server.script(reply, Reply.text("clean"))
    assert chat(endpoint).content == "clean"
    first, second = LLMCall.objects.order_by("id")
    assert (first.status, first.http_status, first.error) == (LLMCallStatus.RETRYING, 200, error)
    assert second.status == LLMCallStatus.OK


def test_a_completion_is_read_leniently_where_it_can_be(endpoint, llm_server):
    """Fields the client does not need may be missing or odd: no usage, no id, a custom
    (non-function) tool call, JSON without a JSON content type."""
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "custom", "custom": {"name": "grep", "input": "x"}}],
    }
    body = completion(message, usage={"prompt_tokens": 7, "completion_tokens": "many"})
    del body["id"]
    llm_server.script(Reply(body=json.dumps(body)))  # sent as text/plain
    result = chat(endpoint)
    assert result.tool_calls == [{"id": "c1", "name": "grep", "arguments": "x"}]
    assert (result.tokens_in, result.tokens_out) == (7, 0)
    assert (result.finish_reason, result.model) == ("stop", "loop-large")
    assert LLMCall.objects.get().response["id"] is None
