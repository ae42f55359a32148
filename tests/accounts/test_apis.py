import pytest
from rest_framework.test import APIClient

from apps.accounts.models import ApiToken, Membership, Project, Role
from apps.accounts.services import api_token_create, api_token_revoke
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def test_anonymous_gets_401_with_error_shape(project):
    response = APIClient().get("/api/v1/projects/")
    assert response.status_code == 401
    assert set(response.json()) == {"message", "details"}


def test_projects_list_only_mine(api_client_for, admin, project, other_project):
    response = api_client_for(admin).get("/api/v1/projects/")
    assert response.status_code == 200
    assert [p["slug"] for p in response.json()["results"]] == ["acme"]


def test_project_create(api_client_for, db):
    user = UserFactory()
    response = api_client_for(user).post("/api/v1/projects/", {"name": "Evals"}, format="json")
    assert response.status_code == 201
    assert response.json()["slug"] == "evals"
    assert Membership.objects.get(user=user).role == Role.ADMIN


def test_project_create_bad_input(api_client_for, db):
    response = api_client_for(UserFactory()).post("/api/v1/projects/", {}, format="json")
    assert response.status_code == 400
    body = response.json()
    assert body["message"] == "The request is not valid."
    assert "name" in body["details"]
    assert not Project.objects.exists()


def test_project_retrieve_outsider_404(api_client_for, outsider, project):
    assert api_client_for(outsider).get(f"/api/v1/projects/{project.pk}/").status_code == 404


def test_project_update_needs_admin(api_client_for, author, admin, project):
    url = f"/api/v1/projects/{project.pk}/"
    assert api_client_for(author).patch(url, {"name": "X"}, format="json").status_code == 403
    project.refresh_from_db()
    assert project.name == "Acme agents"
    response = api_client_for(admin).patch(url, {"name": "Renamed"}, format="json")
    assert response.status_code == 200
    assert response.json()["name"] == "Renamed"


def test_memberships_list_for_viewer(api_client_for, viewer, admin, project):
    response = api_client_for(viewer).get(f"/api/v1/projects/{project.pk}/memberships/")
    assert response.status_code == 200
    assert {m["username"]: m["role"] for m in response.json()["results"]} == {
        "alice-admin": "admin",
        "vera-viewer": "viewer",
    }


def test_membership_write_matrix(api_client_for, admin, viewer, outsider, project):
    UserFactory(username="newbie")
    url = f"/api/v1/projects/{project.pk}/memberships/"
    payload = {"username": "newbie", "role": "author"}
    assert api_client_for(viewer).post(url, payload, format="json").status_code == 403
    assert api_client_for(outsider).post(url, payload, format="json").status_code == 404
    assert not Membership.objects.filter(user__username="newbie").exists()
    response = api_client_for(admin).post(url, payload, format="json")
    assert response.status_code == 201
    membership_id = response.json()["id"]
    detail = f"{url}{membership_id}/"
    assert api_client_for(viewer).patch(detail, {"role": "admin"}, format="json").status_code == 403
    assert (
        api_client_for(admin).patch(detail, {"role": "reviewer"}, format="json").json()["role"]
        == "reviewer"
    )
    assert api_client_for(viewer).delete(detail).status_code == 403
    assert api_client_for(admin).delete(detail).status_code == 204
    assert not Membership.objects.filter(pk=membership_id).exists()


def test_membership_bad_role(api_client_for, admin, project):
    UserFactory(username="newbie")
    response = api_client_for(admin).post(
        f"/api/v1/projects/{project.pk}/memberships/",
        {"username": "newbie", "role": "owner"},
        format="json",
    )
    assert response.status_code == 400
    assert "role" in response.json()["details"]


def test_membership_of_other_project_via_my_project_is_404(
    api_client_for, admin, outsider, project
):
    foreign = Membership.objects.get(user=outsider)
    response = api_client_for(admin).patch(
        f"/api/v1/projects/{project.pk}/memberships/{foreign.pk}/",
        {"role": "viewer"},
        format="json",
    )
    assert response.status_code == 404


def test_last_admin_protected(api_client_for, admin, project):
    membership = Membership.objects.get(user=admin)
    response = api_client_for(admin).delete(
        f"/api/v1/projects/{project.pk}/memberships/{membership.pk}/"
    )
    assert response.status_code == 400
    assert "at least one admin" in response.json()["message"]
    assert Membership.objects.filter(pk=membership.pk).exists()


# --- tokens ---------------------------------------------------------------------------------


def test_valid_token_authenticates(viewer, project):
    _token, secret = api_token_create(user=viewer, name="script")
    client = APIClient(HTTP_AUTHORIZATION=f"Bearer {secret}")
    response = client.get("/api/v1/projects/")
    assert response.status_code == 200
    assert response.json()["count"] == 1
    assert ApiToken.objects.get().last_used_at is not None


def test_token_keyword_also_accepted(viewer, project):
    _token, secret = api_token_create(user=viewer, name="script")
    assert (
        APIClient(HTTP_AUTHORIZATION=f"Token {secret}").get("/api/v1/projects/").status_code == 200
    )


def test_revoked_token_is_401(viewer, project):
    token, secret = api_token_create(user=viewer, name="script")
    api_token_revoke(token=token)
    response = APIClient(HTTP_AUTHORIZATION=f"Bearer {secret}").get("/api/v1/projects/")
    assert response.status_code == 401
    assert response.json()["message"] == "Invalid or revoked token."


@pytest.mark.parametrize(
    "header",
    ["Bearer nonsense", "Bearer cwe_deadbeef_wrongsecret", "Bearer", "Bearer a b", "Bearer cwe__"],
)
def test_malformed_tokens_are_401(viewer, header):
    api_token_create(user=viewer, name="script")
    assert APIClient(HTTP_AUTHORIZATION=header).get("/api/v1/projects/").status_code == 401


def test_token_with_right_prefix_but_wrong_secret(viewer):
    token, _secret = api_token_create(user=viewer, name="script")
    forged = f"cwe_{token.prefix}_{'x' * 43}"
    assert (
        APIClient(HTTP_AUTHORIZATION=f"Bearer {forged}").get("/api/v1/projects/").status_code == 401
    )


def test_inactive_user_token_is_401(viewer):
    _token, secret = api_token_create(user=viewer, name="script")
    viewer.is_active = False
    viewer.save()
    assert (
        APIClient(HTTP_AUTHORIZATION=f"Bearer {secret}").get("/api/v1/projects/").status_code == 401
    )


def test_token_api_create_list_revoke(api_client_for, viewer):
    client = api_client_for(viewer)
    response = client.post("/api/v1/tokens/", {"name": "cluster"}, format="json")
    assert response.status_code == 201
    secret = response.json()["token"]
    listed = client.get("/api/v1/tokens/").json()["results"]
    assert [t["name"] for t in listed] == ["cluster"]
    assert "token" not in listed[0]
    token_id = response.json()["id"]
    assert client.delete(f"/api/v1/tokens/{token_id}/").status_code == 200
    assert (
        APIClient(HTTP_AUTHORIZATION=f"Bearer {secret}").get("/api/v1/tokens/").status_code == 401
    )


def test_token_api_others_token_404(api_client_for, viewer, admin):
    token, _ = api_token_create(user=viewer, name="mine")
    assert api_client_for(admin).delete(f"/api/v1/tokens/{token.pk}/").status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None


def test_session_auth_works_for_api(client, viewer, project):
    client.force_login(viewer)
    assert client.get("/api/v1/projects/").status_code == 200


# --- schema and docs ------------------------------------------------------------------------


def test_openapi_schema_validates(api_client_for, viewer):
    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.validation import validate_schema

    schema = SchemaGenerator().get_schema(request=None, public=True)
    validate_schema(schema)
    paths = schema["paths"]
    for expected in ["/api/v1/projects/", "/api/v1/tokens/", "/api/v1/jobs/{id}/"]:
        assert expected in paths
    response = api_client_for(viewer).get("/api/v1/schema/")
    assert response.status_code == 200


def test_docs_are_served_offline(client, viewer):
    client.force_login(viewer)
    response = client.get("/api/v1/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "swagger-ui" in html
    assert "//cdn" not in html and "unpkg" not in html and "jsdelivr" not in html
