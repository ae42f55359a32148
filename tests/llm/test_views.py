import pytest
from django.urls import reverse

from apps.core.models import Job, JobStatus
from apps.llm.models import EndpointSlot, LLMCall, ModelEndpoint
from apps.llm.services import endpoint_create
from tests.conftest import HTMX_HEADERS
from tests.llm.conftest import TEST_KEY_ENV
from tests.llm_server import Reply

pytestmark = pytest.mark.django_db

FORM = {
    "name": "gpt-mini",
    "base_url": "https://api.openai.com/v1",
    "model": "gpt-4.1-mini",
    "api_key_env": "OPENAI_API_KEY",
    "temperature": "0.3",
    "max_tokens": "2048",
    "request_timeout_s": "60",
    "max_concurrency": "3",
    "price_input_per_million": "0.40",
    "price_output_per_million": "1.60",
    "supports_json_schema": "on",
}


# --- list -----------------------------------------------------------------------------


def test_list_shows_endpoints_with_totals(client_for, viewer, project, endpoint, llm_server):
    LLMCall.objects.create(
        project=project,
        endpoint=endpoint,
        endpoint_name="loopback",
        model="loop-large",
        purpose="t",
        status="ok",
        tokens_in=1200,
        tokens_out=300,
        cost="0.006",
    )
    response = client_for(viewer).get(reverse("llm:endpoint_list", args=[project.slug]))
    assert response.status_code == 200
    [row] = response.context["endpoints"]
    assert (row.call_count, row.tokens_in_total, row.tokens_out_total) == (1, 1200, 300)
    html = response.content.decode()
    assert "loopback" in html
    assert "1,200 / 300" in html
    assert "$0.0060" in html
    assert "Add endpoint" not in html  # a viewer cannot add


def test_list_empty_state_and_author_button(client_for, author, project):
    html = client_for(author).get(reverse("llm:endpoint_list", args=[project.slug])).content
    assert b"No model endpoints yet." in html
    assert b"Add endpoint" in html


def test_list_refusals(client, client_for, outsider, project):
    url = reverse("llm:endpoint_list", args=[project.slug])
    assert client.get(url).status_code == 302
    assert client_for(outsider).get(url).status_code == 404
    assert client_for(outsider).post(url).status_code == 405


def test_nav_has_the_models_entry(client_for, viewer, project):
    html = client_for(viewer).get(reverse("llm:endpoint_list", args=[project.slug])).content
    url = reverse("llm:endpoint_list", args=[project.slug])
    assert f'<a href="{url}" aria-current="page">Endpoints</a>'.encode() in html


# --- create ---------------------------------------------------------------------------


def test_create(client_for, author, project):
    response = client_for(author).post(reverse("llm:endpoint_create", args=[project.slug]), FORM)
    endpoint = ModelEndpoint.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("llm:endpoint_detail", args=[endpoint.pk])
    assert endpoint.project == project
    assert endpoint.created_by == author
    assert (endpoint.name, endpoint.model, endpoint.api_key_env) == (
        "gpt-mini",
        "gpt-4.1-mini",
        "OPENAI_API_KEY",
    )
    assert (endpoint.max_concurrency, endpoint.supports_json_schema) == (3, True)
    assert str(endpoint.price_output_per_million) == "1.6000"
    assert EndpointSlot.objects.filter(endpoint=endpoint).count() == 3


def test_create_get_renders_the_form(client_for, author, project):
    response = client_for(author).get(reverse("llm:endpoint_create", args=[project.slug]))
    assert response.status_code == 200
    assert b'name="api_key_env"' in response.content


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("base_url", "ftp://models.example/v1", "Enter an http:// or https:// address"),
        ("api_key_env", "sk-live-1234", "never the key itself"),
        # Any server variable would be sent to the author's base URL as the bearer token.
        ("api_key_env", "SECRET_KEY", "must end in API_KEY"),
        ("api_key_env", "DATABASE_URL", "must end in API_KEY"),
        ("max_concurrency", "0", "greater than or equal to 1"),
        ("temperature", "3", "less than or equal to 2.0"),
    ],
)
def test_create_invalid_rerenders_with_errors(client_for, author, project, field, value, message):
    response = client_for(author).post(
        reverse("llm:endpoint_create", args=[project.slug]), {**FORM, field: value}, **HTMX_HEADERS
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith("<form")
    assert message in html
    assert not ModelEndpoint.objects.exists()


def test_create_duplicate_name_is_a_field_error(client_for, author, project):
    endpoint_create(project=project, name="gpt-mini", base_url="http://vllm:8000/v1", model="m")
    response = client_for(author).post(reverse("llm:endpoint_create", args=[project.slug]), FORM)
    assert response.status_code == 200
    assert response.context["form"].errors["name"] == [
        "An endpoint with this name already exists in this project."
    ]
    assert ModelEndpoint.objects.count() == 1


def test_create_accepts_a_docker_service_host(client_for, author, project):
    client_for(author).post(
        reverse("llm:endpoint_create", args=[project.slug]),
        {**FORM, "base_url": "http://vllm:8000/v1", "api_key_env": ""},
    )
    assert ModelEndpoint.objects.get().base_url == "http://vllm:8000/v1"


def test_create_htmx_success_redirects_client(client_for, author, project):
    response = client_for(author).post(
        reverse("llm:endpoint_create", args=[project.slug]), FORM, **HTMX_HEADERS
    )
    assert response["HX-Redirect"] == reverse(
        "llm:endpoint_detail", args=[ModelEndpoint.objects.get().pk]
    )


def test_create_refusals(client, client_for, viewer, outsider, project):
    url = reverse("llm:endpoint_create", args=[project.slug])
    assert client_for(viewer).post(url, FORM).status_code == 403
    assert client_for(outsider).post(url, FORM).status_code == 404
    client.logout()
    assert client.post(url, FORM).status_code == 302
    assert client_for(viewer).put(url).status_code == 405
    assert not ModelEndpoint.objects.exists()


# --- detail, edit, delete -------------------------------------------------------------


def test_detail_shows_settings_and_call_log(client_for, viewer, endpoint, llm_server, job):
    from apps.llm.client import llm_chat

    llm_server.script(Reply.text("<script>alert(1)</script> hi", usage=(7, 3)))
    llm_chat(
        endpoint=endpoint,
        messages=[{"role": "user", "content": "<b>bold</b> question"}],
        purpose="synthesis.draft",
        job=job,
    )
    response = client_for(viewer).get(reverse("llm:endpoint_detail", args=[endpoint.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    assert TEST_KEY_ENV in html
    assert "synthesis.draft" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; hi" in html
    assert "<script>alert(1)" not in html
    assert "&lt;b&gt;bold&lt;/b&gt; question" in html
    assert f'href="{reverse("core:job_detail", args=[job.pk])}"' in html
    assert response.context["totals"]["tokens_in"] == 7
    assert "Send a test request" not in html  # viewers cannot spend tokens


def test_detail_calls_partial_filters_by_status(client_for, viewer, endpoint, llm_server):
    from apps.llm.client import llm_chat

    llm_server.script(Reply.error(500, "boom"), Reply.text("ok"))
    llm_chat(endpoint=endpoint, messages=[{"role": "user", "content": "x"}], purpose="t")
    response = client_for(viewer).get(
        reverse("llm:endpoint_detail", args=[endpoint.pk]), {"status": "retrying"}, **HTMX_HEADERS
    )
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="llm-calls"')
    assert [c.status for c in response.context["page"].object_list] == ["retrying"]
    assert "HTTP 500: boom" in html


def test_detail_refusals(client, client_for, outsider, endpoint):
    url = reverse("llm:endpoint_detail", args=[endpoint.pk])
    assert client.get(url).status_code == 302
    assert client_for(outsider).get(url).status_code == 404
    assert client_for(outsider).post(url).status_code == 405
    assert (
        client_for(outsider).get(reverse("llm:endpoint_detail", args=[999999])).status_code == 404
    )


def test_edit_changes_settings_and_slots(client_for, author, endpoint):
    response = client_for(author).post(
        reverse("llm:endpoint_edit", args=[endpoint.pk]),
        {**FORM, "name": "renamed", "max_concurrency": "5"},
    )
    assert response.status_code == 302
    endpoint.refresh_from_db()
    assert (endpoint.name, endpoint.max_concurrency) == ("renamed", 5)
    assert EndpointSlot.objects.filter(endpoint=endpoint).count() == 5


def test_edit_get_and_htmx_invalid(client_for, author, endpoint):
    client = client_for(author)
    url = reverse("llm:endpoint_edit", args=[endpoint.pk])
    assert b'value="loopback"' in client.get(url).content
    response = client.post(url, {**FORM, "model": ""}, **HTMX_HEADERS)
    assert response.status_code == 200
    assert response.content.lstrip().startswith(b"<form")
    endpoint.refresh_from_db()
    assert endpoint.model == "loop-large"


def test_edit_refusals(client_for, viewer, outsider, endpoint):
    url = reverse("llm:endpoint_edit", args=[endpoint.pk])
    assert client_for(viewer).post(url, FORM).status_code == 403
    assert client_for(outsider).post(url, FORM).status_code == 404
    assert client_for(viewer).delete(url).status_code == 405
    endpoint.refresh_from_db()
    assert endpoint.name == "loopback"


def test_delete_confirm_then_delete_keeps_the_call_log(client_for, admin, endpoint, project):
    call = LLMCall.objects.create(
        project=project,
        endpoint=endpoint,
        endpoint_name="loopback",
        model="m",
        purpose="t",
        status="ok",
    )
    client = client_for(admin)
    url = reverse("llm:endpoint_delete", args=[endpoint.pk])
    assert b"Delete endpoint" in client.get(url).content
    response = client.post(url)
    assert response.status_code == 302
    assert response["Location"] == reverse("llm:endpoint_list", args=[project.slug])
    assert not ModelEndpoint.objects.exists()
    call.refresh_from_db()
    assert (call.endpoint_id, call.endpoint_name) == (None, "loopback")


def test_delete_htmx_redirects_client(client_for, admin, endpoint, project):
    response = client_for(admin).post(
        reverse("llm:endpoint_delete", args=[endpoint.pk]), **HTMX_HEADERS
    )
    assert response["HX-Redirect"] == reverse("llm:endpoint_list", args=[project.slug])


def test_delete_refusals(client_for, author, outsider, endpoint):
    url = reverse("llm:endpoint_delete", args=[endpoint.pk])
    assert client_for(author).post(url).status_code == 403  # admins delete
    assert client_for(outsider).post(url).status_code == 404
    assert client_for(author).put(url).status_code == 405
    assert ModelEndpoint.objects.filter(pk=endpoint.pk).exists()


# --- test connection ------------------------------------------------------------------


def _run_queued_test(job_id):
    """What the worker does with the queued message (tests/llm/test_worker.py runs a real
    worker); here the task runs in the test process so the page can be checked after it."""
    from apps.llm.tasks import check_endpoint_task

    check_endpoint_task(job_id)
    return Job.objects.get(pk=job_id)


def test_test_connection_queues_a_job_and_the_status_partial_polls_it(
    client_for, author, endpoint, llm_server
):
    llm_server.script(Reply.text("pong", usage=(21, 1), model="loop-large-2025"))
    client = client_for(author)
    response = client.post(reverse("llm:endpoint_test", args=[endpoint.pk]), **HTMX_HEADERS)
    assert response.status_code == 200
    job = Job.objects.get()
    assert (job.kind, job.status, job.params, job.started_by) == (
        "endpoint_test",
        JobStatus.PENDING,
        {"endpoint_id": endpoint.pk},
        author,
    )
    html = response.content.decode()
    assert html.lstrip().startswith('<section class="panel" id="endpoint-test"')
    status_url = reverse("core:job_status", args=[job.pk])
    assert f'hx-get="{status_url}" hx-trigger="every 2s"' in html  # polls while pending
    assert llm_server.requests == []  # the web request sent nothing itself

    job = _run_queued_test(job.pk)
    call = LLMCall.objects.get()
    assert job.status == JobStatus.SUCCEEDED
    assert job.message == (
        f"Connected. It answered “pong” · model loop-large-2025 · {call.latency_ms} ms · "
        f"21 tokens in, 1 out · $0.000062 (call #{call.pk})."
    )
    assert job.result["ok"] is True and job.result["call_id"] == call.pk
    assert (call.purpose, call.status, call.job_id) == ("endpoint.test", "ok", job.pk)
    body = llm_server.chat_requests()[0].body
    assert body["max_tokens"] == 16

    poll = client.get(status_url, **HTMX_HEADERS)
    assert poll["HX-Trigger"] == "job-finished"  # the call log below reloads itself
    assert "hx-trigger" not in poll.content.decode()  # polling stops
    assert "Connected. It answered “pong”" in poll.content.decode()
    # The endpoint page shows the latest test where it was started.
    page = client.get(reverse("llm:endpoint_detail", args=[endpoint.pk])).content.decode()
    assert "Connected. It answered “pong”" in page


def test_test_connection_without_htmx_redirects_to_the_page_with_the_job(
    client_for, author, endpoint, llm_server
):
    response = client_for(author).post(reverse("llm:endpoint_test", args=[endpoint.pk]))
    assert response.status_code == 302
    assert response["Location"] == reverse("llm:endpoint_detail", args=[endpoint.pk])
    job = Job.objects.get()
    page = client_for(author).get(response["Location"]).content.decode()
    assert f'id="job-status-{job.pk}"' in page
    assert 'data-status="pending"' in page


def test_test_connection_caps_the_wait_whatever_the_endpoint_timeout(
    client_for, author, endpoint, llm_server
):
    from apps.llm.services import TEST_TIMEOUT_CAP_S, endpoint_update

    endpoint_update(endpoint=endpoint, request_timeout_s=3600)
    client_for(author).post(reverse("llm:endpoint_test", args=[endpoint.pk]), **HTMX_HEADERS)
    llm_server.script(Reply.text("pong"))
    job = _run_queued_test(Job.objects.get().pk)
    assert job.status == JobStatus.SUCCEEDED
    assert LLMCall.objects.get().request_params["timeout_s"] == TEST_TIMEOUT_CAP_S == 10.0


def test_test_connection_unset_variable_is_shown_exactly(
    client_for, author, endpoint, llm_server, monkeypatch
):
    monkeypatch.delenv(TEST_KEY_ENV)
    client_for(author).post(reverse("llm:endpoint_test", args=[endpoint.pk]))
    job = _run_queued_test(Job.objects.get().pk)
    call = LLMCall.objects.get()
    assert job.status == JobStatus.FAILED
    assert job.message == (
        f"It failed: Environment variable {TEST_KEY_ENV} is not set on the server. "
        f"(call #{call.pk})"
    )
    assert llm_server.requests == []


def test_test_connection_401_is_shown_exactly_and_not_retried(
    client_for, author, endpoint, llm_server, monkeypatch
):
    monkeypatch.setenv(TEST_KEY_ENV, "sk-wrong")
    client_for(author).post(reverse("llm:endpoint_test", args=[endpoint.pk]), **HTMX_HEADERS)
    job = _run_queued_test(Job.objects.get().pk)
    assert job.message.startswith("It failed: HTTP 401: Incorrect API key provided. (call #")
    assert (job.result["ok"], job.result["status_code"]) == (False, 401)
    assert len(llm_server.chat_requests()) == 1
    html = client_for(author).get(reverse("llm:endpoint_detail", args=[endpoint.pk])).content
    assert b"It failed: HTTP 401: Incorrect API key provided." in html


def test_test_connection_5xx_is_not_retried(client_for, author, endpoint, llm_server):
    llm_server.script(Reply.error(503, "loading model"), Reply.text("pong"))
    client_for(author).post(reverse("llm:endpoint_test", args=[endpoint.pk]))
    job = _run_queued_test(Job.objects.get().pk)
    assert job.result["error"] == "HTTP 503: loading model"
    assert len(llm_server.chat_requests()) == 1


def test_test_connection_refusals(client, client_for, viewer, outsider, endpoint, llm_server):
    url = reverse("llm:endpoint_test", args=[endpoint.pk])
    assert client_for(viewer).post(url).status_code == 403
    assert client_for(outsider).post(url).status_code == 404
    assert client_for(viewer).get(url).status_code == 405
    client.logout()
    assert client.post(url).status_code == 302
    assert llm_server.requests == []
    assert not LLMCall.objects.exists()
    assert not Job.objects.exists()


# --- job calls --------------------------------------------------------------------------


def test_job_calls_page_paginates_and_escapes(client_for, viewer, project, endpoint, job):
    for n in range(23):
        LLMCall.objects.create(
            project=project,
            endpoint=endpoint,
            endpoint_name="loopback",
            model="m",
            job=job,
            purpose="synthesis.repair",
            status="ok",
            request_messages=[{"role": "user", "content": f"<i>request {n}</i>"}],
            response={"content": "<img src=x onerror=alert(1)>", "tool_calls": []},
            tokens_in=10,
            tokens_out=5,
        )
    LLMCall.objects.create(  # another job's call is not listed
        project=project,
        endpoint=endpoint,
        endpoint_name="loopback",
        model="m",
        purpose="x",
        status="ok",
    )
    client = client_for(viewer)
    url = reverse("llm:job_calls", args=[job.pk])
    first = client.get(url)
    assert first.status_code == 200
    assert len(first.context["page"].object_list) == 20
    assert first.context["totals"]["calls"] == 23
    assert first.context["totals"]["tokens_in"] == 230
    html = first.content.decode()
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "<img src=x" not in html
    assert "&lt;i&gt;request 22&lt;/i&gt;" in html
    second = client.get(url, {"page": 2}, **HTMX_HEADERS)
    assert len(second.context["page"].object_list) == 3
    assert second.content.lstrip().startswith(b'<div id="llm-calls"')


def test_job_calls_empty(client_for, viewer, job):
    html = client_for(viewer).get(reverse("llm:job_calls", args=[job.pk])).content
    assert b"No LLM calls yet." in html


def test_job_calls_refusals(client, client_for, outsider, job):
    url = reverse("llm:job_calls", args=[job.pk])
    assert client.get(url).status_code == 302
    assert client_for(outsider).get(url).status_code == 404
    assert client_for(outsider).post(url).status_code == 405


def test_job_page_links_to_its_llm_calls_once_there_are_some(client_for, viewer, project, job):
    client = client_for(viewer)
    link = f'href="{reverse("llm:job_calls", args=[job.pk])}"'.encode()
    assert link not in client.get(reverse("core:job_detail", args=[job.pk])).content
    LLMCall.objects.create(
        project=project, endpoint_name="gone", model="m", job=job, purpose="t", status="error"
    )
    assert link in client.get(reverse("core:job_detail", args=[job.pk])).content
