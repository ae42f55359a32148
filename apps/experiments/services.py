"""Writes of experiments: create one from a recipe (checked against the project: nothing is
created when a name does not resolve), queue its advance once committed, and send again the
advance of one whose message was lost."""

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.capabilities.models import Capability
from apps.core.exceptions import ApplicationError
from apps.core.services import send_task
from apps.experiments.models import (
    ACTIVE_EXPERIMENT_STATUSES,
    STAGE_ORDER,
    Experiment,
    ExperimentStage,
    ExperimentStatus,
)
from apps.experiments.recipe import Recipe, RecipeError, recipe_parse
from apps.llm.models import ModelEndpoint

ADVANCE_TASK = "apps.experiments.tasks.advance_experiment_task"


def _endpoint_names(recipe: Recipe) -> dict[str, str]:
    """Each recipe field that names an endpoint, with the name."""
    named = {
        "generator.endpoint": recipe.generator.endpoint,
        "teacher.endpoint": recipe.teacher.endpoint,
        "student_endpoint": recipe.student_endpoint,
    }
    return {path: name for path, name in named.items() if name}


def recipe_resolve(*, project, recipe: Recipe) -> dict:
    """The project's capabilities and endpoints the recipe names, or ``RecipeError`` naming
    the field whose name does not resolve."""
    found = {
        c.slug: c
        for c in Capability.objects.filter(
            project=project, slug__in=recipe.capabilities, archived_at__isnull=True
        )
    }
    missing = [slug for slug in recipe.capabilities if slug not in found]
    if missing:
        raise RecipeError("capabilities", f"No capability “{missing[0]}” in this project.")
    endpoints = {}
    for path, name in _endpoint_names(recipe).items():
        endpoint = ModelEndpoint.objects.filter(project=project, name=name).first()
        if endpoint is None:
            raise RecipeError(path, f"No model endpoint named “{name}” in this project.")
        endpoints[path] = endpoint
    return {"capabilities": [found[slug] for slug in recipe.capabilities], "endpoints": endpoints}


def experiment_create(
    *, project, user, recipe: dict, previous: Experiment | None = None, enqueue: bool = True
) -> Experiment:
    """A pending experiment with one pending record per stage; ``RecipeError`` (naming the
    field) and nothing created when the recipe is bad. ``enqueue=False`` leaves it for the
    caller to advance in process (the command's --sync, tests)."""
    parsed = recipe_parse(recipe)
    recipe_resolve(project=project, recipe=parsed)
    with transaction.atomic():
        experiment = Experiment(
            project=project,
            name=parsed.name,
            recipe=parsed.to_dict(),
            previous=previous,
            created_by=user,
        )
        experiment.full_clean(exclude=["project", "previous", "created_by"])
        experiment.save()
        ExperimentStage.objects.bulk_create(
            ExperimentStage(experiment=experiment, stage=stage, position=i)
            for i, stage in enumerate(STAGE_ORDER)
        )
        if enqueue:
            transaction.on_commit(lambda: experiment_enqueue(experiment_id=experiment.pk))
    return experiment


def experiment_enqueue(*, experiment_id: int) -> bool:
    return send_task(ADVANCE_TASK, experiment_id)


def experiment_continue(*, experiment: Experiment) -> None:
    """Advance again once people have done what the experiment waits for (the review
    queue); an experiment that ended stays as it is."""
    if experiment.status in (ExperimentStatus.SUCCEEDED, ExperimentStatus.FAILED):
        raise ApplicationError(f"This experiment has already {experiment.status}.")
    pk = experiment.pk
    transaction.on_commit(lambda: experiment_enqueue(experiment_id=pk))


def experiments_sweep(*, now=None) -> list[int]:
    """What Celery beat runs every JOB_SWEEP_EVERY_S: an active experiment that nothing
    advanced for EXPERIMENT_STALLED_S (each advance touches it; a live one every
    EXPERIMENT_POLL_S) is sent again. Touching it first with a conditional UPDATE makes two
    sweepers send it once."""
    now = now or timezone.now()
    stalled = (
        Experiment.objects.filter(
            status__in=ACTIVE_EXPERIMENT_STATUSES,
            updated_at__lt=now - timedelta(seconds=settings.EXPERIMENT_STALLED_S),
        )
        .order_by("pk")
        .values_list("pk", "updated_at")
    )
    sent = []
    for pk, seen in stalled:
        if Experiment.objects.filter(pk=pk, updated_at=seen).update(updated_at=now):
            experiment_enqueue(experiment_id=pk)
            sent.append(pk)
    return sent
