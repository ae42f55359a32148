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


def test_continue_queues_a_waiting_experiment_once_committed(
    catalogue, author, viewer, outsider, client_for, recipe, django_capture_on_commit_callbacks
):
    experiment = experiment_create(project=catalogue, user=author, recipe=recipe, enqueue=False)
    Experiment.objects.filter(pk=experiment.pk).update(status="waiting")
    url = reverse("experiments:continue", args=[experiment.pk])
    assert client_for(outsider).post(url).status_code == 404
    assert client_for(viewer).post(url).status_code == 403
    assert client_for(author).get(url).status_code == 405
    with django_capture_on_commit_callbacks() as callbacks:
        response = client_for(author).post(url, **HTMX_HEADERS)
    assert response["HX-Redirect"] == reverse("experiments:detail", args=[experiment.pk])
    assert len(callbacks) == 1
    Experiment.objects.filter(pk=experiment.pk).update(status="succeeded")
    with django_capture_on_commit_callbacks() as callbacks:
        client_for(author).post(url)
    assert callbacks == []  # an ended experiment is left as it is


def test_the_results_files_before_any_student_batch(
    catalogue, author, outsider, client_for, recipe
):
    experiment = experiment_create(project=catalogue, user=author, recipe=recipe, enqueue=False)
    csv_url = reverse("experiments:results_csv", args=[experiment.pk])
    response = client_for(author).get(csv_url)
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response.content.decode().splitlines() == [
        "group,arm,tasks,runs,mean_score,pass_rate,strict_rate,pass_at_2,pass_hat_2,"
        "delta_score,delta_score_low,delta_score_high,delta_pass_rate,delta_pass_rate_low,"
        "delta_pass_rate_high"
    ]
    markdown = client_for(author).get(reverse("experiments:results_md", args=[experiment.pk]))
    assert markdown.content.decode().startswith("| Group | Arm | n |")
    assert client_for(outsider).get(csv_url).status_code == 404
    page = client_for(author).get(reverse("experiments:detail", args=[experiment.pk]))
    assert 'data-testid="results"' not in page.content.decode()


def test_the_form_offers_the_shipped_recipes_and_prefills_one(catalogue, author, client_for):
    client = client_for(author)
    url = reverse("experiments:create", args=[catalogue.slug])
    page = client.get(url).content.decode()
    assert 'href="?recipe=laptop"' in page and 'href="?recipe=gpu-small"' in page
    laptop = client.get(url, {"recipe": "laptop"})
    shipped = laptop.context["form"].initial["recipe"]
    assert json.loads(shipped)["sft"] == {"preset": "laptop-cpu"}
    # an unknown name leaves the example in place; nothing is read from elsewhere
    other = client.get(url, {"recipe": "../settings"}).context["form"]
    assert "recipe" not in other.initial
    response = client.post(url, {"recipe": shipped})
    assert response.status_code == 302
    assert Experiment.objects.get().name.startswith("Laptop")
