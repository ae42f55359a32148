"""The LLM client against a scripted OpenAI-compatible server, through the real openai SDK."""

import json
import socket
from decimal import Decimal

import pytest
from django.db import transaction

from apps.llm.client import RetryPolicy, llm_chat, llm_json
from apps.llm.exceptions import (
    LLMConfigurationError,
    LLMOutputError,
    LLMRequestError,
    LLMUnavailable,
)
from apps.llm.models import LLMCall, LLMCallStatus
from apps.llm.services import endpoint_create, endpoint_update
from tests.llm.conftest import TEST_KEY
from tests.llm_server import Reply

pytestmark = pytest.mark.django_db

HELLO = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hi."}]


def chat(endpoint, **kwargs):
    kwargs.setdefault("messages", HELLO)
    kwargs.setdefault("purpose", "test.chat")
    return llm_chat(endpoint=endpoint, **kwargs)


def test_success_returns_answer_tokens_cost_and_logs_one_exact_row(endpoint, llm_server, job):
    llm_server.script(Reply.text("Hi there.", usage=(1000, 200)))
    result = chat(endpoint, job=job, purpose="synthesis.draft")

    assert result.content == "Hi there."
    assert result.tool_calls == []
    assert result.finish_reason == "stop"
    assert (result.tokens_in, result.tokens_out) == (1000, 200)
    # 1000 * 2.50 / 1e6 + 200 * 10 / 1e6
    assert result.cost == Decimal("0.004500")
    assert result.model == "loop-large"
    assert result.attempts == 1

    [request] = llm_server.chat_requests()
    assert request.headers["authorization"] == f"Bearer {TEST_KEY}"
    assert request.body == {
        "model": "loop-large",
        "messages": HELLO,
        "temperature": 0.2,
        "max_tokens": 256,
    }

    call = LLMCall.objects.get()
    assert call.pk == result.call_id
    assert call.project_id == endpoint.project_id
    assert call.endpoint_id == endpoint.pk
    assert call.endpoint_name == "loopback"
    assert call.model == "loop-large"
    assert call.job_id == job.pk
    assert call.purpose == "synthesis.draft"
    assert call.attempt == 1
    assert call.status == LLMCallStatus.OK
    assert call.request_messages == HELLO
    assert call.request_params == {
        "model": "loop-large",
        "temperature": 0.2,
        "max_tokens": 256,
        "timeout_s": 0.5,
        "tools": [],
        "tool_choice": None,
        "response_format": None,
    }
    assert call.response["content"] == "Hi there."
    assert call.response["finish_reason"] == "stop"
    assert call.response["tool_calls"] == []
    assert (call.tokens_in, call.tokens_out, call.cost) == (1000, 200, Decimal("0.004500"))
    assert call.latency_ms == result.latency_ms
    assert call.error == ""
    assert call.http_status is None


def test_tool_calls_and_overrides(endpoint, llm_server):
    tools = [
        {
            "type": "function",
            "function": {
                "name": "send_email",
                "description": "Send an email.",
                "parameters": {"type": "object", "properties": {"to": {"type": "string"}}},
            },
        }
    ]
    llm_server.script(
        Reply.tools(("send_email", {"to": "bo@acme.test"}), ("send_email", '{"to": "x"}'))
    )
    result = chat(endpoint, tools=tools, tool_choice="auto", temperature=0.0, max_tokens=50)

    assert result.finish_reason == "tool_calls"
    assert [(c["name"], json.loads(c["arguments"])) for c in result.tool_calls] == [
        ("send_email", {"to": "bo@acme.test"}),
        ("send_email", {"to": "x"}),
    ]
    assert result.as_message() == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": c["arguments"]},
            }
            for c in result.tool_calls
        ],
    }
    body = llm_server.chat_requests()[0].body
    assert body["tools"] == tools
    assert body["tool_choice"] == "auto"
    assert (body["temperature"], body["max_tokens"]) == (0.0, 50)
    assert LLMCall.objects.get().request_params["tools"] == ["send_email"]


def test_429_with_retry_after_waits_the_header_then_succeeds(endpoint, llm_server):
    llm_server.script(Reply.rate_limited(1), Reply.text("ok", usage=(5, 1)))
    result = chat(endpoint)

    assert result.content == "ok"
    assert result.attempts == 2
    first, second = llm_server.chat_requests()
    assert second.received_at - first.received_at >= 1.0
    assert first.body == second.body
    calls = list(LLMCall.objects.order_by("id"))
    assert [(c.attempt, c.status, c.http_status) for c in calls] == [
        (1, LLMCallStatus.RETRYING, 429),
        (2, LLMCallStatus.OK, None),
    ]
    assert calls[0].error == "HTTP 429: Rate limit reached."
    assert calls[0].group == calls[1].group
    # The SDK unwraps {"error": {...}}; the log keeps a redacted text excerpt of it.
    assert calls[0].response == {
        "error_body": '{"message": "Rate limit reached.", "type": "loopback_error", "code": 429}'
    }


def test_retry_after_ms_is_preferred(endpoint, llm_server):
    llm_server.script(
        Reply.error(429, "busy", headers={"retry-after-ms": "300", "Retry-After": "4"}),
        Reply.text("ok"),
    )
    assert chat(endpoint).content == "ok"
    first, second = llm_server.chat_requests()
    # 0.3 s, not 4 s (the test would take 4 s otherwise, and the cap is 5 s).
    assert 0.3 <= second.received_at - first.received_at < 4


def test_retry_after_beyond_the_wait_budget_gives_up_at_once(endpoint, llm_server, settings):
    settings.LLM_MAX_TOTAL_WAIT_S = 1
    llm_server.script(Reply.rate_limited(3), Reply.text("never sent"))
    with pytest.raises(LLMUnavailable) as raised:
        chat(endpoint)
    assert raised.value.status == 429
    assert raised.value.attempts == 1
    assert len(llm_server.chat_requests()) == 1
    assert LLMCall.objects.get().status == LLMCallStatus.ERROR


def test_500_then_success(endpoint, llm_server):
    llm_server.script(Reply.error(500, "upstream exploded"), Reply.text("fine"))
    result = chat(endpoint)
    assert (result.content, result.attempts) == ("fine", 2)
    assert len(llm_server.chat_requests()) == 2
    assert list(LLMCall.objects.order_by("id").values_list("status", "error")) == [
        (LLMCallStatus.RETRYING, "HTTP 500: upstream exploded"),
        (LLMCallStatus.OK, ""),
    ]


def test_5xx_every_time_gives_llm_unavailable_after_max_attempts(endpoint, llm_server):
    llm_server.script(*[Reply.error(503, "overloaded")] * 3, Reply.text("too late"))
    with pytest.raises(LLMUnavailable) as raised:
        chat(endpoint)
    assert raised.value.message == (
        "Endpoint “loopback” is unavailable after 3 attempts: HTTP 503: overloaded"
    )
    assert raised.value.status == 503
    assert len(llm_server.chat_requests()) == 3
    assert llm_server.pending == 1
    assert list(LLMCall.objects.order_by("id").values_list("attempt", "status")) == [
        (1, LLMCallStatus.RETRYING),
        (2, LLMCallStatus.RETRYING),
        (3, LLMCallStatus.ERROR),
    ]
    assert raised.value.call_id == LLMCall.objects.order_by("id").last().pk


def test_400_is_not_retried_and_says_why(endpoint, llm_server):
    llm_server.script(Reply.error(400, "max_tokens is too large: 99999"), Reply.text("unused"))
    with pytest.raises(LLMRequestError) as raised:
        chat(endpoint)
    assert raised.value.status == 400
    assert raised.value.detail == "HTTP 400: max_tokens is too large: 99999"
    assert raised.value.message == (
        "Endpoint “loopback” refused the request: HTTP 400: max_tokens is too large: 99999"
    )
    assert len(llm_server.chat_requests()) == 1
    call = LLMCall.objects.get()
    assert (call.status, call.http_status) == (LLMCallStatus.ERROR, 400)


def test_wrong_key_is_a_401_request_error(endpoint, llm_server, monkeypatch):
    monkeypatch.setenv("COWORKENV_TEST_LLM_API_KEY", "sk-wrong")
    with pytest.raises(LLMRequestError) as raised:
        chat(endpoint)
    assert raised.value.detail == "HTTP 401: Incorrect API key provided."
    assert len(llm_server.chat_requests()) == 1


def test_hang_past_the_timeout_is_retried_then_unavailable(endpoint, llm_server):
    llm_server.script(Reply.hanging(), Reply.hanging(), Reply.hanging())
    with pytest.raises(LLMUnavailable) as raised:
        chat(endpoint)
    assert raised.value.detail == "No answer within 0.5 s (the endpoint's request timeout)."
    assert raised.value.status is None
    assert len(llm_server.chat_requests()) == 3
    assert list(LLMCall.objects.order_by("id").values_list("status", flat=True)) == [
        LLMCallStatus.RETRYING,
        LLMCallStatus.RETRYING,
        LLMCallStatus.ERROR,
    ]


def test_hang_then_answer_succeeds(endpoint, llm_server):
    llm_server.script(Reply.hanging(), Reply.text("late but fine"))
    assert chat(endpoint).content == "late but fine"


def test_garbage_body_is_retried(endpoint, llm_server):
    llm_server.script(Reply.garbage(), Reply.text("clean"))
    assert chat(endpoint).content == "clean"
    first = LLMCall.objects.order_by("id").first()
    assert first.status == LLMCallStatus.RETRYING
    assert (
        first.error == "The endpoint answered HTTP 200 with a body that is not a chat completion."
    )


def test_connection_refused_is_retried_then_unavailable(project, api_key):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again before the client connects
    endpoint = endpoint_create(
        project=project, name="nowhere", base_url=f"http://127.0.0.1:{port}/v1", model="m"
    )
    with pytest.raises(LLMUnavailable) as raised:
        chat(endpoint)
    assert raised.value.detail.startswith(f"Could not connect to http://127.0.0.1:{port}/v1")
    assert raised.value.attempts == 3
    assert LLMCall.objects.count() == 3


def test_unset_key_variable_fails_before_any_request(endpoint, llm_server, monkeypatch):
    monkeypatch.delenv("COWORKENV_TEST_LLM_API_KEY")
    with pytest.raises(LLMConfigurationError) as raised:
        chat(endpoint)
    assert raised.value.detail == (
        "Environment variable COWORKENV_TEST_LLM_API_KEY is not set on the server."
    )
    assert llm_server.requests == []
    assert LLMCall.objects.get().error == raised.value.detail


def test_a_non_api_key_variable_is_never_sent(endpoint, llm_server, monkeypatch):
    # A row saved around the form's rule (older data, a shell) still cannot send the server's
    # own settings to its base URL as the bearer token.
    monkeypatch.setenv("SECRET_KEY", "the-server-secret")
    type(endpoint).objects.filter(pk=endpoint.pk).update(api_key_env="SECRET_KEY")
    endpoint.refresh_from_db()
    with pytest.raises(LLMConfigurationError) as raised:
        chat(endpoint)
    assert raised.value.detail == (
        "SECRET_KEY is not an API key variable (its name must end in API_KEY)."
    )
    assert llm_server.requests == []
    assert LLMCall.objects.get().error == raised.value.detail


def test_keyless_endpoint_sends_a_placeholder_key(project, llm_server):
    llm_server.api_key = None
    endpoint = endpoint_create(
        project=project, name="local", base_url=llm_server.base_url, model="m"
    )
    llm_server.script(Reply.text("ok"))
    assert chat(endpoint).content == "ok"
    assert llm_server.chat_requests()[0].headers["authorization"] == "Bearer not-needed"


def test_retry_policy_can_be_given_per_call(endpoint, llm_server):
    llm_server.script(Reply.error(502, "bad gateway"), Reply.text("unused"))
    with pytest.raises(LLMUnavailable):
        chat(endpoint, retry=RetryPolicy.from_settings(max_attempts=1))
    assert len(llm_server.chat_requests()) == 1


def test_refuses_to_run_inside_a_transaction(endpoint, llm_server):
    with pytest.raises(RuntimeError, match="inside a database transaction"), transaction.atomic():
        chat(endpoint)
    assert llm_server.requests == []


# --- structured output ------------------------------------------------------------------

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def test_response_format_is_sent_when_the_endpoint_supports_it(endpoint, llm_server):
    endpoint = endpoint_update(endpoint=endpoint, supports_json_schema=True)
    llm_server.script(Reply.json({"name": "Ada"}))
    out = llm_json(
        endpoint=endpoint, messages=HELLO, purpose="t", schema=SCHEMA, schema_name="env spec"
    )
    assert out.data == {"name": "Ada"}
    body = llm_server.chat_requests()[0].body
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "env_spec", "schema": SCHEMA, "strict": False},
    }
    assert body["messages"] == HELLO  # no instruction added: the server enforces the schema
    assert LLMCall.objects.get().request_params["response_format"] == "json_schema"


def test_without_support_json_is_asked_for_in_the_prompt(endpoint, llm_server):
    llm_server.script(Reply.json({"name": "Ada"}))
    out = llm_json(endpoint=endpoint, messages=HELLO, purpose="t", schema=SCHEMA)
    assert out.data == {"name": "Ada"}
    body = llm_server.chat_requests()[0].body
    assert "response_format" not in body
    system = body["messages"][0]
    assert system["role"] == "system"
    assert system["content"].startswith("Be brief.\n\nAnswer with one JSON object only")
    assert json.dumps(SCHEMA) in system["content"]
    assert body["messages"][1:] == HELLO[1:]
    assert LLMCall.objects.get().request_params["response_format"] == "prompt"


def test_prompt_instruction_without_a_system_message(endpoint, llm_server):
    llm_server.script(Reply.json({"name": "Ada"}))
    llm_json(
        endpoint=endpoint,
        messages=[{"role": "user", "content": "Name?"}],
        purpose="t",
        schema=SCHEMA,
        describe_schema=False,
    )
    messages = llm_server.chat_requests()[0].body["messages"]
    assert messages[0] == {
        "role": "system",
        "content": "Answer with one JSON object only: no prose before or after it and no "
        "code fences.",
    }
    assert messages[1] == {"role": "user", "content": "Name?"}


@pytest.mark.parametrize(
    "text",
    [
        '```json\n{"name": "Ada", "note": "uses {braces}"}\n```',
        'Sure! Here is the object:\n{"name": "Ada", "note": "uses {braces}"}\nAnything else?',
        'Thinking... {not json} then ```\n{"name": "Ada", "note": "uses {braces}"}\n```',
    ],
)
def test_llm_json_tolerates_fences_and_prose(endpoint, llm_server, text):
    llm_server.script(Reply.text(text, usage=(10, 20)))
    out = llm_json(endpoint=endpoint, messages=HELLO, purpose="t")
    assert out.data == {"name": "Ada", "note": "uses {braces}"}
    assert (out.tokens_in, out.tokens_out) == (10, 20)
    assert out.result.call_id == LLMCall.objects.get().pk


def test_llm_json_non_json_text_raises_output_error_with_excerpt(endpoint, llm_server):
    llm_server.script(Reply.text("I'm sorry, I cannot help with that."))
    with pytest.raises(LLMOutputError) as raised:
        llm_json(endpoint=endpoint, messages=HELLO, purpose="t")
    error = raised.value
    assert error.detail == "The answer contains no JSON object."
    assert error.excerpt == "I'm sorry, I cannot help with that."
    assert error.truncated is False
    assert error.result.content == "I'm sorry, I cannot help with that."
    assert error.call_id == LLMCall.objects.get().pk
    # The request itself succeeded: the log says ok, the caller decides what to do.
    assert LLMCall.objects.get().status == LLMCallStatus.OK


def test_llm_json_truncated_json_raises_output_error(endpoint, llm_server):
    llm_server.script(Reply.truncated_json({"name": "Ada", "records": list(range(40))}))
    with pytest.raises(LLMOutputError) as raised:
        llm_json(endpoint=endpoint, messages=HELLO, purpose="t")
    error = raised.value
    assert error.truncated is True
    assert error.detail.startswith(
        "The answer was cut off at the token limit (finish_reason=length)."
    )
    assert "truncated" in error.detail
    assert error.excerpt == error.result.content.strip()


def test_llm_json_reask_sends_the_reason_back(endpoint, llm_server):
    llm_server.script(Reply.text("no json here"), Reply.json({"name": "Ada"}))
    out = llm_json(endpoint=endpoint, messages=HELLO, purpose="t", reask=1)
    assert out.data == {"name": "Ada"}
    assert len(out.results) == 2
    second = llm_server.chat_requests()[1].body["messages"]
    assert second[-2] == {"role": "assistant", "content": "no json here"}
    assert second[-1]["role"] == "user"
    assert second[-1]["content"].startswith("The answer contains no JSON object. Reply again")


def test_llm_json_reask_exhausted_raises(endpoint, llm_server):
    llm_server.script(Reply.text("nope"), Reply.text("still nope"))
    with pytest.raises(LLMOutputError) as raised:
        llm_json(endpoint=endpoint, messages=HELLO, purpose="t", reask=1)
    assert raised.value.result.content == "still nope"
    assert len(llm_server.chat_requests()) == 2


def test_key_is_only_sent_to_the_hosts_the_operator_listed(endpoint, llm_server, settings):
    settings.LLM_KEY_HOSTS = {endpoint.api_key_env: ["api.example.com"]}
    with pytest.raises(LLMConfigurationError) as error:
        chat(endpoint)
    assert error.value.detail == (
        f"{endpoint.api_key_env} may only be sent to https://api.example.com:443, "
        f"not to http://127.0.0.1:{llm_server.port}."
    )
    assert llm_server.chat_requests() == []

    # The same host on another scheme or port is another origin: refused.
    settings.LLM_KEY_HOSTS = {endpoint.api_key_env: ["127.0.0.1", "http://127.0.0.1:1"]}
    with pytest.raises(LLMConfigurationError, match="may only be sent to"):
        chat(endpoint)
    assert llm_server.chat_requests() == []

    settings.LLM_KEY_HOSTS = {"OTHER_API_KEY": ["127.0.0.1"]}
    with pytest.raises(LLMConfigurationError, match="not listed in the server's LLM_KEY_HOSTS"):
        chat(endpoint)
    assert llm_server.chat_requests() == []

    settings.LLM_KEY_HOSTS = {endpoint.api_key_env: [f"http://127.0.0.1:{llm_server.port}"]}
    llm_server.script(Reply.text("Hi."))
    assert chat(endpoint).content == "Hi."


def test_endpoint_pointing_a_listed_key_elsewhere_is_refused_on_save(endpoint, settings):
    from django.core.exceptions import ValidationError

    settings.LLM_KEY_HOSTS = {endpoint.api_key_env: ["api.example.com"]}
    endpoint.base_url = "https://attacker.example.net/v1"
    with pytest.raises(ValidationError) as error:
        endpoint.full_clean()
    assert error.value.message_dict["api_key_env"] == [
        f"{endpoint.api_key_env} may only be sent to https://api.example.com:443, "
        "not to https://attacker.example.net:443."
    ]


def test_llm_key_hosts_setting_is_parsed_strictly(monkeypatch):
    from django.core.exceptions import ImproperlyConfigured

    from coworkenv_web.env import env_key_hosts

    def key_hosts(value: str | None, default: str = ""):
        if value is None:
            monkeypatch.delenv("LLM_KEY_HOSTS", raising=False)
        else:
            monkeypatch.setenv("LLM_KEY_HOSTS", value)
        return env_key_hosts("LLM_KEY_HOSTS", default)

    # A bare host (the older form) means https on port 443; an origin names scheme and port.
    assert key_hosts(
        "A_API_KEY=api.a.com|EU.a.com:8443, B_API_KEY=http://b.lan:8000|https://[::1]"
    ) == {
        "A_API_KEY": ["https://api.a.com:443", "https://eu.a.com:8443"],
        "B_API_KEY": ["http://b.lan:8000", "https://[::1]:443"],
    }
    assert key_hosts(None) == {}
    assert key_hosts(None, default="any") is None
    assert key_hosts(" ANY ") is None
    with pytest.raises(ImproperlyConfigured) as refused:
        key_hosts("A_API_KEY")
    assert str(refused.value) == (
        "LLM_KEY_HOSTS entries look like NAME=https://host|http://host:port, not 'A_API_KEY'."
    )
    with pytest.raises(ImproperlyConfigured) as refused:
        key_hosts("A_API_KEY=ftp://files.a.com")
    assert str(refused.value) == (
        "LLM_KEY_HOSTS entry 'A_API_KEY=ftp://files.a.com': 'ftp://files.a.com' is not an "
        "http:// or https:// origin."
    )
    with pytest.raises(ImproperlyConfigured):
        key_hosts("A_API_KEY=https://api.a.com:notaport")
