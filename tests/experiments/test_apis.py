from apps.experiments.models import Experiment
from apps.experiments.services import experiment_create


def test_post_starts_an_experiment_from_the_recipe_body(catalogue, author, api_client_for, recipe):
    response = api_client_for(author).post(
        f"/api/v1/projects/{catalogue.pk}/experiments/", recipe, format="json"
    )
    assert response.status_code == 201
    body = response.json()
    assert body["name"] == "Clarify and disambiguate, tiny"
    assert [s["stage"] for s in body["stages"]][:3] == ["synthesis", "teacher", "curation"]
    assert Experiment.objects.get().pk == body["id"]


def test_a_bad_recipe_is_a_400_naming_the_field(catalogue, author, api_client_for, recipe):
    recipe["evaluation"] = {"k": 99}
    response = api_client_for(author).post(
        f"/api/v1/projects/{catalogue.pk}/experiments/", recipe, format="json"
    )
    assert response.status_code == 400
    assert response.json()["details"]["fields"] == {
        "evaluation.k": ["Give a whole number from 1 to 16."]
    }
    assert not Experiment.objects.exists()


def test_refusals(catalogue, author, viewer, outsider, api_client_for, recipe):
    url = f"/api/v1/projects/{catalogue.pk}/experiments/"
    assert api_client_for().post(url, recipe, format="json").status_code in (401, 403)
    assert api_client_for(viewer).post(url, recipe, format="json").status_code == 403
    assert api_client_for(outsider).post(url, recipe, format="json").status_code == 404
    assert not Experiment.objects.exists()
    experiment = experiment_create(project=catalogue, user=author, recipe=recipe, enqueue=False)
    assert api_client_for(outsider).get(f"/api/v1/experiments/{experiment.pk}/").status_code == 404
    listed = api_client_for(viewer).get(url).json()
    assert [e["id"] for e in listed["results"]] == [experiment.pk]
