"""Fixtures for the capability tests: a seeded catalogue and specs whose tags we control."""

import copy
import json
from pathlib import Path

import pytest

from apps.capabilities.models import Capability
from apps.capabilities.services import capability_catalogue_seed
from apps.environments.models import Environment, ValidationReport

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "acme-ops.json"


@pytest.fixture
def catalogue(project):
    """The standard catalogue in ``project``: slug -> Capability."""
    capability_catalogue_seed(project=project)
    return {c.slug: c for c in Capability.objects.filter(project=project)}


@pytest.fixture
def make_spec():
    """A valid spec (the acme-ops sample) with each task's capabilities and split set here,
    so that the tests do not depend on how the sample happens to tag its tasks."""
    base = json.loads(SAMPLE.read_text())

    def make(tags: dict[str, list[str]], splits: dict[str, str] | None = None) -> dict:
        spec = copy.deepcopy(base)
        assert sorted(t["key"] for t in spec["tasks"]) == sorted(tags), "sample tasks changed"
        for task in spec["tasks"]:
            task["capabilities"] = tags[task["key"]]
            if splits and task["key"] in splits:
                task["split"] = splits[task["key"]]
        return spec

    return make


def set_validation(environment, *, status, sensitivities=None):
    """Give an environment a status and, if ``sensitivities`` (task key -> value) is given, a
    latest validation report carrying them, as the validation job would."""
    report = None
    if sensitivities is not None:
        report = ValidationReport.objects.create(
            environment=environment,
            revision=environment.revision,
            valid=status in ("valid", "approved"),
            problems=[],
            tasks=[{"key": key, "sensitivity": value} for key, value in sensitivities.items()],
        )
    Environment.objects.filter(pk=environment.pk).update(status=status, latest_validation=report)
    environment.refresh_from_db()
    return environment
