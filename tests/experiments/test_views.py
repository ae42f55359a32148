import json

from django.urls import reverse

from apps.experiments.models import Experiment
from apps.experiments.services import experiment_create
from tests.conftest import HTMX_HEADERS


def test_the_form_starts_an_experiment_and_redirects_to_its_page(
    catalogue, author, client_for, recipe
):
    client = client_for(author)
    url = reverse("experiments:create", args=[catalogue.slug])
    assert client.get(url).status_code == 200
    response = client.post(url, {"recipe": json.dumps(recipe)})
    experiment = Experiment.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("experiments:detail", args=[experiment.pk])
    page = client.get(response["Location"]).content.decode()
    assert 'data-stage="synthesis" data-status="pending"' in page
    assert 'hx-trigger="every 2s"' in page


def test_the_htmx_form_redirects_the_client(catalogue, author, client_for, recipe):
    url = reverse("experiments:create", args=[catalogue.slug])
    response = client_for(author).post(url, {"recipe": json.dumps(recipe)}, **HTMX_HEADERS)
    assert response.status_code == 200
    assert response["HX-Redirect"] == reverse(
        "experiments:detail", args=[Experiment.objects.get().pk]
    )


def test_a_bad_recipe_rerenders_the_form_naming_the_field(catalogue, author, client_for, recipe):
    recipe["generator"]["count"] = 0
    url = reverse("experiments:create", args=[catalogue.slug])
    response = client_for(author).post(url, {"recipe": json.dumps(recipe)}, **HTMX_HEADERS)
    assert response.status_code == 200
    body = response.content.decode()
    assert "generator.count: Give a whole number from 1 to 50." in body
    assert "<html" not in body  # the form's partial only
    assert not Experiment.objects.exists()
    response = client_for(author).post(url, {"recipe": "{not json"})
    assert "Not JSON" in response.content.decode()
    assert not Experiment.objects.exists()


def test_refusals(catalogue, author, viewer, outsider, client, client_for, recipe):
    url = reverse("experiments:create", args=[catalogue.slug])
    assert client.get(url).status_code == 302  # anonymous: to the sign-in page
    assert client_for(viewer).post(url, {"recipe": json.dumps(recipe)}).status_code == 403
    assert client_for(outsider).get(url).status_code == 404
    assert client_for(author).put(url).status_code == 405
    assert not Experiment.objects.exists()
    experiment = experiment_create(project=catalogue, user=author, recipe=recipe, enqueue=False)
    detail = reverse("experiments:detail", args=[experiment.pk])
    assert client_for(outsider).get(detail).status_code == 404


def test_the_list_and_the_live_part(catalogue, author, viewer, client_for, recipe):
    experiment = experiment_create(project=catalogue, user=author, recipe=recipe, enqueue=False)
    client = client_for(viewer)
    listing = client.get(reverse("experiments:list", args=[catalogue.slug])).content.decode()
    assert f"#{experiment.pk} Clarify and disambiguate, tiny" in listing
    assert "New experiment" not in listing  # a viewer cannot start one
    detail = reverse("experiments:detail", args=[experiment.pk])
    live = client.get(detail, **HTMX_HEADERS, HTTP_HX_TRIGGER="experiment-live")
    assert live.content.decode().lstrip().startswith('<div id="experiment-live"')
    assert "HX-Refresh" not in live  # still running: keep polling
    experiment.status = "succeeded"
    experiment.save()
    ended = client.get(detail, **HTMX_HEADERS, HTTP_HX_TRIGGER="experiment-live")
    assert ended["HX-Refresh"] == "true"
