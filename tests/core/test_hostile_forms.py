"""Hostile values in every form the pages post: never a server error (issue 10).

Each page that takes a POST gets, from Hypothesis, form fields named as on the page (read from
its GET, plus common names) holding hostile values: huge text, Unicode digits, numbers past
every column, JSON that escapes NUL or a lone surrogate, deep JSON, NaN. The poster is an
admin of the project, so every permission check passes. A raw NUL never gets this far: the
input-screening middleware refuses it (see test_hostile_input). Bounded example counts.
"""

import json
import re
from pathlib import Path

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.accounts.models import Membership
from apps.accounts.services import api_token_create
from apps.capabilities.services import capability_create
from apps.core.services import job_create
from apps.curation.models import Demonstration
from apps.datasets.services import dataset_create
from apps.environments.services import environment_import
from apps.llm.models import ModelEndpoint
from tests.curation.conftest import import_valid, spec_document, teacher_batch_run

pytestmark = pytest.mark.django_db

SAMPLE = sorted((Path(__file__).resolve().parents[2] / "samples").glob("*.json"))[0]
# Signing out would end the session the other examples post in.
SKIP = {"accounts:logout"}
COMMON_FIELDS = ["name", "slug", "description", "text", "data", "seed", "role", "username"]


def _routes(resolver=None, prefix="", namespace=""):
    resolver = resolver or get_resolver()
    for pattern in resolver.url_patterns:
        if isinstance(pattern, URLResolver):
            route = str(pattern.pattern)
            if route.startswith(("api/", "admin/")):
                continue
            space = pattern.namespace or namespace
            yield from _routes(pattern, prefix + route, space)
        elif isinstance(pattern, URLPattern):
            name = f"{namespace}:{pattern.name}" if namespace else pattern.name
            if name not in SKIP:
                yield prefix + str(pattern.pattern), name


ROUTES = sorted(set(_routes()))

hostile = st.sampled_from(
    [
        "x" * 70_000,
        "\u00b2",
        "99999999999999999999999",
        "-1",
        "1e309",
        "NaN",
        "",
        "\ufffd",
        "[" * 3000 + "]" * 3000,
        '{"id": "a\\u0000b"}',
        '{"id": "a", "name": "\\ud800"}',
        json.dumps({"schema": "coworkenv.environment/v1", "name": "\\u0000"}),
    ]
)


class World:
    """The objects a route names, made when a route first needs them (a run batch is not
    cheap; most routes need none)."""

    def __init__(self, project, admin):
        self.project, self.admin = project, admin
        self.made = {"p": project.slug, "services": "contacts"}

    def _environment(self):
        environment = environment_import(
            project=self.project, spec=json.loads(SAMPLE.read_text()), user=self.admin
        )
        task = environment.tasks.first()
        self.made.update(
            environments=environment.pk,
            tasks=task.pk,
            graders=task.graders.first().pk,
            tools=environment.tools.first().pk,
            records=environment.records.first().pk,
        )

    def _runs(self):
        environment = import_valid(self.project, self.admin, spec_document())
        batch = teacher_batch_run(self.project, self.admin, environment)
        run = batch.runs.order_by("pk").first()
        demonstration = Demonstration.objects.filter(run__batch=batch).order_by("pk").first()
        self.made.update(batches=batch.pk, runs=run.pk, demonstrations=demonstration.pk)

    def get(self, kind: str):
        if kind not in self.made:
            project, admin = self.project, self.admin
            if kind in {"environments", "tasks", "graders", "tools", "records"}:
                self._environment()
            elif kind in {"batches", "runs", "demonstrations"}:
                self._runs()
            elif kind == "capabilities":
                self.made[kind] = capability_create(project=project, user=admin, name="Ask").pk
            elif kind == "datasets":
                self.made[kind] = dataset_create(project=project, name="Fuzzed", user=admin).pk
            elif kind == "jobs":
                self.made[kind] = job_create(project=project, kind="t", title="F", total=1).pk
            elif kind == "members":
                self.made[kind] = Membership.objects.get(user=admin).pk
            elif kind == "tokens":
                self.made[kind] = api_token_create(user=admin, name="fuzz")[0].pk
            elif kind == "models":
                self.made[kind] = ModelEndpoint.objects.create(
                    project=project, name="loop", base_url="http://127.0.0.1:9/v1", model="m"
                ).pk
        return self.made.get(kind, 1)


@pytest.fixture
def world(project, admin):
    return World(project, admin)


def _url(route: str, ids: World) -> str:
    route = route.lstrip("^").rstrip("$")

    def fill(match):
        before = match.string[: match.start()].rstrip("/").rsplit("/", 1)[-1]
        if match.group("choices"):
            return match.group("choices").split("|")[0]
        return str(ids.get(before))

    pattern = r"<(?:\w+:)?\w+>|\(\?P<\w+>(?:\[0-9\]\+|(?P<choices>[a-z|]+))\)"
    return "/" + re.sub(pattern, fill, route)


def _fields(client, url) -> list[str]:
    response = client.get(url)
    if response.status_code != 200 or "text/html" not in response.get("Content-Type", ""):
        return COMMON_FIELDS
    names = re.findall(r'<(?:input|textarea|select)[^>]*\bname="([^"]+)"', response.text)
    return sorted(set(names) - {"csrfmiddlewaretoken"} | set(COMMON_FIELDS))


@pytest.mark.parametrize(("route", "name"), ROUTES, ids=[name for _, name in ROUTES])
def test_hostile_form_posts_never_get_a_server_error(client, admin, world, route, name):
    client.force_login(admin)
    url = _url(route, world)
    fields = _fields(client, url)

    @settings(
        max_examples=3,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(data=st.fixed_dictionaries({}, optional={field: hostile for field in fields}))
    def post(data):
        response = client.post(url, data)
        assert response.status_code < 500, (url, data)

    post()
