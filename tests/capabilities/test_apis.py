import pytest

from apps.accounts.models import Membership, Role
from apps.capabilities.models import Capability
from apps.capabilities.services import capability_archive
from apps.environments.services import environment_import
from tests.capabilities.conftest import set_validation
from tests.capabilities.test_services import CATALOGUE_SLUGS

pytestmark = pytest.mark.django_db

LIST = "/api/v1/capabilities/"
BOOK, CLARIFY, NOTICE = "book-q3-review", "budget-figure-clarify", "notice-moved-dentist"


def detail_url(capability) -> str:
    return f"/api/v1/capabilities/{capability.pk}/"


@pytest.fixture
def policy(catalogue):
    return catalogue["follow-policy"]


@pytest.fixture
def used(project, author, catalogue, make_spec):
    """follow-policy tags two tasks of one valid environment."""
    spec = make_spec({BOOK: ["follow-policy"], CLARIFY: ["follow-policy"], NOTICE: []})
    environment = environment_import(project=project, spec=spec, user=author)
    set_validation(environment, status="valid")
    return environment


def _snapshot(project):
    return sorted(
        Capability.objects.filter(project=project).values_list(
            "slug", "name", "group", "description", "guidance", "examples", "archived_at"
        )
    )


NEW = {
    "name": "Plan business travel",
    "group": "Travel",
    "description": "Book trips within policy.",
    "guidance": "Seed two fares.",
    "examples": ["Book me to Lisbon", "  ", "Find a hotel"],
}


# --- anonymous ------------------------------------------------------------------------------


def test_anonymous_gets_401(api_client_for, project, policy):
    api = api_client_for()
    for method, url in [
        ("get", LIST),
        ("post", LIST),
        ("get", detail_url(policy)),
        ("patch", detail_url(policy)),
        ("delete", detail_url(policy)),
    ]:
        response = getattr(api, method)(url, {"project": project.pk, **NEW}, format="json")
        assert response.status_code == 401, (method, url)
        assert set(response.json()) == {"message", "details"}
    assert Capability.objects.filter(pk=policy.pk).exists()


# --- list -----------------------------------------------------------------------------------


def test_list_of_a_project(api_client_for, viewer, project, policy, used):
    response = api_client_for(viewer).get(LIST, {"project": project.pk})
    assert response.status_code == 200
    body = response.json()
    assert body["count"] == len(CATALOGUE_SLUGS)
    row = next(r for r in body["results"] if r["slug"] == "follow-policy")
    assert row == {
        "id": policy.pk,
        "project": project.pk,
        "slug": "follow-policy",
        "name": "Respect approval policies",
        "group": "Policy and safety",
        "description": policy.description,
        "guidance": policy.guidance,
        "examples": policy.examples,
        "archived": False,
        "archived_at": None,
        "task_count": 2,
        "valid_task_count": 2,
        "created_by": None,
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
    }


def test_list_filters(api_client_for, viewer, project, catalogue):
    api = api_client_for(viewer)
    response = api.get(LIST, {"project": project.pk, "group": "Robustness"})
    assert [r["slug"] for r in response.json()["results"]] == ["recover-from-tool-errors"]
    response = api.get(LIST, {"project": project.pk, "q": "look-alike"})
    assert [r["slug"] for r in response.json()["results"]] == ["disambiguate-contacts"]
    capability_archive(capability=catalogue["follow-policy"])
    response = api.get(LIST, {"project": project.pk})
    assert response.json()["count"] == len(CATALOGUE_SLUGS) - 1
    response = api.get(LIST, {"project": project.pk, "archived": "true"})
    assert [(r["slug"], r["archived"]) for r in response.json()["results"]] == [
        ("follow-policy", True)
    ]


def test_list_without_project_covers_all_my_projects(
    api_client_for, viewer, project, other_project, catalogue
):
    Capability.objects.create(project=other_project, slug="theirs", name="Theirs")
    api = api_client_for(viewer)
    slugs = {r["slug"] for r in api.get(LIST, {"page_size": 500}).json()["results"]}
    assert slugs == set(CATALOGUE_SLUGS)
    Membership.objects.create(project=other_project, user=viewer, role=Role.VIEWER)
    slugs = {r["slug"] for r in api.get(LIST, {"page_size": 500}).json()["results"]}
    assert slugs == set(CATALOGUE_SLUGS) | {"theirs"}


def test_list_of_another_project_is_404(api_client_for, outsider, project, catalogue):
    response = api_client_for(outsider).get(LIST, {"project": project.pk})
    assert response.status_code == 404
    assert response.json() == {"message": "No such project.", "details": {}}


def test_list_with_a_bad_project_param_is_400(api_client_for, viewer):
    response = api_client_for(viewer).get(LIST, {"project": "acme"})
    assert response.status_code == 400
    body = response.json()
    assert body["message"] == "The request is not valid."
    assert list(body["details"]) == ["project"]


def test_list_query_count_is_flat(
    api_client_for, viewer, project, catalogue, django_assert_max_num_queries
):
    api = api_client_for(viewer)
    with django_assert_max_num_queries(5):
        assert api.get(LIST, {"project": project.pk}).status_code == 200
    for i in range(60):
        Capability.objects.create(project=project, slug=f"extra-{i}", name=f"Extra {i}")
    with django_assert_max_num_queries(5):
        response = api.get(LIST, {"project": project.pk, "page_size": 100})
    assert len(response.json()["results"]) == len(CATALOGUE_SLUGS) + 60


# --- create ---------------------------------------------------------------------------------


def test_author_creates(api_client_for, author, project):
    response = api_client_for(author).post(LIST, {"project": project.pk, **NEW}, format="json")
    assert response.status_code == 201
    body = response.json()
    capability = Capability.objects.get(pk=body["id"])
    assert (body["slug"], body["examples"], body["created_by"]) == (
        "plan-business-travel",
        ["Book me to Lisbon", "Find a hotel"],
        author.username,
    )
    assert (body["task_count"], body["valid_task_count"], body["archived"]) == (0, 0, False)
    assert capability.project == project


def test_create_with_a_taken_slug_is_400(api_client_for, author, project, catalogue):
    before = _snapshot(project)
    response = api_client_for(author).post(
        LIST, {"project": project.pk, **NEW, "slug": "follow-policy"}, format="json"
    )
    assert response.status_code == 400
    message = (
        "The slug “follow-policy” is already used by “Respect approval policies” in this project."
    )
    assert response.json() == {"message": message, "details": {"slug": [message]}}
    assert _snapshot(project) == before


def test_create_validates_input(api_client_for, author, project):
    response = api_client_for(author).post(
        LIST, {"project": project.pk, "slug": "Bad slug", "examples": "one"}, format="json"
    )
    assert response.status_code == 400
    assert set(response.json()["details"]) == {"name", "slug", "examples"}
    assert not Capability.objects.filter(project=project).exists()


def test_viewer_cannot_create(api_client_for, viewer, project):
    response = api_client_for(viewer).post(LIST, {"project": project.pk, **NEW}, format="json")
    assert response.status_code == 403
    assert response.json()["message"] == "This needs the author role or higher."
    assert not Capability.objects.filter(project=project).exists()


def test_outsider_cannot_create(api_client_for, outsider, project):
    response = api_client_for(outsider).post(LIST, {"project": project.pk, **NEW}, format="json")
    assert response.status_code == 404
    assert not Capability.objects.filter(project=project).exists()


# --- retrieve / patch / delete --------------------------------------------------------------


def test_retrieve(api_client_for, viewer, policy, used):
    response = api_client_for(viewer).get(detail_url(policy))
    assert response.status_code == 200
    body = response.json()
    assert (body["id"], body["slug"], body["task_count"], body["valid_task_count"]) == (
        policy.pk,
        "follow-policy",
        2,
        2,
    )


def test_outsider_gets_404_on_a_capability(api_client_for, outsider, project, policy):
    before = _snapshot(project)
    api = api_client_for(outsider)
    assert api.get(detail_url(policy)).status_code == 404
    assert api.patch(detail_url(policy), {"name": "X"}, format="json").status_code == 404
    assert api.delete(detail_url(policy)).status_code == 404
    assert api.get("/api/v1/capabilities/999999/").status_code == 404
    assert _snapshot(project) == before


def test_author_patches(api_client_for, author, policy):
    response = api_client_for(author).patch(
        detail_url(policy), {"name": "Approvals", "examples": ["a", "b"]}, format="json"
    )
    assert response.status_code == 200
    body = response.json()
    assert (body["name"], body["examples"], body["slug"]) == (
        "Approvals",
        ["a", "b"],
        "follow-policy",
    )
    policy.refresh_from_db()
    assert policy.name == "Approvals"


def test_patch_archives_and_restores(api_client_for, author, policy):
    api = api_client_for(author)
    body = api.patch(detail_url(policy), {"archived": True}, format="json").json()
    assert body["archived"] is True and body["archived_at"] is not None
    policy.refresh_from_db()
    assert policy.is_archived
    body = api.patch(detail_url(policy), {"archived": False}, format="json").json()
    assert (body["archived"], body["archived_at"]) == (False, None)


def test_patch_is_all_or_nothing(api_client_for, author, policy, used):
    response = api_client_for(author).patch(
        detail_url(policy), {"slug": "approvals", "archived": True}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["message"].startswith(
        "The slug cannot change while 2 tasks use this capability"
    )
    policy.refresh_from_db()
    assert (policy.slug, policy.is_archived) == ("follow-policy", False)


def test_viewer_cannot_patch(api_client_for, viewer, project, policy):
    before = _snapshot(project)
    response = api_client_for(viewer).patch(
        detail_url(policy), {"name": "X", "archived": True}, format="json"
    )
    assert response.status_code == 403
    assert _snapshot(project) == before


def test_admin_deletes_an_unused_capability(api_client_for, admin, policy):
    response = api_client_for(admin).delete(detail_url(policy))
    assert response.status_code == 204
    assert not Capability.objects.filter(pk=policy.pk).exists()


def test_delete_of_a_used_capability_is_refused(api_client_for, admin, policy, used):
    response = api_client_for(admin).delete(detail_url(policy))
    assert response.status_code == 400
    assert response.json() == {
        "message": "“Respect approval policies” is used by 2 tasks; deleting it would change "
        "their specs. Archive it instead: it disappears from lists and pickers and the tasks "
        "keep their links.",
        "details": {"tasks": 2},
    }
    assert Capability.objects.filter(pk=policy.pk).exists()


@pytest.mark.parametrize("role", ["author", "reviewer"])
def test_below_admin_cannot_delete(api_client_for, request, role, policy):
    response = api_client_for(request.getfixturevalue(role)).delete(detail_url(policy))
    assert response.status_code == 403
    assert response.json()["message"] == "This needs the admin role or higher."
    assert Capability.objects.filter(pk=policy.pk).exists()


def test_wrong_methods(api_client_for, admin, policy):
    api = api_client_for(admin)
    assert api.put(detail_url(policy), {}, format="json").status_code == 405
    assert api.delete(LIST).status_code == 405


def test_openapi_schema_describes_the_endpoints():
    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.validation import validate_schema

    schema = SchemaGenerator().get_schema(request=None, public=True)
    validate_schema(schema)
    assert set(schema["paths"]["/api/v1/capabilities/"]) >= {"get", "post"}
    assert set(schema["paths"]["/api/v1/capabilities/{id}/"]) >= {"get", "patch", "delete"}
    parameters = {p["name"] for p in schema["paths"]["/api/v1/capabilities/"]["get"]["parameters"]}
    assert {"project", "group", "q", "archived", "page"} <= parameters
