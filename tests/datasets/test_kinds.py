"""One notion of kind: a dataset is sft, rl_prompts or rollouts, every version of it has its
kind, and a version of another kind is refused — by the services, the API and the pages."""

import pytest
from django.urls import reverse

from apps.core.exceptions import ApplicationError
from apps.datasets.models import DatasetKind, DatasetVersion
from apps.datasets.services import (
    PromptFilter,
    VersionFilter,
    dataset_create,
    dataset_version_create,
    prompt_version_create,
    rollout_version_create,
)
from apps.runs.rollouts import Variant
from tests.conftest import HTMX_HEADERS

pytestmark = pytest.mark.django_db


@pytest.fixture
def datasets(project, author):
    return {
        kind: dataset_create(project=project, name=f"{kind} set", user=author, kind=kind)
        for kind in DatasetKind.values
    }


def _create(kind, dataset, author):
    if kind == DatasetKind.SFT:
        return dataset_version_create(
            dataset=dataset, user=author, filters=VersionFilter(), enqueue=False
        )
    if kind == DatasetKind.RL_PROMPTS:
        return prompt_version_create(
            dataset=dataset, user=author, filters=PromptFilter(), enqueue=False
        )
    return rollout_version_create(
        dataset=dataset, user=author, batches=[1], variant=Variant.parse(), enqueue=False
    )


@pytest.mark.parametrize(
    ("wanted", "holds"),
    [
        (wanted, holds)
        for wanted in DatasetKind.values
        for holds in DatasetKind.values
        if wanted != holds
    ],
)
def test_a_version_of_another_kind_is_refused_before_anything_exists(
    datasets, author, wanted, holds
):
    dataset = datasets[holds]
    with pytest.raises(ApplicationError) as refused:
        _create(wanted, dataset, author)
    message = refused.value.message
    assert message.startswith(f"“{holds} set” is a dataset of ")
    assert f"(kind {holds})" in message and f"goes in a dataset of kind {wanted}." in message
    assert refused.value.extra == {"kind": holds}
    assert DatasetVersion.objects.count() == 0


def test_an_unknown_kind_is_refused(project, author):
    with pytest.raises(ApplicationError) as refused:
        dataset_create(project=project, name="x", user=author, kind="mixed")
    assert refused.value.extra["fields"]["kind"] == ["kind is one of sft, rl_prompts, rollouts."]


# --------------------------------------------------------------------------- the API


def test_the_api_creates_a_rollouts_dataset_and_refuses_mixing(
    api_client_for, author, viewer, outsider, datasets
):
    api = api_client_for(author)
    created = api.post(
        f"/api/v1/projects/{datasets['sft'].project_id}/datasets/",
        {"name": "offline", "kind": "rollouts"},
        format="json",
    )
    assert created.status_code == 201, created.json()
    assert created.json()["kind"] == "rollouts"
    rollouts, sft = datasets["rollouts"], datasets["sft"]
    # versions/ of a rollouts dataset points to rollout-versions/
    response = api.post(f"/api/v1/datasets/{rollouts.pk}/versions/", {}, format="json")
    assert response.status_code == 400
    assert response.json()["message"] == (
        "“rollouts set” is a dataset of scored rollouts: build its versions from student "
        f"batches with POST /api/v1/datasets/{rollouts.pk}/rollout-versions/ (batches, "
        "reward, advantage, credit)."
    )
    # rollout-versions/ of an SFT dataset is refused whatever the batches
    response = api.post(
        f"/api/v1/datasets/{sft.pk}/rollout-versions/", {"batches": [1]}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["message"].startswith(
        "“sft set” is a dataset of approved demonstrations (kind sft): a version of scored rollouts"
    )
    assert response.json()["details"] == {"kind": "sft"}
    for client, code in ((api_client_for(viewer), 403), (api_client_for(outsider), 404)):
        url = f"/api/v1/datasets/{rollouts.pk}/versions/"
        assert client.post(url, {}, format="json").status_code == code
    assert DatasetVersion.objects.count() == 0
    listed = api.get(f"/api/v1/projects/{sft.project_id}/datasets/").json()["results"]
    assert {d["name"]: d["kind"] for d in listed} == {
        "offline": "rollouts",
        "rl_prompts set": "rl_prompts",
        "rollouts set": "rollouts",
        "sft set": "sft",
    }


# --------------------------------------------------------------------------- the pages


@pytest.mark.parametrize("htmx", [False, True])
def test_new_version_of_a_rollouts_dataset_is_the_rollout_form(client_for, author, datasets, htmx):
    headers = HTMX_HEADERS if htmx else {}
    rollouts = datasets["rollouts"]
    page = client_for(author).get(reverse("datasets:version_create", args=[rollouts.pk]), **headers)
    body = page.content.decode()
    assert page.status_code == 200 and 'data-testid="rollout-version-form"' in body
    assert body.lstrip().startswith("<form") == htmx
    detail = client_for(author).get(reverse("datasets:detail", args=[rollouts.pk])).content
    assert b"New scored-rollout version" in detail and b"new-rollout-version" not in detail


@pytest.mark.parametrize("htmx", [False, True])
def test_the_rollout_form_of_another_kind_sends_back_with_the_reason(
    client_for, author, datasets, htmx
):
    headers = HTMX_HEADERS if htmx else {}
    sft = datasets["sft"]
    client = client_for(author)
    url = reverse("datasets:rollout_version_create", args=[sft.pk])
    for response in (
        client.get(url, **headers),
        client.post(url, {"batches": ["1"], "reward": "score"}, **headers),
    ):
        target = reverse("datasets:detail", args=[sft.pk])
        if htmx:
            assert response.status_code == 200 and response["HX-Redirect"] == target
        else:
            assert response.status_code == 302 and response["Location"] == target
    shown = client.get(reverse("datasets:detail", args=[sft.pk])).content.decode()
    assert "is a dataset of approved demonstrations (kind sft)" in shown
    assert DatasetVersion.objects.count() == 0


def test_the_rollout_form_refuses_viewers_and_outsiders_before_the_kind(
    client_for, viewer, outsider, datasets
):
    url = reverse("datasets:rollout_version_create", args=[datasets["sft"].pk])
    assert client_for(viewer).get(url).status_code == 403
    assert client_for(outsider).get(url).status_code == 404


@pytest.mark.parametrize("htmx", [False, True])
def test_the_create_form_makes_a_rollouts_dataset(client_for, author, project, htmx):
    headers = HTMX_HEADERS if htmx else {}
    url = reverse("datasets:create", args=[project.slug])
    form = client_for(author).get(url).content.decode()
    assert 'value="rollouts"' in form
    response = client_for(author).post(url, {"name": "offline", "kind": "rollouts"}, **headers)
    assert response.status_code in (200, 302)
    dataset = project.datasets.get(name="offline")
    assert dataset.kind == DatasetKind.ROLLOUTS
    bad = client_for(author).post(url, {"name": "other", "kind": "mixed"}, **HTMX_HEADERS)
    assert "Select a valid choice." in bad.content.decode()
    listed = client_for(author).get(reverse("datasets:list", args=[project.slug])).content
    assert b"Scored rollouts</span>" in listed
