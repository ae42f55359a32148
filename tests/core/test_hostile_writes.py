"""Hostile values into every write endpoint of the API: 2xx or 4xx, never a 5xx (issue 10).

For each POST/PUT/PATCH operation of the schema, Hypothesis builds a body from the
operation's own field names with hostile values — NUL, lone surrogates, huge text, deep
nesting, numbers past every column's range, wrong types — and sends it as an admin through a
real API token. On PostgreSQL when ``DATABASE_URL`` says so (CI), where NUL used to be a
``DataError``; on SQLite otherwise. Example counts are bounded so it runs in seconds.
"""

import json
import re
from pathlib import Path

import pytest
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.accounts.models import Role
from apps.accounts.services import api_token_create
from apps.datasets.services import dataset_create
from apps.environments.services import environment_import
from tests.factories import MembershipFactory, ProjectFactory, UserFactory

pytestmark = pytest.mark.django_db

SAMPLE = sorted((Path(__file__).resolve().parents[2] / "samples").glob("*.json"))[0]
SCHEMA = SchemaGenerator().get_schema(request=None, public=True)


def _write_operations():
    found = []
    for path, methods in SCHEMA["paths"].items():
        for method in ("post", "put", "patch"):
            operation = methods.get(method)
            if operation is None:
                continue
            fields = []
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            if body and "$ref" in body["schema"]:
                name = body["schema"]["$ref"].rsplit("/", 1)[-1]
                fields = sorted(SCHEMA["components"]["schemas"][name].get("properties", {}))
            found.append((method, path, fields))
    return found


OPERATIONS = _write_operations()

hostile_text = st.sampled_from(
    ["\x00", "a\x00b", "\ud800", "x\udfff", "\ud800\x00", "x" * 70_000, "", " ", "%00", "\u202e"]
)
hostile_number = st.sampled_from([2**31, 2**63, -(2**63) - 1, 10**30, -1, 0, 1.5, 1e308])
deep = st.integers(min_value=60, max_value=200).map(lambda n: json.loads("[" * n + "]" * n))
hostile_value = st.recursive(
    st.one_of(hostile_text, hostile_number, st.booleans(), st.none(), deep),
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(hostile_text, children, max_size=2),
    ),
    max_leaves=4,
)


def body_for(fields):
    if not fields:
        return st.one_of(st.just({}), st.dictionaries(hostile_text, hostile_value, max_size=2))
    return st.one_of(
        st.fixed_dictionaries({}, optional={name: hostile_value for name in fields}),
        hostile_value,
    )


@pytest.fixture
def world(db):
    project = ProjectFactory(name="Hostile", slug="hostile")
    user = UserFactory(username="hostile-admin")
    MembershipFactory(project=project, user=user, role=Role.ADMIN)
    environment = environment_import(
        project=project, spec=json.loads(SAMPLE.read_text()), user=user
    )
    task = environment.tasks.first()
    ids = {
        "project": project.pk,
        "environment": environment.pk,
        "task": task.pk,
        "grader": task.graders.first().pk,
        "tool": environment.tools.first().pk,
        "record": environment.records.first().pk,
        "dataset": dataset_create(project=project, name="Hostile set", user=user).pk,
    }
    return api_token_create(user=user, name="hostile")[1], ids


def _url(path: str, ids: dict) -> str:
    """Point ``{id}`` at a real object of the right kind (by the segment before it)."""
    kinds = {
        "projects": "project", "environments": "environment", "tasks": "task",
        "graders": "grader", "tools": "tool", "records": "record", "datasets": "dataset",
    }  # fmt: skip

    def fill(match):
        segment = match.string[: match.start()].rstrip("/").rsplit("/", 1)[-1]
        return str(ids.get(kinds.get(segment, ""), 1))

    return re.sub(r"\{[a-z_]+\}", fill, path)


@pytest.mark.parametrize(
    ("method", "path", "fields"), OPERATIONS, ids=[f"{m} {p}" for m, p, _ in OPERATIONS]
)
def test_hostile_bodies_never_get_a_server_error(client, world, method, path, fields):
    token, ids = world
    url = _url(path, ids)

    @settings(
        max_examples=8,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(body=body_for(fields))
    def send(body):
        text = json.dumps(body)  # surrogates and NUL travel as \\u escapes, as a client sends
        response = getattr(client, method)(
            url, text, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
        )
        assert response.status_code < 500, (body, response.content[:300])
        if response.status_code >= 400:
            assert set(response.json()) == {"message", "details"}

    send()
