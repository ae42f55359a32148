"""Fixtures shared by the environment tests: a spec, and an environment imported from it."""

import json
from pathlib import Path

import pytest

from apps.environments.services import environment_import

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "samples").glob("*.json"))


@pytest.fixture
def example_spec() -> dict:
    """A valid spec: the first sample."""
    return json.loads(SAMPLES[0].read_text())


@pytest.fixture
def environment(project, author, example_spec):
    return environment_import(project=project, spec=example_spec, user=author)
