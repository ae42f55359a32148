"""No existence oracle: for every page and API route that takes an id (or a project slug),
an outsider gets byte for byte the same answer (status and body) for another project's real
id as for an id that does not exist, whatever the method.

The routes are read from the URL configuration, so a new route is covered (or this test
fails asking how to fill its ids) without anyone remembering to add it.
"""

import json
from pathlib import Path

import pytest
from django.db import transaction
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from rest_framework.test import APIClient

from apps.accounts.models import Membership, Project, Role
from apps.accounts.services import api_token_create
from apps.capabilities.models import Capability
from apps.core.models import Job
from apps.curation.models import Demonstration, ReviewReasonTag
from apps.datasets.models import Dataset, DatasetVersion
from apps.environments.models import Environment, EnvironmentStatus
from apps.environments.services import environment_import
from apps.experiments.models import Experiment
from apps.experiments.recipe import recipe_parse
from apps.llm.models import ModelEndpoint
from apps.runs.models import Executor, Run, RunBatch
from apps.runs.services import run_batch_create, run_batch_execute_inline
from apps.serving.models import MODEL_SERVER_KIND, ModelServer
from apps.synthesis.models import SynthesisJob, SynthesisSlot
from apps.training.models import TrainedModel, TrainingJob
from tests.factories import MembershipFactory, ProjectFactory, UserFactory

SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "acme-ops.json"
MISSING = 987654321
MISSING_SLUG = "no-such-project"


def named_routes(*, with_parameters: bool) -> list[tuple[str, str]]:
    """(name, route) of every named route (only those with parameters if asked), admin's
    aside."""
    found = []

    def walk(resolver, prefix, namespace):
        for entry in resolver.url_patterns:
            if isinstance(entry, URLResolver):
                inner = namespace
                if entry.namespace:
                    inner = f"{namespace}:{entry.namespace}" if namespace else entry.namespace
                walk(entry, prefix + str(entry.pattern), inner)
            elif isinstance(entry, URLPattern) and entry.name:
                route = prefix + str(entry.pattern).lstrip("^")
                has_parameters = bool(entry.pattern.regex.groupindex)
                if (has_parameters or not with_parameters) and not route.startswith("admin/"):
                    found.append((f"{namespace}:{entry.name}" if namespace else entry.name, route))

    walk(get_resolver(), "", "")
    return sorted(found)


ROUTES = named_routes(with_parameters=True)

# Which object a route's id names, by the start of its route (first match wins).
API_OBJECTS = [
    ("api/v1/tokens/", "token"),
    ("api/v1/jobs/", "job"),
    ("api/v1/capabilities/", "capability"),
    ("api/v1/environments/", "environment"),
    ("api/v1/tasks/", "task"),
    ("api/v1/graders/", "grader"),
    ("api/v1/tools/", "tool"),
    ("api/v1/records/", "record"),
    ("api/v1/model-endpoints/", "endpoint"),
    ("api/v1/synthesis-jobs/", "synthesis"),
    ("api/v1/run-batches/", "batch"),
    ("api/v1/runs/", "run"),
    ("api/v1/demonstrations/", "demonstration"),
    ("api/v1/datasets/", "dataset"),
    ("api/v1/training-jobs/", "training_job"),
    ("api/v1/experiments/", "experiment"),
    ("api/v1/model-servers/", "model_server"),
]
PAGE_OBJECTS = [
    ("account/tokens/", "token"),
    ("jobs/", "job"),
    ("capabilities/", "capability"),
    ("environments/tasks/", "task"),
    ("environments/graders/", "grader"),
    ("environments/tools/", "tool"),
    ("environments/records/", "record"),
    ("environments/", "environment"),
    ("models/", "endpoint"),
    ("synthesis/slots/", "slot"),
    ("synthesis/", "synthesis"),
    ("runs/batches/", "batch"),
    ("runs/environment/", "environment"),
    ("runs/", "run"),
    ("demonstrations/", "demonstration"),
    ("review/tags/", "tag"),
    ("datasets/", "dataset"),
    ("training/models/", "trained_model"),
    ("training/", "training_job"),
    ("experiments/", "experiment"),
    ("serving/", "model_server"),
    ("p/<slug:slug>/members/", "membership"),
    ("p/<slug:slug>/review/", "demonstration"),
]


def _object_of(route: str) -> str | None:
    table = API_OBJECTS if route.startswith("api/") else PAGE_OBJECTS
    return next((what for start, what in table if route.startswith(start)), None)


def _build_world():
    """Another team's project with one of everything, and an outsider (admin elsewhere)."""
    project = ProjectFactory(name="Foreign team", slug="foreign-team")
    owner = MembershipFactory(
        project=project, user=UserFactory(username="owner-elsewhere"), role=Role.ADMIN
    ).user
    home = ProjectFactory(name="Outsider's own", slug="outsiders-own")
    outsider = MembershipFactory(
        project=home, user=UserFactory(username="oscar-outsider"), role=Role.ADMIN
    ).user

    environment = environment_import(
        project=project, spec=json.loads(SAMPLE.read_text()), user=owner
    )
    Environment.objects.filter(pk=environment.pk).update(status=EnvironmentStatus.VALID)
    task = environment.tasks.order_by("id").first()
    record = environment.records.order_by("id").first()
    batch = run_batch_create(project=project, user=owner, name="b", executor=Executor.INLINE)
    run_batch_execute_inline(batch=batch)
    run = Run.objects.filter(batch=batch).order_by("id").first()
    synthesis_job = Job.objects.create(project=project, kind="synthesis", title="s")
    synthesis = SynthesisJob.objects.create(
        project=project, job=synthesis_job, count=1, generator="template", prompt_version="v1"
    )
    dataset = Dataset.objects.create(project=project, name="d", created_by=owner)
    version_job = Job.objects.create(project=project, kind="dataset_version", title="v")
    token, _raw = api_token_create(user=owner, name="owner's laptop")
    version = DatasetVersion.objects.create(dataset=dataset, number=1, job=version_job)
    training_job = TrainingJob.objects.create(
        project=project,
        job=Job.objects.create(project=project, kind="training", title="t"),
        name="t",
        dataset_version=version,
        backend="command",
        base_model="m",
        callback_secret_sha256="0" * 64,
    )
    world = {
        "project": project,
        "home": home,
        "owner": owner,
        "outsider": outsider,
        "token": token,
        "job": batch.job,
        "capability": Capability.objects.create(project=project, slug="cap", name="Cap"),
        "environment": environment,
        "task": task,
        "grader": task.graders.order_by("id").first(),
        "tool": environment.tools.order_by("id").first(),
        "record": record,
        "endpoint": ModelEndpoint.objects.create(
            project=project, name="e", base_url="https://api.example.com/v1", model="m"
        ),
        "synthesis": synthesis,
        "slot": SynthesisSlot.objects.create(synthesis=synthesis, index=0, seed=0),
        "batch": batch,
        "run": run,
        "demonstration": Demonstration.objects.create(
            project=project,
            run_ref=run.pk,
            task=task,
            environment=environment,
            task_key=task.key,
        ),
        "tag": ReviewReasonTag.objects.create(project=project, name="t"),
        "dataset": dataset,
        "version": version,
        "training_job": training_job,
        "trained_model": TrainedModel.objects.create(
            project=project, training_job=training_job, name="t", kind="full", base_model="m"
        ),
        "membership": Membership.objects.get(project=project, user=owner),
        "experiment": Experiment.objects.create(
            project=project,
            name="x",
            recipe=recipe_parse({"name": "x", "capabilities": ["cap"]}).to_dict(),
        ),
        "model_server": ModelServer.objects.create(
            project=project,
            job=Job.objects.create(project=project, kind=MODEL_SERVER_KIND, title="serve"),
            model_path="org/model",
        ),
        "service": record.service,
        "collection": record.collection,
    }
    return world


def _teardown_world(world) -> None:
    TrainingJob.objects.filter(project=world["project"]).delete()  # they PROTECT versions
    DatasetVersion.objects.filter(dataset__project=world["project"]).delete()
    RunBatch.objects.filter(project=world["project"]).delete()  # their jobs are PROTECTed
    ModelServer.objects.filter(project=world["project"]).delete()  # so are theirs
    Project.objects.filter(pk__in=[world["project"].pk, world["home"].pk]).delete()
    world["owner"].delete()
    world["outsider"].delete()


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker):
    """Built once for the module (a few hundred requests read it; none may change it)."""
    with django_db_blocker.unblock(), transaction.atomic():  # all or nothing
        built = _build_world()
    yield built
    with django_db_blocker.unblock():
        _teardown_world(built)


def _kwargs(name: str, route: str, world, *, real: bool, own_project: bool = False) -> dict:
    """The URL parameters: the other project's real objects, or ids that do not exist. With
    ``own_project`` the project in the URL is the outsider's own (only the object is not)."""
    what = _object_of(route)
    kwargs: dict = {}
    if "<slug:slug>" in route:
        kwargs["slug"] = (
            world["home"].slug if own_project else world["project"].slug if real else MISSING_SLUG
        )
    if route.startswith("api/v1/projects/<int:pk>/"):
        kwargs["pk"] = world["home"].pk if own_project else world["project"].pk if real else MISSING
        if "<int:membership_pk>" in route:
            kwargs["membership_pk"] = world["membership"].pk if real else MISSING
        return kwargs
    if "<int:token_pk>" in route:
        kwargs["token_pk"] = world["token"].pk if real else MISSING
        return kwargs
    if "pk>" in route:
        if what is None:
            raise AssertionError(f"Say which object the id of {name} ({route}) names.")
        kwargs["pk"] = world[what].pk if real else MISSING
    if "<int:number>" in route:
        kwargs["number"] = world["version"].number if real else MISSING
    if "(?P<tab>" in route:
        kwargs["tab"] = "overview"
    if "<str:service>" in route:
        kwargs["service"], kwargs["collection"] = world["service"], world["collection"]
    if "<str:sha256>" in route:
        kwargs["sha256"] = "0" * 64
    if "<str:fmt>" in route:
        kwargs["fmt"], kwargs["split"] = "openai", "train"
    return kwargs


def _variants(name: str, route: str) -> list[bool]:
    """False: the other project in the URL; True as well when the URL names a project and an
    object (the outsider's own project with the other's object)."""
    prefix = "api/v1/projects/<int:pk>/"
    names_project = "<slug:slug>" in route or route.startswith(prefix)
    rest = route.removeprefix(prefix)
    names_object = names_project and ("<int:pk>" in rest or "<int:membership_pk>" in rest)
    return [False, True] if names_object else [False]


def _request(user, name: str, kwargs: dict, method: str):
    url = reverse(name, kwargs=kwargs)
    if name.startswith("api:"):
        client = APIClient()
        client.force_authenticate(user)
        return getattr(client, method)(url, {}, format="json")
    from django.test import Client

    client = Client()
    client.force_login(user)
    return getattr(client, method)(url)


@pytest.mark.django_db
@pytest.mark.parametrize(("name", "route"), ROUTES, ids=[name for name, _ in ROUTES])
def test_another_projects_id_reads_exactly_like_a_missing_one(world, name, route):
    methods = (
        ["get", "post", "put", "patch", "delete"] if name.startswith("api:") else ["get", "post"]
    )
    for own_project in _variants(name, route):
        real = _kwargs(name, route, world, real=True, own_project=own_project)
        missing = _kwargs(name, route, world, real=False, own_project=own_project)
        for method in methods:
            seen = _request(world["outsider"], name, real, method)
            expected = _request(world["outsider"], name, missing, method)
            assert (seen.status_code, seen.content) == (expected.status_code, expected.content), (
                f"{method.upper()} {reverse(name, kwargs=real)} differs from a missing id"
            )
            assert seen.status_code in (404, 405), (method, seen.status_code, seen.content[:200])
