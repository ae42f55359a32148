"""Schemathesis against the API's own schema (issue 10): for a few deterministic examples per
operation, no answer is a server error and every answer matches the response schema that the
operation declares (status code, content type and body).

Requests go through the WSGI application in process, authenticated with a real API token of
an admin of a project that has an environment and a dataset, so that operations reach past
the permission checks.
"""

import json
from pathlib import Path

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from apps.accounts.models import Role
from apps.accounts.services import api_token_create
from apps.datasets.services import dataset_create
from apps.environments.services import environment_import
from tests.factories import MembershipFactory, ProjectFactory, UserFactory

SAMPLE = sorted((Path(__file__).resolve().parents[2] / "samples").glob("*.json"))[0]

schema = schemathesis.openapi.from_dict(SchemaGenerator().get_schema(request=None, public=True))
schema.app = get_wsgi_application()
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@pytest.fixture
def in_process_requests():
    """As Django's test client does: requests do not close the test's database connection."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def token(db, in_process_requests):
    project = ProjectFactory(name="Fuzzed", slug="fuzzed")
    user = UserFactory(username="fuzz-admin")
    MembershipFactory(project=project, user=user, role=Role.ADMIN)
    environment_import(project=project, spec=json.loads(SAMPLE.read_text()), user=user)
    dataset_create(project=project, name="Fuzzed set", user=user)
    return api_token_create(user=user, name="schemathesis")[1]


@schema.parametrize()
@settings(
    max_examples=5,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_api_answers_match_the_schema(case, token):
    case.call_and_validate(headers={"Authorization": f"Bearer {token}"}, checks=CHECKS)
