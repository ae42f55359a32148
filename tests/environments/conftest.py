"""Fixtures shared by the environment tests: a spec, and an environment imported from it."""

import json
from pathlib import Path

import pytest

from apps.accounts.services import api_token_create, api_token_revoke
from apps.environments.models import Environment, EnvironmentStatus
from apps.environments.services import environment_import
from apps.environments.services.validation import environment_validate
from coworkenv_engine.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "samples").glob("*.json"))


@pytest.fixture
def example_spec() -> dict:
    """A valid spec: the first sample."""
    return json.loads(SAMPLES[0].read_text())


@pytest.fixture
def environment(project, author, example_spec):
    return environment_import(project=project, spec=example_spec, user=author)


@pytest.fixture
def served(transactional_db, project, author, other_project, outsider):
    """A validated environment and a draft one in ``project``, a validated one in the other
    project; tokens of a member, an outsider and a revoked member token."""
    spec = json.loads(SAMPLES[0].read_text())
    valid = environment_import(project=project, spec=spec, user=author)
    report = environment_validate(environment=valid)
    assert report.valid, report.problems
    draft = environment_import(
        project=project, spec=json.loads(SAMPLES[1].read_text()), user=author
    )
    elsewhere = environment_import(
        project=other_project, spec=json.loads(SAMPLES[2].read_text()), user=outsider
    )
    Environment.objects.filter(pk=elsewhere.pk).update(status=EnvironmentStatus.VALID)
    _, member_token = api_token_create(user=author, name="trainer")
    _, outsider_token = api_token_create(user=outsider, name="theirs")
    revoked, revoked_token = api_token_create(user=author, name="old")
    api_token_revoke(token=revoked)
    valid.refresh_from_db()
    return {
        "valid": valid,
        "draft": draft,
        "spec": load_spec(spec),
        "member": member_token,
        "outsider": outsider_token,
        "revoked": revoked_token,
    }
