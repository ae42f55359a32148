"""Fixtures for the curation tests: an environment, a finished oracle TEACHER batch and the
demonstrations it produced."""

import json
from pathlib import Path

import pytest

from apps.curation.models import Demonstration
from apps.environments.models import Environment, EnvironmentStatus
from apps.environments.services import environment_import
from apps.runs.models import Executor, RunRole
from apps.runs.services import (
    BatchSettings,
    TaskSelection,
    run_batch_create,
    run_batch_execute_inline,
)

# A copy of the design's reference example (../shared/reference/), kept beside the tests so
# the suite does not depend on files outside the repository.
EXAMPLE = Path(__file__).resolve().parent / "example-environment.json"
ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "samples").glob("*.json"))


def spec_document(*, eval_tasks: bool = False) -> dict:
    """The reference example: a booking, a clarification and a silent calendar change. Its
    third task is an eval task; the review tests need three reviewable items, so unless
    ``eval_tasks`` is set every task is a train task (eval tasks never become
    demonstrations: see test_services_demonstrations)."""
    doc = json.loads(EXAMPLE.read_text())
    if not eval_tasks:
        for task in doc["tasks"]:
            task["split"] = "train"
    return doc


def import_valid(project, user, spec: dict) -> Environment:
    environment = environment_import(project=project, spec=spec, user=user)
    Environment.objects.filter(pk=environment.pk).update(status=EnvironmentStatus.VALID)
    environment.refresh_from_db()
    return environment


def teacher_batch_run(project, user, environment, *, trials=1, role=RunRole.TEACHER, **kw):
    batch = run_batch_create(
        project=project,
        user=user,
        role=role,
        selection=TaskSelection(environments=(environment.pk,)),
        settings=BatchSettings(trials=trials, **kw),
        executor=Executor.INLINE,
    )
    run_batch_execute_inline(batch=batch)
    return batch


@pytest.fixture
def curation_environment(project, author) -> Environment:
    return import_valid(project, author, spec_document())


@pytest.fixture
def teacher_batch(project, author, curation_environment):
    return teacher_batch_run(project, author, curation_environment)


@pytest.fixture
def demonstrations(teacher_batch) -> list[Demonstration]:
    return list(
        Demonstration.objects.filter(run__batch=teacher_batch)
        .select_related("current_version")
        .order_by("id")
    )


@pytest.fixture
def sample_environments(project, author) -> list[Environment]:
    return [import_valid(project, author, json.loads(path.read_text())) for path in SAMPLES]
