"""Synthesis REST API: create (returns the job), list, retrieve with slots, cancel."""

import pytest

from apps.core.models import Job
from apps.synthesis.models import SlotStatus, SynthesisJob
from apps.synthesis.services import synthesis_run_inline

pytestmark = pytest.mark.django_db


def body(**overrides):
    data = {
        "capabilities": ["clarify-before-acting", "resolve-conflicts"],
        "count": 2,
        "generator": "template",
        "tasks_per_environment": 2,
        "turns": [1, 2],
        "seed": 3,
    }
    data.update(overrides)
    return data


def test_create_returns_the_job_with_its_slots(api_client_for, author, project, catalogue):
    response = api_client_for(author).post(
        f"/api/v1/projects/{project.pk}/synthesis-jobs/", body(), format="json"
    )
    assert response.status_code == 201
    data = response.json()
    synthesis = SynthesisJob.objects.get()
    assert data["id"] == synthesis.pk and data["job"] == synthesis.job_id
    assert (data["status"], data["progress_done"], data["progress_total"]) == ("pending", 0, 2)
    assert data["capabilities"] == ["clarify-before-acting", "resolve-conflicts"]
    assert (data["turns"], data["seed"], data["generator"]) == ([1, 2], 3, "template")
    assert data["prompt_version"] == "template-v1"
    assert [(s["index"], s["seed"], s["status"]) for s in data["slots"]] == [
        (0, 3, "requested"),
        (1, 4, "requested"),
    ]
    assert data["summary"]["counts"]["requested"] == 2
    assert data["horizon"] == "short"


def test_create_takes_a_horizon(api_client_for, author, project, catalogue):
    response = api_client_for(author).post(
        f"/api/v1/projects/{project.pk}/synthesis-jobs/", body(horizon="long"), format="json"
    )
    assert response.status_code == 201
    assert response.json()["horizon"] == "long"
    assert SynthesisJob.objects.get().horizon == "long"


@pytest.mark.parametrize(
    ("overrides", "status", "message"),
    [
        ({"capabilities": ["nope"]}, 400, "Unknown capability nope in this project."),
        ({"generator": "llm"}, 400, "The LLM generator needs a model endpoint."),
        ({"generator": "llm", "endpoint": 999}, 400, "No such model endpoint in this project."),
        ({"count": 0}, 400, "The request is not valid."),
        ({"turns": [3, 1]}, 400, "The turn range must satisfy 1 ≤ from ≤ to ≤ 20."),
        ({"horizon": "weeks"}, 400, "The request is not valid."),
    ],
)
def test_create_refuses_bad_input(
    api_client_for, author, project, catalogue, overrides, status, message
):
    response = api_client_for(author).post(
        f"/api/v1/projects/{project.pk}/synthesis-jobs/", body(**overrides), format="json"
    )
    assert (response.status_code, response.json()["message"]) == (status, message)
    assert SynthesisJob.objects.count() == 0


def test_create_refuses_viewer_outsider_anonymous(
    api_client_for, viewer, outsider, project, catalogue
):
    url = f"/api/v1/projects/{project.pk}/synthesis-jobs/"
    assert api_client_for().post(url, body(), format="json").status_code == 401
    assert api_client_for(outsider).post(url, body(), format="json").status_code == 404
    assert api_client_for(viewer).post(url, body(), format="json").status_code == 403
    assert SynthesisJob.objects.count() == 0 and Job.objects.count() == 0


def test_list_and_retrieve(api_client_for, viewer, outsider, project, start_template):
    synthesis = start_template(count=2)
    synthesis_run_inline(synthesis=synthesis)
    api = api_client_for(viewer)
    listed = api.get(f"/api/v1/projects/{project.pk}/synthesis-jobs/").json()
    assert listed["count"] == 1 and listed["results"][0]["id"] == synthesis.pk
    assert "slots" not in listed["results"][0]
    detail = api.get(f"/api/v1/synthesis-jobs/{synthesis.pk}/").json()
    assert detail["status"] == "succeeded"
    assert detail["summary"]["counts"]["valid"] == 2
    assert [s["status"] for s in detail["slots"]] == ["valid", "valid"]
    assert all(s["environment"] for s in detail["slots"])
    assert (
        api_client_for(outsider).get(f"/api/v1/synthesis-jobs/{synthesis.pk}/").status_code == 404
    )
    assert api_client_for().get(f"/api/v1/synthesis-jobs/{synthesis.pk}/").status_code == 401
    assert api.put(f"/api/v1/synthesis-jobs/{synthesis.pk}/").status_code == 405


def test_cancel(api_client_for, author, viewer, start_template):
    synthesis = start_template(count=2)
    url = f"/api/v1/synthesis-jobs/{synthesis.pk}/cancel/"
    assert api_client_for(viewer).post(url).status_code == 403
    assert set(synthesis.slots.values_list("status", flat=True)) == {SlotStatus.REQUESTED}
    response = api_client_for(author).post(url)
    assert response.status_code == 200
    assert response.json()["status"] == "cancelled"
    assert [s["status"] for s in response.json()["slots"]] == ["cancelled", "cancelled"]
    again = api_client_for(author).post(url)
    assert again.status_code == 400
    assert again.json()["message"] == "This synthesis job has already cancelled."
