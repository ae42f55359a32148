"""Another project's ids, passed where a page or an API takes ids in its body or query
string (not its path), never reach that project's objects: the request is refused like a
missing id, nothing is created, and nothing of the other project shows in the answer."""

import json
from pathlib import Path

import pytest
from django.urls import reverse

from apps.capabilities.models import Capability
from apps.environments.models import Environment, EnvironmentStatus
from apps.environments.services import environment_import
from apps.llm.models import ModelEndpoint
from apps.runs.models import Executor, Run, RunBatch
from apps.runs.services import run_batch_create, run_batch_execute_inline
from apps.synthesis.models import SynthesisJob

pytestmark = pytest.mark.django_db

SPEC = Path(__file__).resolve().parent.parent / "samples"
SECRET = "Foreign-Zebra-7"  # the other project's names all carry this marker


def _spec(name: str) -> dict:
    return {**json.loads((SPEC / "acme-ops.json").read_text()), "name": name}


def _world(project, user, name: str) -> dict:
    environment = environment_import(project=project, spec=_spec(name), user=user)
    Environment.objects.filter(pk=environment.pk).update(status=EnvironmentStatus.VALID)
    endpoint = ModelEndpoint.objects.create(
        project=project, name=f"{name} endpoint", base_url="http://127.0.0.1:9/v1", model="m"
    )
    capability = Capability.objects.create(project=project, slug="cap-" + name.lower(), name=name)
    batch = run_batch_create(project=project, user=user, name=name, executor=Executor.INLINE)
    run_batch_execute_inline(batch=batch)
    return {
        "project": project,
        "environment": environment,
        "task": environment.tasks.order_by("id").first(),
        "endpoint": endpoint,
        "capability": capability,
        "batch": batch,
        "run": Run.objects.filter(batch=batch).order_by("id").first(),
    }


@pytest.fixture
def own(project, author):
    return _world(project, author, "Home")


@pytest.fixture
def foreign(other_project, outsider):
    return _world(other_project, outsider, SECRET)


def _counts():
    return (RunBatch.objects.count(), SynthesisJob.objects.count(), Environment.objects.count())


BATCH_FORM = {
    "policy": "oracle",
    "role": "eval",
    "statuses": ["valid", "approved"],
    "trials": 1,
    "concurrency": 1,
    "max_tool_calls": 50,
    "max_rounds_per_turn": 20,
    "max_attempts": 1,
    "seed": 0,
    "user_side": "scripted",
}
SYNTHESIS_FORM = {
    "count": 1,
    "tasks_per_environment": 1,
    "turns_min": 1,
    "turns_max": 1,
    "difficulty": "medium",
    "generator": "template",
    "max_repair_rounds": 0,
}

# (name, method, url(own, foreign), data(own, foreign), expected status, form field in error)
PAGE_CASES = [
    (
        "batch form: the other project's endpoint as policy",
        "post",
        lambda o, f: reverse("runs:batch_create", args=[o["project"].slug]),
        lambda o, f: {**BATCH_FORM, "policy": f["endpoint"].pk},
        200,
        "policy",
    ),
    (
        "batch form: the other project's environment",
        "post",
        lambda o, f: reverse("runs:batch_create", args=[o["project"].slug]),
        lambda o, f: {**BATCH_FORM, "environments": [f["environment"].pk]},
        200,
        "environments",
    ),
    (
        "batch form: the other project's endpoint as user simulator",
        "post",
        lambda o, f: reverse("runs:batch_create", args=[o["project"].slug]),
        lambda o, f: {
            **BATCH_FORM,
            "user_side": "simulator",
            "simulator_endpoint": f["endpoint"].pk,
        },
        200,
        "simulator_endpoint",
    ),
    (
        "synthesis form: the other project's capability and endpoint",
        "post",
        lambda o, f: reverse("synthesis:create", args=[o["project"].slug]),
        lambda o, f: {
            **SYNTHESIS_FORM,
            "generator": "llm",
            "capabilities": [f["capability"].pk],
            "endpoint": f["endpoint"].pk,
        },
        200,
        "capabilities",
    ),
    (
        "task form: the other project's capability slug",
        "post",
        lambda o, f: reverse("environments:task_create", args=[o["environment"].pk]),
        lambda o, f: {"key": "t-new", "split": "train", "capabilities": [f["capability"].slug]},
        200,
        "capabilities",
    ),
    (
        "compare: one run of each project",
        "get",
        lambda o, f: reverse("runs:compare"),
        lambda o, f: {"a": o["run"].pk, "b": f["run"].pk},
        404,
        None,
    ),
    (
        "compare: two runs of the other project",
        "get",
        lambda o, f: reverse("runs:compare"),
        lambda o, f: {"a": f["run"].pk, "b": f["run"].pk},
        404,
        None,
    ),
    (
        "collection JSON: the other project's task",
        "get",
        lambda o, f: reverse(
            "environments:collection_json",
            args=[
                o["environment"].pk,
                *next(
                    (service, names[0])
                    for service, names in o["environment"].collections.items()
                    if names
                ),
            ],
        ),
        lambda o, f: {"task": f["task"].pk},
        404,
        None,
    ),
]


@pytest.mark.parametrize(
    ("method", "url", "data", "expected", "field"),
    [case[1:] for case in PAGE_CASES],
    ids=[case[0] for case in PAGE_CASES],
)
def test_pages_refuse_other_projects_ids(
    client_for, author, own, foreign, method, url, data, expected, field
):
    before = _counts()
    response = getattr(client_for(author), method)(url(own, foreign), data(own, foreign))
    assert response.status_code == expected
    if field is not None:
        assert field in response.context["form"].errors
    assert SECRET not in response.content.decode()
    assert _counts() == before


def test_evaluation_ignores_other_projects_batch_ids(client_for, viewer, own, foreign):
    url = reverse("runs:evaluation", args=[own["project"].slug])
    response = client_for(viewer).get(url, {"batch": [foreign["batch"].pk]})
    assert response.status_code == 200
    assert (response.context["batches"], response.context["models"]) == ([], [])
    assert SECRET not in response.content.decode()


def test_bulk_export_drops_other_projects_environment_ids(client_for, viewer, own, foreign):
    url = reverse("environments:bulk", args=[own["project"].slug])
    response = client_for(viewer).post(
        url, {"action": "export", "ids": [foreign["environment"].pk]}
    )
    assert response.status_code == 302
    assert response["Location"] == reverse("environments:list", args=[own["project"].slug])
    assert "Content-Disposition" not in response


def test_validation_tab_ignores_other_projects_report_id(client_for, viewer, own, foreign):
    from apps.environments.services import environment_validate

    report = environment_validate(environment=foreign["environment"])
    url = reverse("environments:tab", args=[own["environment"].pk, "validation"])
    response = client_for(viewer).get(url, {"report": report.pk})
    assert response.status_code == 200
    assert response.context["report"] is None  # own environment was never validated
    assert SECRET not in response.content.decode()


# (name, method, url(own, foreign), body(own, foreign), expected status)
API_CASES = [
    (
        "run batch: the other project's endpoint",
        "post",
        lambda o, f: f"/api/v1/projects/{o['project'].pk}/run-batches/",
        lambda o, f: {"policy": "endpoint", "endpoint": f["endpoint"].pk},
        400,
    ),
    (
        "run batch: the other project's environment",
        "post",
        lambda o, f: f"/api/v1/projects/{o['project'].pk}/run-batches/",
        lambda o, f: {"policy": "oracle", "environments": [f["environment"].pk]},
        400,
    ),
    (
        "run batch: the other project's user simulator",
        "post",
        lambda o, f: f"/api/v1/projects/{o['project'].pk}/run-batches/",
        lambda o, f: {
            "policy": "oracle",
            "user_side": "simulator",
            "simulator_endpoint": f["endpoint"].pk,
        },
        400,
    ),
    (
        "synthesis: the other project's endpoint",
        "post",
        lambda o, f: f"/api/v1/projects/{o['project'].pk}/synthesis-jobs/",
        lambda o, f: {
            "capabilities": [o["capability"].slug],
            "count": 1,
            "generator": "llm",
            "endpoint": f["endpoint"].pk,
        },
        400,
    ),
    (
        "synthesis: the other project's capability",
        "post",
        lambda o, f: f"/api/v1/projects/{o['project'].pk}/synthesis-jobs/",
        lambda o, f: {"capabilities": [f["capability"].slug], "count": 1, "generator": "template"},
        400,
    ),
    (
        "import into the other project",
        "post",
        lambda o, f: "/api/v1/environments/import",
        lambda o, f: {"project": f["project"].pk, "spec": _spec("Imported")},
        404,
    ),
    (
        "environments of the other project",
        "get",
        lambda o, f: "/api/v1/environments/",
        lambda o, f: {"project": f["project"].pk},
        404,
    ),
    (
        "capabilities of the other project",
        "get",
        lambda o, f: "/api/v1/capabilities/",
        lambda o, f: {"project": f["project"].pk},
        404,
    ),
    (
        "a capability in the other project",
        "post",
        lambda o, f: "/api/v1/capabilities/",
        lambda o, f: {"project": f["project"].pk, "name": "Planted"},
        404,
    ),
    (
        "a record for the other project's task",
        "post",
        lambda o, f: f"/api/v1/environments/{o['environment'].pk}/records/",
        lambda o, f: {
            "service": next(s for s, names in o["environment"].collections.items() if names),
            "collection": next(n[0] for n in o["environment"].collections.values() if n),
            "data": {"id": "planted"},
            "task": f["task"].pk,
        },
        400,
    ),
]


@pytest.mark.parametrize(
    ("method", "url", "body", "expected"),
    [case[1:] for case in API_CASES],
    ids=[case[0] for case in API_CASES],
)
def test_apis_refuse_other_projects_ids(
    api_client_for, author, own, foreign, method, url, body, expected
):
    before = (_counts(), Capability.objects.count(), foreign["environment"].records.count())
    api = api_client_for(author)
    if method == "get":
        response = api.get(url(own, foreign), body(own, foreign))
    else:
        response = api.post(url(own, foreign), body(own, foreign), format="json")
    assert response.status_code == expected
    assert SECRET not in response.content.decode()
    after = (_counts(), Capability.objects.count(), foreign["environment"].records.count())
    assert after == before


def test_run_list_api_filtered_by_other_projects_batch_is_empty(api_client_for, author, foreign):
    project = author.memberships.get().project
    response = api_client_for(author).get(
        f"/api/v1/projects/{project.pk}/runs/", {"batch": foreign["batch"].pk}
    )
    assert response.status_code == 200
    assert response.json()["count"] == 0
