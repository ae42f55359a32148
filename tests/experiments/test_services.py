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


def test_the_sweep_sends_again_an_active_experiment_nothing_advanced(
    catalogue, author, recipe, settings, monkeypatch
):
    from datetime import timedelta

    from django.utils import timezone

    from apps.experiments import services
    from apps.experiments.models import ExperimentStatus

    sent = []
    monkeypatch.setattr(services, "send_task", lambda name, *args: sent.append(args) or True)
    settings.EXPERIMENT_STALLED_S = 120
    now = timezone.now()
    stalled, live, ended = (
        experiment_create(project=catalogue, user=author, recipe=recipe, enqueue=False)
        for _ in range(3)
    )
    Experiment.objects.filter(pk=stalled.pk).update(
        status=ExperimentStatus.RUNNING, updated_at=now - timedelta(seconds=121)
    )
    Experiment.objects.filter(pk=live.pk).update(updated_at=now - timedelta(seconds=60))
    Experiment.objects.filter(pk=ended.pk).update(
        status=ExperimentStatus.SUCCEEDED, updated_at=now - timedelta(days=1)
    )
    assert services.experiments_sweep(now=now) == [stalled.pk]
    assert sent == [(stalled.pk,)]
    # sent once: the sweep touched it, so the next one waits for another stalled period
    assert services.experiments_sweep(now=now + timedelta(seconds=60)) == []
    later = services.experiments_sweep(now=now + timedelta(seconds=121))
    assert sorted(later) == sorted([stalled.pk, live.pk])  # the live one went quiet too


def test_each_advance_touches_the_experiment_so_a_live_one_is_not_swept(
    catalogue, author, recipe, settings, monkeypatch
):
    from datetime import timedelta

    from django.utils import timezone

    from apps.experiments import services
    from apps.experiments.advance import experiment_advance

    monkeypatch.setattr(services, "send_task", lambda name, *args: True)
    experiment = experiment_create(project=catalogue, user=author, recipe=recipe, enqueue=False)
    long_ago = timezone.now() - timedelta(days=1)
    Experiment.objects.filter(pk=experiment.pk).update(updated_at=long_ago)
    monkeypatch.setattr("apps.experiments.advance.STEPS", {})  # advance only touches it
    ExperimentStage.objects.filter(experiment=experiment).update(status=StageStatus.SUCCEEDED)
    experiment_advance(experiment_id=experiment.pk)
    assert Experiment.objects.get(pk=experiment.pk).updated_at > long_ago
    assert services.experiments_sweep() == []


def test_beat_runs_the_experiment_sweep():
    from django.utils.module_loading import import_string

    from coworkenv_web.settings import CELERY_BEAT_SCHEDULE

    task = CELERY_BEAT_SCHEDULE["sweep-experiments"]["task"]
    assert import_string(task).name == task
