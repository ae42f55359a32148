"""Fixtures for the runs tests: the sample environments, imported and marked valid."""

import json
import time
from pathlib import Path

import pytest

from apps.environments.models import Environment, EnvironmentStatus
from apps.environments.services import environment_import

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "samples").glob("*.json"))


def import_valid(project, user, spec: dict) -> Environment:
    """Import a spec and mark it valid (the samples pass validation; its own tests prove
    that, and running it here would only slow these tests down)."""
    environment = environment_import(project=project, spec=spec, user=user)
    Environment.objects.filter(pk=environment.pk).update(status=EnvironmentStatus.VALID)
    environment.refresh_from_db()
    return environment


@pytest.fixture
def sample_environments(project, author) -> list[Environment]:
    return [import_valid(project, author, json.loads(path.read_text())) for path in SAMPLES]


@pytest.fixture
def sample_task_count(sample_environments) -> int:
    return sum(env.tasks.count() for env in sample_environments)


@pytest.fixture
def claims_age(monkeypatch):
    """Move the clock of the workers' cache of batches and tasks on by ``seconds`` (its
    entries are read again once ``claims.MAX_AGE_S`` old): ``claims_age(claims.MAX_AGE_S)``
    is the moment an edit is seen at the latest."""
    from apps.runs.services import claims

    shift = 0.0

    def age(seconds: float) -> None:
        nonlocal shift
        shift += seconds
        monkeypatch.setattr(claims, "_clock", lambda: time.monotonic() + shift)

    return age
