import pytest

from apps.experiments.models import STAGE_ORDER, Experiment, ExperimentStage, StageStatus
from apps.experiments.recipe import RecipeError
from apps.experiments.services import experiment_create
from apps.llm.models import ModelEndpoint


def test_create_stores_the_parsed_recipe_and_one_pending_record_per_stage(
    catalogue, author, recipe, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as callbacks:
        experiment = experiment_create(project=catalogue, user=author, recipe=recipe)
    assert experiment.name == "Clarify and disambiguate, tiny"
    assert experiment.recipe["schema"] == "coworkenv.experiment/v1"
    assert experiment.recipe["generator"]["families"] == ["meeting-coordination", "support-desk"]
    stages = list(experiment.stages.order_by("position").values_list("stage", "status"))
    assert stages == [(stage, StageStatus.PENDING) for stage in STAGE_ORDER]
    assert len(callbacks) == 1  # the advance is queued once the transaction commits


@pytest.mark.parametrize(
    ("change", "path"),
    [
        ({"capabilities": ["no-such-capability"]}, "capabilities"),
        ({"teacher": {"kind": "endpoint", "endpoint": "gone"}}, "teacher.endpoint"),
        ({"student_endpoint": "gone"}, "student_endpoint"),
        ({"generator": {"count": 0}}, "generator.count"),
    ],
)
def test_a_bad_recipe_creates_nothing(catalogue, author, recipe, change, path):
    recipe.update(change)
    with pytest.raises(RecipeError) as caught:
        experiment_create(project=catalogue, user=author, recipe=recipe)
    assert caught.value.path == path
    assert not Experiment.objects.exists()
    assert not ExperimentStage.objects.exists()


def test_names_resolve_in_the_experiments_project_only(catalogue, other_project, author, recipe):
    ModelEndpoint.objects.create(
        project=other_project, name="theirs", base_url="http://127.0.0.1:9/v1", model="m"
    )
    recipe["student_endpoint"] = "theirs"
    with pytest.raises(RecipeError, match="No model endpoint named “theirs”"):
        experiment_create(project=catalogue, user=author, recipe=recipe)
    assert not Experiment.objects.exists()
