"""REST API: demonstrations list/retrieve and approve / reject / correct — tokens, scoping,
roles, errors, and the OpenAPI schema."""

import pytest
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.validation import validate_schema
from rest_framework.test import APIClient

from apps.accounts.services import api_token_create
from apps.curation.models import Demonstration, DemonstrationVersion, Review
from apps.curation.services import demonstration_claim

pytestmark = pytest.mark.django_db


def _booking(demonstrations):
    return next(d for d in demonstrations if d.task_key == "book-q3-review")


def test_list_with_a_token_and_filters(reviewer, project, demonstrations):
    _token, secret = api_token_create(user=reviewer, name="script")
    client = APIClient(HTTP_AUTHORIZATION=f"Bearer {secret}")
    response = client.get(f"/api/v1/projects/{project.pk}/demonstrations/")
    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 3
    first = body["results"][0]
    assert first["id"] == demonstrations[0].pk
    assert first["status"] == "pending"
    assert first["current_version"] == 1
    assert first["score"] == 1.0
    assert first["task_key"] == demonstrations[0].task_key
    # One recorded as of an eval task (made before eval runs stopped becoming demonstrations).
    Demonstration.objects.filter(pk=demonstrations[2].pk).update(split="eval")
    split = client.get(f"/api/v1/projects/{project.pk}/demonstrations/?split=eval").json()
    assert [row["task_key"] for row in split["results"]] == ["notice-moved-dentist"]
    none = client.get(f"/api/v1/projects/{project.pk}/demonstrations/?status=approved").json()
    assert none["count"] == 0


def test_retrieve_has_the_current_version(api_client_for, viewer, demonstrations):
    demo = demonstrations[0]
    response = api_client_for(viewer).get(f"/api/v1/demonstrations/{demo.pk}/")
    assert response.status_code == 200
    data = response.json()
    assert data["version"]["number"] == 1
    assert data["version"]["transcript"] == demo.current_version.transcript
    assert data["version"]["tools"] == demo.current_version.tools
    assert data["version"]["grading"]["passed"] is True
    assert [v["number"] for v in data["versions"]] == [1]
    assert data["reviews"] == []
    assert data["round"] == {"done": 0, "required": 1}


def test_anonymous_is_401_and_outsider_is_404(api_client_for, outsider, project, demonstrations):
    demo = demonstrations[0]
    anonymous = api_client_for()
    assert anonymous.get(f"/api/v1/projects/{project.pk}/demonstrations/").status_code == 401
    assert anonymous.post(f"/api/v1/demonstrations/{demo.pk}/approve/").status_code == 401
    client = api_client_for(outsider)
    for url in [
        f"/api/v1/projects/{project.pk}/demonstrations/",
        f"/api/v1/demonstrations/{demo.pk}/",
    ]:
        response = client.get(url)
        assert response.status_code == 404
        assert set(response.json()) == {"message", "details"}
    assert client.post(f"/api/v1/demonstrations/{demo.pk}/approve/").status_code == 404
    assert Review.objects.count() == 0


@pytest.mark.parametrize("role", ["viewer", "author"])
def test_viewer_and_author_cannot_decide(request, api_client_for, demonstrations, role):
    client = api_client_for(request.getfixturevalue(role))
    demo = _booking(demonstrations)
    assert client.post(f"/api/v1/demonstrations/{demo.pk}/approve/").status_code == 403
    assert (
        client.post(
            f"/api/v1/demonstrations/{demo.pk}/reject/", {"comment": "no"}, format="json"
        ).status_code
        == 403
    )
    response = client.post(
        f"/api/v1/demonstrations/{demo.pk}/correct/",
        {"edits": [{"op": "truncate", "index": 3}]},
        format="json",
    )
    assert response.status_code == 403
    demo.refresh_from_db()
    assert (demo.status, demo.versions.count()) == ("pending", 1)
    assert Review.objects.count() == 0


def test_wrong_method_is_405(api_client_for, reviewer, demonstrations):
    demo = demonstrations[0]
    client = api_client_for(reviewer)
    assert client.get(f"/api/v1/demonstrations/{demo.pk}/approve/").status_code == 405
    assert client.delete(f"/api/v1/demonstrations/{demo.pk}/").status_code == 405


def test_approve_and_reject(api_client_for, reviewer, demonstrations):
    approved, rejected, _ = demonstrations
    client = api_client_for(reviewer)
    response = client.post(
        f"/api/v1/demonstrations/{approved.pk}/approve/", {"comment": "clean"}, format="json"
    )
    assert response.status_code == 200
    data = response.json()
    assert data["demonstration"]["status"] == "approved"
    assert (data["review"]["decision"], data["review"]["comment"], data["review"]["version"]) == (
        "approved",
        "clean",
        1,
    )
    again = client.post(f"/api/v1/demonstrations/{approved.pk}/approve/")
    assert again.status_code == 400
    assert again.json()["message"] == "This demonstration was already decided (approved)."

    missing = client.post(f"/api/v1/demonstrations/{rejected.pk}/reject/", {}, format="json")
    assert missing.status_code == 400
    assert "Give a reason tag or a comment" in missing.json()["message"]
    unknown = client.post(
        f"/api/v1/demonstrations/{rejected.pk}/reject/",
        {"reason_tags": ["nope"]},
        format="json",
    )
    assert unknown.json()["details"] == {"reason_tags": ["nope"]}
    response = client.post(
        f"/api/v1/demonstrations/{rejected.pk}/reject/",
        {"reason_tags": ["hallucinated fact"], "comment": "invents a budget"},
        format="json",
    )
    assert response.status_code == 200
    assert response.json()["review"]["reason_tags"] == ["hallucinated fact"]
    assert Demonstration.objects.get(pk=rejected.pk).status == "rejected"


def test_someone_elses_claim_is_respected(api_client_for, reviewer, admin, demonstrations):
    demo = demonstrations[0]
    demonstration_claim(demonstration=demo, user=admin)
    response = api_client_for(reviewer).post(f"/api/v1/demonstrations/{demo.pk}/approve/")
    assert response.status_code == 400
    assert response.json()["message"] == "Another reviewer holds this demonstration right now."


def test_correct_returns_the_regraded_version(api_client_for, reviewer, demonstrations):
    demo = _booking(demonstrations)
    transcript = demo.current_version.transcript
    create_at = next(
        i
        for i, m in enumerate(transcript)
        if any(c["function"]["name"] == "create_event" for c in m.get("tool_calls") or [])
    )
    client = api_client_for(reviewer)
    response = client.post(
        f"/api/v1/demonstrations/{demo.pk}/correct/",
        {"edits": [{"op": "truncate", "index": create_at}], "note": "stop before booking"},
        format="json",
    )
    assert response.status_code == 201
    data = response.json()
    assert data["number"] == 2
    assert len(data["transcript"]) == create_at
    assert (data["passed"], data["flag"], data["note"]) == (
        False,
        "passed→failed",
        "stop before booking",
    )
    assert data["grading"]["verdicts"]
    assert data["changes"] == [{"op": "truncate", "index": create_at}]
    bad = client.post(
        f"/api/v1/demonstrations/{demo.pk}/correct/",
        {"edits": [{"op": "edit", "index": 1, "content": "x"}]},
        format="json",
    )
    assert bad.status_code == 400
    assert bad.json()["message"] == "Only assistant messages can be edited; message 1 is not."
    invalid = client.post(
        f"/api/v1/demonstrations/{demo.pk}/correct/", {"edits": [{"op": "?"}]}, format="json"
    )
    assert invalid.status_code == 400
    assert invalid.json()["message"] == "The request is not valid."
    assert DemonstrationVersion.objects.filter(demonstration=demo).count() == 2


def test_schema_documents_the_endpoints():
    schema = SchemaGenerator().get_schema(request=None, public=True)
    validate_schema(schema)
    paths = schema["paths"]
    assert set(paths["/api/v1/projects/{id}/demonstrations/"]) == {"get"}
    assert set(paths["/api/v1/demonstrations/{id}/"]) == {"get"}
    for action in ("approve", "reject", "correct"):
        assert set(paths[f"/api/v1/demonstrations/{{id}}/{action}/"]) == {"post"}
    correct = paths["/api/v1/demonstrations/{id}/correct/"]["post"]
    assert "201" in correct["responses"]
    parameters = {
        p["name"] for p in paths["/api/v1/projects/{id}/demonstrations/"]["get"]["parameters"]
    }
    assert {
        "status",
        "capability",
        "environment",
        "model",
        "score_min",
        "split",
        "flag",
    } <= parameters
