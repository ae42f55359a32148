import pytest
from django.urls import reverse

from apps.core.models import Job
from apps.llm.models import EndpointSlot, LLMCall, ModelEndpoint
from tests.llm.conftest import TEST_KEY_ENV
from tests.llm_server import Reply

pytestmark = pytest.mark.django_db

PAYLOAD = {
    "name": "vllm-qwen",
    "base_url": "http://vllm:8000/v1",
    "model": "Qwen/Qwen3-8B",
    "api_key_env": "",
    "max_concurrency": 8,
    "price_input_per_million": "0.10",
    "supports_json_schema": True,
}


def list_url(project):
    return reverse("api:model_endpoint_list", args=[project.pk])


def detail_url(endpoint):
    return reverse("api:model_endpoint_detail", args=[endpoint.pk])


def test_list(api_client_for, viewer, project, endpoint):
    response = api_client_for(viewer).get(list_url(project))
    assert response.status_code == 200
    assert response.data["count"] == 1
    item = response.data["results"][0]
    assert item["name"] == "loopback"
    assert item["api_key_env"] == TEST_KEY_ENV
    assert item["price_input_per_million"] == "2.5000"
    assert item["created_by"] == "arthur-author"
    assert TEST_KEY_ENV in str(item) and "sk-" not in str(item)


def test_create(api_client_for, author, project):
    response = api_client_for(author).post(list_url(project), PAYLOAD, format="json")
    assert response.status_code == 201
    endpoint = ModelEndpoint.objects.get()
    assert response.data["id"] == endpoint.pk
    assert (endpoint.model, endpoint.max_concurrency, endpoint.supports_json_schema) == (
        "Qwen/Qwen3-8B",
        8,
        True,
    )
    assert endpoint.temperature == 0.7  # the default
    assert EndpointSlot.objects.filter(endpoint=endpoint).count() == 8


def test_create_invalid(api_client_for, author, project):
    response = api_client_for(author).post(
        list_url(project),
        {**PAYLOAD, "api_key_env": "sk-abc", "base_url": "file:///etc"},
        format="json",
    )
    assert response.status_code == 400
    assert response.data["message"] == "The request is not valid."
    assert set(response.data["details"]) == {"api_key_env", "base_url"}
    assert not ModelEndpoint.objects.exists()


def test_create_duplicate_name(api_client_for, author, project, endpoint):
    response = api_client_for(author).post(
        list_url(project), {**PAYLOAD, "name": "loopback"}, format="json"
    )
    assert response.status_code == 400
    assert (
        response.data["message"] == "An endpoint called “loopback” already exists in this project."
    )
    assert ModelEndpoint.objects.count() == 1


def test_list_create_refusals(api_client_for, viewer, outsider, project):
    assert api_client_for().get(list_url(project)).status_code == 401
    assert api_client_for(outsider).get(list_url(project)).status_code == 404
    assert api_client_for(viewer).post(list_url(project), PAYLOAD, format="json").status_code == 403
    assert api_client_for(viewer).delete(list_url(project)).status_code == 405
    assert not ModelEndpoint.objects.exists()


def test_retrieve_patch_put(api_client_for, author, endpoint):
    client = api_client_for(author)
    assert client.get(detail_url(endpoint)).data["model"] == "loop-large"
    response = client.patch(detail_url(endpoint), {"max_concurrency": 3}, format="json")
    assert response.status_code == 200
    assert response.data["max_concurrency"] == 3
    assert EndpointSlot.objects.filter(endpoint=endpoint).count() == 3
    response = client.put(detail_url(endpoint), PAYLOAD, format="json")
    assert response.status_code == 200
    endpoint.refresh_from_db()
    assert (endpoint.name, endpoint.base_url) == ("vllm-qwen", "http://vllm:8000/v1")
    assert client.put(detail_url(endpoint), {"name": "x"}, format="json").status_code == 400


def test_detail_refusals(api_client_for, viewer, author, outsider, endpoint):
    assert api_client_for().get(detail_url(endpoint)).status_code == 401
    assert api_client_for(outsider).get(detail_url(endpoint)).status_code == 404
    assert api_client_for(viewer).patch(detail_url(endpoint), {"name": "x"}).status_code == 403
    assert api_client_for(author).delete(detail_url(endpoint)).status_code == 403
    assert api_client_for(author).post(detail_url(endpoint)).status_code == 405
    endpoint.refresh_from_db()
    assert endpoint.name == "loopback"


def test_delete(api_client_for, admin, endpoint):
    assert api_client_for(admin).delete(detail_url(endpoint)).status_code == 204
    assert not ModelEndpoint.objects.exists()


def test_test_connection_is_a_job(api_client_for, author, endpoint, llm_server):
    from apps.llm.tasks import check_endpoint_task

    llm_server.script(Reply.text("pong", usage=(20, 1)))
    url = reverse("api:model_endpoint_test", args=[endpoint.pk])
    response = api_client_for(author).post(url)
    assert response.status_code == 202
    job = Job.objects.get()
    assert response.json()["id"] == job.pk
    assert (response.json()["kind"], response.json()["status"]) == ("endpoint_test", "pending")
    assert llm_server.requests == []

    check_endpoint_task(job.pk)  # what the worker does (tests/llm/test_worker.py: a real one)
    data = api_client_for(author).get(reverse("api:job_detail", args=[job.pk])).json()
    assert data["status"] == "succeeded"
    result = data["result"]
    assert (result["ok"], result["content"], result["model"]) == (True, "pong", "loop-large")
    assert (result["tokens_in"], result["tokens_out"], result["cost"]) == (20, 1, "0.000060")
    assert result["error"] == "" and result["status_code"] is None
    assert result["call_id"] == LLMCall.objects.get().pk


def test_test_connection_failure(api_client_for, author, endpoint, llm_server):
    from apps.llm.tasks import check_endpoint_task

    llm_server.script(Reply.error(404, "The model `loop-large` does not exist."))
    url = reverse("api:model_endpoint_test", args=[endpoint.pk])
    job_id = api_client_for(author).post(url).json()["id"]
    check_endpoint_task(job_id)
    data = api_client_for(author).get(reverse("api:job_detail", args=[job_id])).json()
    assert data["status"] == "failed"
    assert (data["result"]["ok"], data["result"]["status_code"]) == (False, 404)
    assert data["result"]["error"] == "HTTP 404: The model `loop-large` does not exist."


def test_test_connection_refusals(api_client_for, viewer, outsider, endpoint, llm_server):
    url = reverse("api:model_endpoint_test", args=[endpoint.pk])
    assert api_client_for(viewer).post(url).status_code == 403
    assert api_client_for(outsider).post(url).status_code == 404
    assert api_client_for(viewer).get(url).status_code == 405
    assert llm_server.requests == []


def test_call_lists(api_client_for, viewer, outsider, endpoint, llm_server, job):
    from apps.llm.client import llm_chat

    llm_server.script(Reply.error(500, "boom"), Reply.text("ok"), Reply.text("other"))
    llm_chat(endpoint=endpoint, messages=[{"role": "user", "content": "a"}], purpose="p", job=job)
    llm_chat(endpoint=endpoint, messages=[{"role": "user", "content": "b"}], purpose="q")
    client = api_client_for(viewer)
    calls = client.get(reverse("api:model_endpoint_calls", args=[endpoint.pk])).data
    assert calls["count"] == 3
    job_calls = client.get(reverse("api:job_llm_calls", args=[job.pk])).data
    assert [(c["attempt"], c["status"]) for c in job_calls["results"]] == [
        (2, "ok"),
        (1, "retrying"),
    ]
    assert job_calls["results"][1]["error"] == "HTTP 500: boom"
    assert job_calls["results"][0]["request_messages"] == [{"role": "user", "content": "a"}]
    failed = client.get(reverse("api:job_llm_calls", args=[job.pk]), {"status": "retrying"}).data
    assert failed["count"] == 1
    assert (
        api_client_for(outsider).get(reverse("api:job_llm_calls", args=[job.pk])).status_code == 404
    )
    assert (
        api_client_for().get(reverse("api:model_endpoint_calls", args=[endpoint.pk])).status_code
        == 401
    )


def test_schema_lists_the_endpoints(api_client_for, viewer):
    schema = api_client_for(viewer).get(reverse("api:schema"), {"format": "json"}).json()
    paths = schema["paths"]
    assert "/api/v1/projects/{id}/model-endpoints/" in paths
    assert set(paths["/api/v1/model-endpoints/{id}/"]) == {"get", "put", "patch", "delete"}
    assert "post" in paths["/api/v1/model-endpoints/{id}/test/"]
    assert "/api/v1/jobs/{id}/llm-calls/" in paths
