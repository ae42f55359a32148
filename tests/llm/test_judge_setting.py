"""The project's LLM judge setting: the page, its htmx variant, permissions, bad input."""

import pytest
from django.test import Client
from django.urls import reverse

from apps.core.exceptions import ApplicationError
from apps.llm.models import JudgeVerdict, ProjectJudge
from apps.llm.services import endpoint_create, project_judge_set
from tests.conftest import HTMX_HEADERS
from tests.llm.conftest import TEST_KEY_ENV

pytestmark = pytest.mark.django_db


def url(project):
    return reverse("llm:judge_setting", args=[project.slug])


def test_author_chooses_the_judge_and_the_list_shows_it(client_for, author, project, endpoint):
    client = client_for(author)
    page = client.get(url(project)).content.decode()
    assert 'data-testid="judge-form"' in page
    assert 'data-testid="no-endpoints"' not in page  # there is one to choose
    assert "No judge: judge graders are skipped" in page
    response = client.post(url(project), {"endpoint": endpoint.pk})
    assert response.status_code == 302
    assert response["Location"] == reverse("llm:endpoint_list", args=[project.slug])
    setting = ProjectJudge.objects.get(project=project)
    assert (setting.endpoint_id, setting.updated_by_id) == (endpoint.pk, author.pk)
    listing = client.get(reverse("llm:endpoint_list", args=[project.slug])).content.decode()
    assert "LLM judge: <strong>loopback</strong>" in listing


def test_without_endpoints_the_page_points_to_adding_one(client_for, author, project):
    for headers in ({}, HTMX_HEADERS):
        page = client_for(author).get(url(project), **headers).content.decode()
        assert 'data-testid="no-endpoints"' in page
        assert f'href="/p/{project.slug}/models/new/">Add an endpoint</a>' in page


def test_clearing_the_judge_removes_the_setting(client_for, author, project, endpoint):
    project_judge_set(project=project, endpoint=endpoint, user=author)
    response = client_for(author).post(url(project), {"endpoint": ""})
    assert response.status_code == 302
    assert not ProjectJudge.objects.filter(project=project).exists()


def test_the_page_counts_cached_verdicts_and_their_hits(client_for, author, project, endpoint):
    JudgeVerdict.objects.create(
        project=project,
        key="k" * 64,
        rubric="r",
        evidence_hash="e" * 64,
        model="m",
        score=1.0,
        hits=3,
    )
    page = client_for(author).get(url(project)).content.decode()
    assert "1 cached verdict, reused 3 times." in page


def test_htmx_post_redirects_the_client_and_bad_input_rerenders_the_partial(
    client_for, author, project, endpoint
):
    client = client_for(author)
    response = client.post(url(project), {"endpoint": "999999"}, **HTMX_HEADERS)
    assert response.status_code == 200
    body = response.content.decode()
    assert body.lstrip().startswith('<form method="post"')
    assert "Select a valid choice" in body
    assert not ProjectJudge.objects.exists()
    response = client.post(url(project), {"endpoint": endpoint.pk}, **HTMX_HEADERS)
    assert response.status_code == 200
    assert response["HX-Redirect"] == reverse("llm:endpoint_list", args=[project.slug])
    assert ProjectJudge.objects.get().endpoint_id == endpoint.pk


def test_another_projects_endpoint_is_not_a_choice(
    client_for, author, project, other_project, llm_server
):
    theirs = endpoint_create(
        project=other_project,
        name="theirs",
        base_url=llm_server.base_url,
        model="x",
        api_key_env=TEST_KEY_ENV,
    )
    response = client_for(author).post(url(project), {"endpoint": theirs.pk})
    assert response.status_code == 200
    assert "Select a valid choice" in response.content.decode()
    assert not ProjectJudge.objects.exists()
    with pytest.raises(ApplicationError, match="belongs to another project"):
        project_judge_set(project=project, endpoint=theirs)


def test_refusals_change_nothing(client_for, viewer, outsider, project, endpoint):
    anonymous = Client()
    response = anonymous.post(url(project), {"endpoint": endpoint.pk})
    assert (response.status_code, response["Location"].split("?")[0]) == (302, "/login/")
    assert client_for(viewer).get(url(project)).status_code == 403
    assert client_for(viewer).post(url(project), {"endpoint": endpoint.pk}).status_code == 403
    assert client_for(outsider).get(url(project)).status_code == 404
    assert client_for(outsider).post(url(project), {"endpoint": endpoint.pk}).status_code == 404
    assert client_for(viewer).put(url(project)).status_code == 405
    assert not ProjectJudge.objects.exists()
    listing = client_for(viewer).get(reverse("llm:endpoint_list", args=[project.slug]))
    assert "Choose the judge" not in listing.content.decode()


# --- API ------------------------------------------------------------------------------


def test_api_reads_and_sets_the_judge(api_client_for, author, viewer, project, endpoint):
    api_url = f"/api/v1/projects/{project.pk}/judge/"
    empty = {"endpoint": None, "model": "", "cached_verdicts": 0, "cache_hits": 0}
    assert api_client_for(viewer).get(api_url).json() == empty
    response = api_client_for(author).put(api_url, {"endpoint": endpoint.pk}, format="json")
    assert response.status_code == 200
    assert response.json() == {**empty, "endpoint": endpoint.pk, "model": "loop-large"}
    response = api_client_for(author).put(api_url, {"endpoint": None}, format="json")
    assert (response.status_code, response.json()) == (200, empty)


def test_api_refuses_bad_input_and_low_roles(
    api_client_for, author, viewer, outsider, project, endpoint
):
    api_url = f"/api/v1/projects/{project.pk}/judge/"
    bad = api_client_for(author).put(api_url, {"endpoint": 999999}, format="json")
    assert bad.status_code == 400
    assert bad.json()["details"]["fields"] == {"endpoint": ["Not found."]}
    assert api_client_for(author).put(api_url, {"endpoint": "x"}, format="json").status_code == 400
    huge = api_client_for(author).put(api_url, {"endpoint": 2**63}, format="json")
    assert huge.status_code == 400
    assert list(huge.json()["details"]) == ["endpoint"]
    forbidden = api_client_for(viewer).put(api_url, {"endpoint": endpoint.pk}, format="json")
    assert forbidden.status_code == 403
    assert api_client_for(outsider).get(api_url).status_code == 404
    assert api_client_for().get(api_url).status_code == 401
    assert not ProjectJudge.objects.exists()
