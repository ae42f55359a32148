"""The model servers API: start (trained model or path), list, read, stop; refusals."""

import pytest

from apps.core.models import JobStatus
from apps.serving.models import ModelServer

pytestmark = pytest.mark.django_db
HUB_MODEL = "Qwen/Qwen2.5-0.5B-Instruct"


def test_start_list_read_and_stop(api_client_for, author, viewer, project):
    url = f"/api/v1/projects/{project.pk}/model-servers/"
    created = api_client_for(author).post(url, {"model_path": HUB_MODEL}, format="json")
    assert created.status_code == 202
    body = created.json()
    assert (body["model_path"], body["ready"], body["endpoint"], body["job"]["status"]) == (
        HUB_MODEL,
        False,
        None,
        "pending",
    )
    listed = api_client_for(viewer).get(url).json()
    assert [row["id"] for row in listed["results"]] == [body["id"]]
    detail = api_client_for(viewer).get(f"/api/v1/model-servers/{body['id']}/").json()
    assert (detail["log_tail"], detail["command"]) == ("", "")
    stopped = api_client_for(author).post(f"/api/v1/model-servers/{body['id']}/stop/")
    assert stopped.status_code == 202 and stopped.json()["job"]["status"] == "cancelled"
    again = api_client_for(author).post(f"/api/v1/model-servers/{body['id']}/stop/")
    assert (again.status_code, again.json()["message"]) == (
        400,
        "This server has already stopped.",
    )


def test_refusals_change_nothing(api_client_for, author, viewer, outsider, project):
    url = f"/api/v1/projects/{project.pk}/model-servers/"
    assert api_client_for(viewer).post(url, {"model_path": HUB_MODEL}).status_code == 403
    assert api_client_for(outsider).post(url, {"model_path": HUB_MODEL}).status_code == 404
    bad = api_client_for(author).post(url, {"model_path": "-x"}, format="json")
    assert bad.status_code == 400 and "model_path" in bad.json()["details"]["fields"]
    missing = api_client_for(author).post(url, {"trained_model": 999999}, format="json")
    assert missing.status_code == 400
    assert not ModelServer.objects.exists()
    created = api_client_for(author).post(url, {"model_path": HUB_MODEL}, format="json").json()
    assert (
        api_client_for(outsider).get(f"/api/v1/model-servers/{created['id']}/").status_code == 404
    )
    stop = f"/api/v1/model-servers/{created['id']}/stop/"
    assert api_client_for(outsider).post(stop).status_code == 404
    assert api_client_for(viewer).post(stop).status_code == 403
    assert ModelServer.objects.get().job.status == JobStatus.PENDING
