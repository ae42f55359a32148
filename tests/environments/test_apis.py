"""The environments REST API: list, import, detail, spec, and the life-cycle actions."""

import copy
import json
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.core.models import Job, JobStatus
from apps.environments.models import (
    Environment,
    EnvironmentSource,
    EnvironmentStatus,
    Grader,
    Task,
    ValidationReport,
)
from apps.environments.services import (
    environment_archive,
    environment_import,
    environment_validate,
)
from apps.environments.specs import environment_spec
from coworkenv_engine import spec as engine_spec
from coworkenv_engine.spec import spec_json_schema

pytestmark = pytest.mark.django_db

API = "/api/v1"
SAMPLES = Path(__file__).resolve().parents[2] / "samples"
ACME = "Acme Ops - meeting coordination"
FINANCE = "Acme Finance - files and spreadsheets"
SUPPORT = "Acme Support - helpdesk with CRM and knowledge base"
User = get_user_model()


def sample(name: str) -> dict:
    return json.loads((SAMPLES / f"{name}.json").read_text())


def problem_pointers(response) -> list[str]:
    return [p["pointer"] for p in response.json()["details"]["problems"]]


# --- list -----------------------------------------------------------------------------------


@pytest.fixture
def three(project, author, environment):
    """The acme-ops environment plus the finance and support samples, all in ``project``."""
    finance = environment_import(project=project, spec=sample("finance-files"), user=author)
    support = environment_import(project=project, spec=sample("support-desk"), user=author)
    return environment, finance, support


def names(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [row["name"] for row in response.json()["results"]]


def test_list_row_has_exact_values(api_client_for, viewer, environment, project):
    body = api_client_for(viewer).get(f"{API}/environments/").json()
    assert (body["count"], body["next"], body["previous"]) == (1, None, None)
    row = body["results"][0]
    assert row == {
        "id": environment.pk,
        "project": project.pk,
        "name": ACME,
        "domain": "operations",
        "description": environment.description,
        "status": "draft",
        "source": "imported",
        "revision": 1,
        "spec_hash": environment.spec_hash,
        "task_count": 3,
        "latest_validation": None,
        "validation_current": False,
        "duplicated_from": None,
        "created_by": "arthur-author",
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
    }
    assert row["description"].startswith("An operations assistant's inbox")


def test_list_covers_only_the_users_projects(
    api_client_for, author, outsider, other_project, environment
):
    environment_import(project=other_project, spec=sample("finance-files"), user=outsider)
    assert names(api_client_for(author).get(f"{API}/environments/")) == [ACME]
    assert names(api_client_for(outsider).get(f"{API}/environments/")) == [FINANCE]


def test_list_of_one_project(api_client_for, outsider, other_project, project, three):
    environment_import(project=other_project, spec=sample("finance-files"), user=outsider)
    response = api_client_for(outsider).get(f"{API}/environments/", {"project": other_project.pk})
    assert names(response) == [FINANCE]


def test_list_of_a_project_the_user_is_not_in_is_404(api_client_for, author, other_project):
    api = api_client_for(author)
    assert api.get(f"{API}/environments/", {"project": other_project.pk}).status_code == 404
    assert api.get(f"{API}/environments/", {"project": 987654}).status_code == 404


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, [SUPPORT,
              FINANCE, ACME]),
        ({"domain": "finance"}, [FINANCE]),
        ({"q": "HELPDESK"}, [SUPPORT]),
        ({"q": "meeting"}, [ACME]),
        ({"capability": "disambiguate-contacts"}, [ACME]),
        ({"capability": "recover-from-tool-errors"},
         [SUPPORT]),
        ({"split": "eval", "sort": "name"}, [FINANCE, ACME,
                                             SUPPORT]),
        ({"source": "manual"}, []),
        ({"source": "imported", "domain": "operations"}, [ACME]),
        ({"status": "valid"}, []),
        ({"status": "", "q": "", "sort": ""},  # blank means no filter
         [SUPPORT,
          FINANCE, ACME]),
    ],
)  # fmt: skip
def test_list_filters(api_client_for, viewer, three, params, expected):
    assert names(api_client_for(viewer).get(f"{API}/environments/", params)) == expected


def test_list_filter_by_status_and_archived_hidden_by_default(api_client_for, viewer, three):
    acme, finance, _ = three
    environment_validate(environment=acme)
    environment_archive(environment=finance)
    api = api_client_for(viewer)
    assert names(api.get(f"{API}/environments/", {"status": "valid"})) == [ACME]
    assert names(api.get(f"{API}/environments/", {"status": "archived"})) == [FINANCE]
    assert FINANCE not in names(api.get(f"{API}/environments/"))


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"status": "bogus"}, "status"),
        ({"split": "test"}, "split"),
        ({"source": "scraped"}, "source"),
        ({"sort": "-name"}, "sort"),
        ({"capability": "not a slug"}, "capability"),
        ({"project": "acme"}, "project"),
    ],
)
def test_list_bad_filter_values_are_400(api_client_for, viewer, three, params, field):
    response = api_client_for(viewer).get(f"{API}/environments/", params)
    assert response.status_code == 400
    body = response.json()
    assert body["message"] == "The request is not valid."
    assert list(body["details"]) == [field]


def test_list_is_paginated(api_client_for, viewer, three):
    body = api_client_for(viewer).get(f"{API}/environments/", {"page_size": 2, "sort": "name"})
    assert body.json()["count"] == 3
    assert [r["name"] for r in body.json()["results"]] == [
        FINANCE,
        ACME,
    ]
    assert body.json()["next"].endswith("page=2&page_size=2&sort=name")
    second = api_client_for(viewer).get(body.json()["next"]).json()
    assert [r["name"] for r in second["results"]] == [SUPPORT]


def test_list_sort_by_tasks_uses_the_count(api_client_for, viewer, three, author):
    acme = three[0]
    Task.objects.filter(environment=acme).exclude(key="book-q3-review").delete()
    body = api_client_for(viewer).get(f"{API}/environments/", {"sort": "tasks"}).json()
    assert [(r["name"], r["task_count"]) for r in body["results"]][-1] == (ACME, 1)


def test_list_anonymous_401(api_client_for, environment):
    response = api_client_for().get(f"{API}/environments/")
    assert response.status_code == 401
    assert response.json() == {
        "message": "Authentication credentials were not provided.",
        "details": {},
    }


def clone_environments(environment: Environment, count: int) -> None:
    """``count`` more environments like ``environment``: a task, a grader and a report each."""
    template_task = environment.tasks.order_by("position").first()
    template_grader = template_task.graders.order_by("position").first()
    rows = Environment.objects.bulk_create(
        Environment(
            project_id=environment.project_id,
            name=f"Clone {i:04d}",
            domain="operations",
            status=EnvironmentStatus.VALID,
            source=EnvironmentSource.SYNTHESIZED,
            spec_hash=environment.spec_hash,
            collections=environment.collections,
            created_by_id=environment.created_by_id,
        )
        for i in range(count)
    )
    tasks = Task.objects.bulk_create(
        Task(environment=row, key=template_task.key, turns=template_task.turns) for row in rows
    )
    Grader.objects.bulk_create(
        Grader(task=task, key=template_grader.key, check_spec=template_grader.check_spec)
        for task in tasks
    )
    reports = ValidationReport.objects.bulk_create(
        ValidationReport(environment=row, revision=1, valid=True, problems=[]) for row in rows
    )
    for row, report in zip(rows, reports, strict=True):
        row.latest_validation = report
    Environment.objects.bulk_update(rows, ["latest_validation"])


def test_list_query_count_does_not_grow_with_rows(
    api_client_for, viewer, environment, project, django_assert_max_num_queries
):
    def fresh_client():  # a new user object: no membership cached from an earlier request
        return api_client_for(User.objects.get(pk=viewer.pk))

    counts = []
    for total in (10, 500):
        clone_environments(environment, total - Environment.objects.count())
        assert Environment.objects.count() == total
        for params in ({"page_size": 500}, {"page_size": 500, "project": project.pk}):
            api = fresh_client()
            with CaptureQueriesContext(connection) as queries:
                body = api.get(f"{API}/environments/", params).json()
            assert (body["count"], len(body["results"])) == (total, total)
            counts.append(len(queries))
    api = fresh_client()
    with django_assert_max_num_queries(counts[0]):
        api.get(f"{API}/environments/", {"page_size": 500, "sort": "tasks", "split": "train"})
    assert counts[0] == counts[2] and counts[1] == counts[3], counts
    assert max(counts) <= 4, counts


# --- import ---------------------------------------------------------------------------------


def test_import_creates_a_draft(api_client_for, author, project, example_spec):
    response = api_client_for(author).post(
        f"{API}/environments/import", {"project": project.pk, "spec": example_spec}, format="json"
    )
    assert response.status_code == 201, response.content
    body = response.json()
    environment = Environment.objects.get()
    assert body["id"] == environment.pk
    expected_hash = engine_spec.spec_hash(example_spec)
    assert {k: body[k] for k in (
        "project", "name", "domain", "status", "source", "revision", "spec_hash",
        "task_count", "tool_count", "record_count", "latest_validation", "validation_current",
        "duplicated_from", "created_by", "problems",
    )} == {
        "project": project.pk, "name": ACME, "domain": "operations", "status": "draft",
        "source": "imported", "revision": 1, "spec_hash": expected_hash, "task_count": 3,
        "tool_count": 8, "record_count": 8, "latest_validation": None,
        "validation_current": False, "duplicated_from": None, "created_by": "arthur-author",
        "problems": [],
    }  # fmt: skip
    assert body["collections"] == {
        "email": ["inbox", "sent", "drafts"],
        "calendar": ["events"],
        "contacts": ["people"],
    }
    assert environment.spec_hash == expected_hash
    assert environment.created_by.username == "arthur-author"


def test_import_reports_static_problems(api_client_for, author, project, example_spec):
    del example_spec["tools"][2]["binding"]["values"]["date"]  # send_email
    response = api_client_for(author).post(
        f"{API}/environments/import", {"project": project.pk, "spec": example_spec}, format="json"
    )
    assert response.status_code == 201
    assert response.json()["problems"] == [
        {
            "code": "binding_missing_required_field",
            "severity": "warning",
            "pointer": "/tools/2/binding/values",
            "message": "Records created by 'send_email' lack date.",
            "hint": 'Fill them from parameters, fixed values or "$now".',
        }
    ]


def test_import_schema_invalid_is_400_with_pointers(api_client_for, author, project, example_spec):
    example_spec["tasks"][1]["split"] = "holdout"
    example_spec["tools"][0]["binding"]["op"] = "explode"
    response = api_client_for(author).post(
        f"{API}/environments/import", {"project": project.pk, "spec": example_spec}, format="json"
    )
    assert response.status_code == 400
    body = response.json()
    assert body["message"].startswith("The spec does not match coworkenv.environment/v1")
    assert "/tasks/1/split" in problem_pointers(response)
    assert any(p.startswith("/tools/0/binding") for p in problem_pointers(response))
    assert {p["code"] for p in body["details"]["problems"]} == {"schema_invalid"}
    assert Environment.objects.count() == Task.objects.count() == 0


@pytest.mark.parametrize("spec", [[1, 2], "a string", None, 42])
def test_import_non_object_spec_is_400(api_client_for, author, project, spec):
    response = api_client_for(author).post(
        f"{API}/environments/import", {"project": project.pk, "spec": spec}, format="json"
    )
    assert response.status_code == 400
    assert response.json() == {
        "message": "A spec must be a JSON object.",
        "details": {
            "problems": [
                {
                    "code": "not_an_object",
                    "severity": "error",
                    "pointer": "",
                    "message": "A spec must be a JSON object.",
                    "hint": "",
                }
            ]
        },
    }
    assert Environment.objects.count() == 0


def test_import_needs_project_and_spec(api_client_for, author):
    response = api_client_for(author).post(f"{API}/environments/import", {}, format="json")
    assert response.status_code == 400
    assert sorted(response.json()["details"]) == ["project", "spec"]


def test_import_body_must_be_json(api_client_for, author, project):
    response = api_client_for(author).post(
        f"{API}/environments/import/", {"project": project.pk, "spec": "{}"}, format="multipart"
    )
    assert response.status_code == 415


def test_import_roles(api_client_for, viewer, outsider, project, other_project, example_spec):
    body = {"project": project.pk, "spec": example_spec}
    assert (
        api_client_for(viewer).post(f"{API}/environments/import", body, format="json").status_code
        == 403
    )
    assert (
        api_client_for(outsider).post(f"{API}/environments/import", body, format="json").status_code
        == 404
    )
    missing = {"project": 987654, "spec": example_spec}
    assert (
        api_client_for(viewer)
        .post(f"{API}/environments/import", missing, format="json")
        .status_code
        == 404
    )
    assert (
        api_client_for().post(f"{API}/environments/import", body, format="json").status_code == 401
    )
    assert Environment.objects.count() == 0


@pytest.mark.parametrize("name", ["acme-ops", "finance-files", "support-desk"])
def test_import_then_export_round_trip(api_client_for, author, project, name):
    document = sample(name)
    api = api_client_for(author)
    created = api.post(
        f"{API}/environments/import", {"project": project.pk, "spec": document}, format="json"
    ).json()
    exported = api.get(f"{API}/environments/{created['id']}/spec").json()
    assert exported == engine_spec.canonical_dump(document)
    assert (
        engine_spec.spec_hash(exported) == engine_spec.spec_hash(document) == created["spec_hash"]
    )
    again = api.post(
        f"{API}/environments/import", {"project": project.pk, "spec": exported}, format="json"
    ).json()
    assert again["spec_hash"] == created["spec_hash"]


# --- detail ---------------------------------------------------------------------------------


def test_detail_with_latest_validation(api_client_for, viewer, environment):
    report = environment_validate(environment=environment)
    body = api_client_for(viewer).get(f"{API}/environments/{environment.pk}/").json()
    assert (body["status"], body["revision"], body["validation_current"]) == ("valid", 1, True)
    assert (body["task_count"], body["tool_count"], body["record_count"]) == (3, 8, 8)
    validation = body["latest_validation"]
    assert {k: validation[k] for k in ("id", "revision", "valid", "error_count", "job")} == {
        "id": report.pk,
        "revision": 1,
        "valid": True,
        "error_count": 0,
        "job": None,
    }
    assert validation["spec_hash"] == environment.spec_hash
    assert validation["problems"] == report.problems
    assert [t["key"] for t in validation["tasks"]] == [
        "book-q3-review",
        "budget-figure-clarify",
        "notice-moved-dentist",
    ]
    assert all(t["oracle_strict"] for t in validation["tasks"])
    assert [t["adversary_scores"] for t in validation["tasks"]] == [
        t["adversary_scores"] for t in report.tasks
    ]
    assert set(validation["tasks"][1]["adversary_scores"]) == {
        "reader-paster",
        "sprayer",
        "spray-paster",
        "greedy-sprayer",
        "greedy-paster",
        "vague-asker",
        "asker-sprayer",
        "asker-paster",
    }


def test_a_report_from_before_adversaries_shows_none(api_client_for, viewer, environment):
    report = ValidationReport.objects.create(
        environment=environment,
        revision=environment.revision,
        valid=True,
        tasks=[{"key": "book-q3-review", "oracle_score": 1.0, "null_score": 0.2,
                "echo_score": 0.2, "sensitivity": 1.0, "mutants_total": 2, "mutants_caught": 2,
                "oracle_strict": True, "deterministic": True}],
    )  # fmt: skip
    Environment.objects.filter(pk=environment.pk).update(latest_validation=report)
    body = api_client_for(viewer).get(f"{API}/environments/{environment.pk}/").json()
    assert body["latest_validation"]["tasks"][0]["adversary_scores"] == {}


def test_detail_outsider_missing_anonymous(api_client_for, outsider, viewer, environment):
    url = f"{API}/environments/{environment.pk}/"
    response = api_client_for(outsider).get(url)
    assert response.status_code == 404
    assert response.json() == {"message": "No such environment.", "details": {}}
    assert api_client_for(viewer).get(f"{API}/environments/987654/").status_code == 404
    assert api_client_for().get(url).status_code == 401


def test_detail_wrong_method_405(api_client_for, author, environment):
    response = api_client_for(author).post(f"{API}/environments/{environment.pk}/", {})
    assert response.status_code == 405
    assert api_client_for(author).post(f"{API}/environments/", {}).status_code == 405


def test_patch_updates_bumps_revision_and_resets_status(api_client_for, author, environment):
    environment_validate(environment=environment)
    response = api_client_for(author).patch(
        f"{API}/environments/{environment.pk}/",
        {"name": "Ops desk", "description": "  Kept as sent.  "},
        format="json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["name"], body["domain"], body["description"]) == (
        "Ops desk",
        "operations",
        "  Kept as sent.  ",
    )
    assert (body["status"], body["revision"], body["validation_current"]) == ("draft", 2, False)
    environment.refresh_from_db()
    assert (environment.name, environment.revision, environment.status) == ("Ops desk", 2, "draft")
    assert environment.spec_hash == engine_spec.spec_hash(environment_spec(environment))
    assert body["spec_hash"] == environment.spec_hash


def test_patch_rejects_bad_input_and_changes_nothing(api_client_for, author, environment):
    api = api_client_for(author)
    response = api.patch(f"{API}/environments/{environment.pk}/", {"name": ""}, format="json")
    assert response.status_code == 400
    assert list(response.json()["details"]) == ["name"]
    environment_archive(environment=environment)
    response = api.patch(f"{API}/environments/{environment.pk}/", {"name": "X"}, format="json")
    assert response.status_code == 400
    assert response.json()["message"] == "This environment is archived; restore it before editing."
    environment.refresh_from_db()
    assert (environment.name, environment.revision) == (ACME, 1)


def test_delete_needs_archive_first(api_client_for, author, environment):
    api = api_client_for(author)
    response = api.delete(f"{API}/environments/{environment.pk}/")
    assert response.status_code == 400
    assert response.json() == {
        "message": "Archive this environment before deleting it.",
        "details": {},
    }
    assert Environment.objects.filter(pk=environment.pk).exists()
    environment_archive(environment=environment)
    assert api.delete(f"{API}/environments/{environment.pk}/").status_code == 204
    assert not Environment.objects.filter(pk=environment.pk).exists()
    assert Task.objects.count() == 0


# --- spec -----------------------------------------------------------------------------------


def test_get_spec_is_the_canonical_document(api_client_for, viewer, environment, example_spec):
    body = api_client_for(viewer).get(f"{API}/environments/{environment.pk}/spec").json()
    assert body == environment_spec(environment) == engine_spec.canonical_dump(example_spec)


def test_put_spec_replaces_everything(api_client_for, author, environment, example_spec):
    environment_validate(environment=environment)
    new = copy.deepcopy(example_spec)
    new["name"] = "Two tasks left"
    del new["tasks"][1]
    response = api_client_for(author).put(
        f"{API}/environments/{environment.pk}/spec", new, format="json"
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["name"], body["revision"], body["status"], body["task_count"]) == (
        "Two tasks left",
        2,
        "draft",
        2,
    )
    assert body["spec_hash"] == engine_spec.spec_hash(new)
    assert body["problems"] == []
    assert environment_spec(Environment.objects.get()) == engine_spec.canonical_dump(new)
    assert list(Task.objects.values_list("key", flat=True)) == [
        "book-q3-review",
        "notice-moved-dentist",
    ]


@pytest.mark.parametrize("kind", ["schema", "not_object"])
def test_put_invalid_spec_changes_nothing(api_client_for, author, environment, example_spec, kind):
    if kind == "schema":
        body = copy.deepcopy(example_spec)
        body["tasks"][2]["graders"] = []
        pointer = "/tasks/2/graders"
    else:
        body, pointer = [example_spec], ""
    before = environment_spec(environment)
    response = api_client_for(author).put(
        f"{API}/environments/{environment.pk}/spec", body, format="json"
    )
    assert response.status_code == 400
    assert pointer in problem_pointers(response)
    environment.refresh_from_db()
    assert (environment.revision, environment.status) == (1, "draft")
    assert environment_spec(environment) == before


# --- actions --------------------------------------------------------------------------------


def test_validate_starts_a_job(
    api_client_for, author, environment, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as callbacks:
        response = api_client_for(author).post(f"{API}/environments/{environment.pk}/validate")
    assert response.status_code == 202, response.content
    job = Job.objects.get()
    body = response.json()
    assert {k: body[k] for k in ("id", "project", "kind", "title", "status", "params")} == {
        "id": job.pk,
        "project": environment.project_id,
        "kind": "environment_validation",
        "title": f"Validate “{ACME}”",
        "status": "pending",
        "params": {"environment_ids": [environment.pk]},
    }
    assert (body["progress_total"], body["started_by"]) == (1, "arthur-author")
    assert len(callbacks) == 1  # the task is enqueued once the transaction commits
    # The job endpoint follows it.
    followed = api_client_for(author).get(f"{API}/jobs/{job.pk}/").json()
    assert followed["status"] == JobStatus.PENDING


def test_approve_needs_valid_and_reviewer(api_client_for, author, reviewer, environment):
    url = f"{API}/environments/{environment.pk}/approve"
    response = api_client_for(reviewer).post(url)
    assert response.status_code == 400
    assert response.json()["message"] == (
        "Only a valid environment can be approved: validate its current revision first."
    )
    environment_validate(environment=environment)
    assert api_client_for(author).post(url).status_code == 403
    environment.refresh_from_db()
    assert environment.status == EnvironmentStatus.VALID
    response = api_client_for(reviewer).post(url)
    assert response.status_code == 200
    assert (response.json()["status"], response.json()["revision"]) == ("approved", 1)
    environment.refresh_from_db()
    assert environment.status == EnvironmentStatus.APPROVED


def test_archive_and_restore(api_client_for, author, environment):
    api = api_client_for(author)
    for _ in range(2):  # archiving twice is harmless
        response = api.post(f"{API}/environments/{environment.pk}/archive")
        assert response.status_code == 200
        assert response.json()["status"] == "archived"
    response = api.post(f"{API}/environments/{environment.pk}/restore")
    assert (response.status_code, response.json()["status"]) == (200, "draft")
    response = api.post(f"{API}/environments/{environment.pk}/restore")
    assert response.status_code == 400
    assert response.json()["message"] == "Only an archived environment can be restored."


def test_duplicate(api_client_for, author, environment):
    response = api_client_for(author).post(f"{API}/environments/{environment.pk}/duplicate")
    assert response.status_code == 201
    body = response.json()
    copy_row = Environment.objects.exclude(pk=environment.pk).get()
    assert {k: body[k] for k in (
        "id", "name", "source", "status", "revision", "duplicated_from", "task_count",
        "tool_count", "record_count", "created_by",
    )} == {
        "id": copy_row.pk, "name": f"{ACME} (copy)", "source": "manual", "status": "draft",
        "revision": 1, "duplicated_from": environment.pk, "task_count": 3, "tool_count": 8,
        "record_count": 8, "created_by": "arthur-author",
    }  # fmt: skip
    assert body["spec_hash"] == engine_spec.spec_hash(environment_spec(copy_row))


# --- roles on every write of an environment -------------------------------------------------


def environment_writes(environment, example_spec):
    pk = environment.pk
    return [
        ("patch", f"{API}/environments/{pk}/", {"name": "Changed"}),
        ("delete", f"{API}/environments/{pk}/", None),
        ("put", f"{API}/environments/{pk}/spec", {**example_spec, "name": "Changed"}),
        ("post", f"{API}/environments/{pk}/validate", None),
        ("post", f"{API}/environments/{pk}/approve", None),
        ("post", f"{API}/environments/{pk}/archive", None),
        ("post", f"{API}/environments/{pk}/restore", None),
        ("post", f"{API}/environments/{pk}/duplicate", None),
    ]


def snapshot():
    return (
        list(Environment.objects.order_by("pk").values_list("pk", "name", "status", "revision")),
        Task.objects.count(),
        Job.objects.count(),
    )


def test_viewer_gets_403_on_every_write_and_nothing_changes(
    api_client_for, viewer, environment, example_spec
):
    environment_validate(environment=environment)  # so approve would otherwise succeed
    before = snapshot()
    api = api_client_for(viewer)
    for method, url, body in environment_writes(environment, example_spec):
        response = getattr(api, method)(url, body, format="json")
        assert response.status_code == 403, (method, url)
        assert response.json() == {
            "message": response.json()["message"],
            "details": {},
        }
        assert response.json()["message"].startswith("This needs the ")
    assert snapshot() == before


def test_outsider_gets_404_on_every_endpoint(api_client_for, outsider, environment, example_spec):
    before = snapshot()
    api = api_client_for(outsider)
    reads = [
        ("get", f"{API}/environments/{environment.pk}/", None),
        ("get", f"{API}/environments/{environment.pk}/spec", None),
    ]
    for method, url, body in reads + environment_writes(environment, example_spec):
        assert getattr(api, method)(url, body, format="json").status_code == 404, (method, url)
    assert snapshot() == before


def test_anonymous_gets_401_on_every_endpoint(api_client_for, environment, example_spec):
    api = api_client_for()
    reads = [
        ("get", f"{API}/environments/{environment.pk}/", None),
        ("get", f"{API}/environments/{environment.pk}/spec", None),
        ("get", f"{API}/spec-schema/", None),
    ]
    for method, url, body in reads + environment_writes(environment, example_spec):
        assert getattr(api, method)(url, body, format="json").status_code == 401, (method, url)


# --- spec schema and OpenAPI ----------------------------------------------------------------


def test_spec_schema(api_client_for, outsider):
    response = api_client_for(outsider).get(f"{API}/spec-schema/")
    assert response.status_code == 200
    assert response.json() == spec_json_schema()
    assert response.json()["title"] == "CoworkEnv environment (coworkenv.environment/v1)"


def test_malformed_json_body_is_400_with_its_position(api_client_for, author, environment):
    response = api_client_for(author).generic(
        "PUT",
        f"{API}/environments/{environment.pk}/spec",
        '{"schema": "coworkenv.environment/v1",\n "name": }',
        content_type="application/json",
    )
    assert response.status_code == 400
    assert response.json() == {
        "message": "The body is not valid JSON: line 2, column 10: Expecting value.",
        "details": {},
    }
    environment.refresh_from_db()
    assert environment.revision == 1
