import io
import json

import pytest
from django.core.management import CommandError, call_command

from apps.experiments.models import Experiment


def test_the_command_starts_an_experiment_from_a_file(catalogue, author, recipe, tmp_path):
    path = tmp_path / "recipe.json"
    path.write_text(json.dumps(recipe))
    call_command("experiment", recipe=str(path), project=catalogue.slug, user=author.username)
    experiment = Experiment.objects.get()
    assert experiment.created_by == author
    assert experiment.stages.count() == 11


def test_a_bad_recipe_file_is_refused_naming_the_field(catalogue, recipe, tmp_path):
    recipe["held_out"] = {"family": "support-desk"}
    path = tmp_path / "recipe.json"
    path.write_text(json.dumps(recipe))
    with pytest.raises(CommandError, match=r"^held_out\.family: "):
        call_command("experiment", recipe=str(path), project=catalogue.slug)
    path.write_text("[")
    with pytest.raises(CommandError, match="Cannot read the recipe"):
        call_command("experiment", recipe=str(path), project=catalogue.slug)
    assert not Experiment.objects.exists()


def test_sync_works_the_stages_here_until_people_are_needed(catalogue, recipe, tmp_path):
    recipe["review"] = {"policy": "human"}
    recipe["generator"].update(families=["meeting-coordination"], count=1)
    recipe["held_out"] = {"seeds": 1}
    path = tmp_path / "recipe.json"
    path.write_text(json.dumps(recipe))
    out = io.StringIO()
    call_command("experiment", recipe=str(path), project=catalogue.slug, sync=True, stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[1].split() == ["synthesis", "succeeded"]
    assert lines[2].split() == ["teacher", "succeeded"]
    assert lines[-1] == (
        "Experiment: waiting. Curation: Review the teacher's demonstrations in the queue."
    )
    assert Experiment.objects.get().status == "waiting"
