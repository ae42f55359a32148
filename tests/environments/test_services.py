import json
from pathlib import Path

import pytest
from django.test import override_settings

from apps.capabilities.models import Capability
from apps.core.exceptions import ApplicationError
from apps.core.models import JobStatus
from apps.core.services import job_execute
from apps.environments.models import Environment, EnvironmentStatus, Grader, ValidationReport
from apps.environments.services import (
    environment_approve,
    environment_archive,
    environment_delete,
    environment_duplicate,
    environment_import,
    environment_replace_spec,
    environment_restore,
    environment_update,
    environment_validate,
    environment_validation_run,
    environment_validation_start,
    grader_update,
    record_create,
    task_update,
)
from apps.environments.specs import environment_spec
from coworkenv_engine import spec as engine_spec

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "samples").glob("*.json"))


def load(path: Path) -> dict:
    return json.loads(path.read_text())


@pytest.fixture
def example_spec():
    return load(SAMPLES[0])


@pytest.fixture
def environment(project, author, example_spec):
    return environment_import(project=project, spec=example_spec, user=author)


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_round_trip_keeps_the_canonical_document(project, author, path):
    document = load(path)
    environment = environment_import(project=project, spec=document, user=author)
    exported = environment_spec(environment)
    assert exported == engine_spec.canonical_dump(document)
    assert engine_spec.spec_hash(exported) == engine_spec.spec_hash(document)
    assert environment.spec_hash == engine_spec.spec_hash(document)
    assert (environment.status, environment.revision) == (EnvironmentStatus.DRAFT, 1)


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_import_of_the_validated_spec_stores_the_same_document(project, author, path):
    """validate_spec(doc).spec (schema already passed) imports exactly like the document."""
    from coworkenv_engine.validation import validate_spec

    document = load(path)
    report = validate_spec(document, dynamic=False)
    environment = environment_import(project=project, spec=report.spec, user=author)
    assert environment_spec(environment) == engine_spec.canonical_dump(document)
    assert environment.spec_hash == report.spec_hash == engine_spec.spec_hash(document)
    assert environment.name == document["name"]


def test_import_of_a_validated_spec_still_refuses_unstorable_text(project, author, example_spec):
    from coworkenv_engine.validation import validate_spec

    example_spec["description"] = "NUL \u0000 here"
    spec = validate_spec(example_spec, dynamic=False).spec
    with pytest.raises(ApplicationError) as error:
        environment_import(project=project, spec=spec, user=author)
    assert [p["pointer"] for p in error.value.extra["problems"]] == ["/description"]
    assert not Environment.objects.exists()


def test_import_links_capabilities_and_adds_unknown_ones(project, author, example_spec):
    environment = environment_import(project=project, spec=example_spec, user=author)
    slugs = {s for t in example_spec["tasks"] for s in t.get("capabilities", [])}
    assert set(Capability.objects.filter(project=project).values_list("slug", flat=True)) >= slugs
    first_task = environment.tasks.order_by("position").first()
    assert [link.capability.slug for link in first_task.capability_links.all()] == (
        example_spec["tasks"][0].get("capabilities", [])
    )


def test_import_schema_invalid_saves_nothing(project, author):
    with pytest.raises(ApplicationError) as error:
        environment_import(project=project, spec={"schema": "nope"}, user=author)
    assert error.value.extra["problems"]
    assert all("pointer" in p for p in error.value.extra["problems"])
    assert not Environment.objects.exists()


def test_import_non_object_is_refused(project, author):
    with pytest.raises(ApplicationError, match="JSON object"):
        environment_import(project=project, spec=["not", "a", "spec"], user=author)


def test_edit_bumps_revision_and_resets_status(environment):
    Environment.objects.filter(pk=environment.pk).update(status=EnvironmentStatus.VALID)
    environment = environment_update(
        environment=environment, name="Renamed", domain="ops", description="d"
    )
    assert (environment.revision, environment.status) == (2, EnvironmentStatus.DRAFT)
    assert environment.spec_hash == engine_spec.spec_hash(environment_spec(environment))
    assert environment_spec(environment)["name"] == "Renamed"


def test_part_edit_bumps_revision(environment):
    task = environment.tasks.order_by("position").first()
    task_update(task=task, data={"title": "New title"})
    environment.refresh_from_db()
    assert environment.revision == 2
    assert environment_spec(environment)["tasks"][0]["title"] == "New title"


def test_schema_breaking_edit_is_refused_and_rolled_back(environment):
    grader = Grader.objects.filter(task__environment=environment).first()
    before = environment.spec_hash
    with pytest.raises(ApplicationError) as error:
        grader_update(grader=grader, data={"check_spec": {"kind": "no-such-kind"}})
    assert error.value.extra["problems"][0]["pointer"].startswith("/tasks/")
    environment.refresh_from_db()
    grader.refresh_from_db()
    assert (environment.revision, environment.spec_hash) == (1, before)
    assert grader.check_spec != {"kind": "no-such-kind"}


def test_record_create_checks_collection_and_id(environment):
    service, collections = next(iter(environment.collections.items()))
    with pytest.raises(ApplicationError, match="no collection"):
        record_create(environment=environment, service=service, collection="nope", data={"id": "x"})
    with pytest.raises(ApplicationError, match="non-empty string"):
        record_create(environment=environment, service=service, collection=collections[0], data={})


def test_replace_spec(environment, example_spec):
    changed = dict(example_spec, name="Replaced")
    environment = environment_replace_spec(environment=environment, spec=changed)
    assert environment.name == "Replaced"
    assert environment.revision == 2
    assert environment_spec(environment) == engine_spec.canonical_dump(changed)


def test_validate_sets_status_and_report(environment):
    report = environment_validate(environment=environment)
    environment.refresh_from_db()
    assert report.valid is True
    assert environment.status == EnvironmentStatus.VALID
    assert environment.latest_validation == report
    assert {t["key"] for t in report.tasks} == set(environment.tasks.values_list("key", flat=True))
    assert all(t["sensitivity"] == 1.0 for t in report.tasks)


@override_settings(VALIDATION_TIME_BUDGET_S=1e-9)  # spent before the first run
def test_validate_stops_at_the_time_budget_setting(environment):
    report = environment_validate(environment=environment)
    environment.refresh_from_db()
    assert report.valid is False
    assert environment.status == EnvironmentStatus.INVALID
    codes = [(p["code"], p["pointer"]) for p in report.problems]
    assert ("validation_time_budget_exceeded", "/tasks/0") in codes


def test_validation_of_a_stale_revision_keeps_draft(environment):
    stale = Environment.objects.get(pk=environment.pk)
    environment_update(environment=environment, name="Edited meanwhile", domain="", description="")
    report = environment_validate(environment=stale)
    environment.refresh_from_db()
    assert report.revision == 1
    assert environment.status == EnvironmentStatus.DRAFT
    assert environment.latest_validation is None


def test_validation_job_resumes_without_repeating(project, author, example_spec):
    first = environment_import(project=project, spec=example_spec, user=author)
    second = environment_import(project=project, spec=example_spec, user=author)
    job = environment_validation_start(
        project=project, environments=[first, second], started_by=author
    )
    environment_validate(environment=first, job=job)  # a previous delivery did the first one
    job_execute(job_id=job.pk, work=environment_validation_run)
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED
    assert ValidationReport.objects.filter(job=job, environment=first).count() == 1
    assert ValidationReport.objects.filter(job=job, environment=second).count() == 1


def test_validation_start_refuses_empty(project, author):
    with pytest.raises(ApplicationError):
        environment_validation_start(project=project, environments=[], started_by=author)


def test_approve_only_valid(environment):
    with pytest.raises(ApplicationError, match="Only a valid"):
        environment_approve(environment=environment)
    environment_validate(environment=environment)
    assert environment_approve(environment=environment).status == EnvironmentStatus.APPROVED


def test_archived_is_read_only_until_restored(environment):
    environment_archive(environment=environment)
    with pytest.raises(ApplicationError, match="archived"):
        environment_update(environment=environment, name="x", domain="", description="")
    environment_restore(environment=environment)
    environment_update(environment=environment, name="x", domain="", description="")


def test_duplicate_is_an_equal_copy(environment, author):
    copy = environment_duplicate(environment=environment, user=author)
    assert copy.duplicated_from == environment
    assert copy.name.endswith("(copy)")
    original, duplicate = environment_spec(environment), environment_spec(copy)
    assert {**duplicate, "name": original["name"]} == original


def test_delete_only_after_archive(environment):
    with pytest.raises(ApplicationError, match="Archive this environment before deleting it"):
        environment_delete(environment=environment)
    assert Environment.objects.filter(pk=environment.pk).exists()
    environment_archive(environment=environment)
    environment.refresh_from_db()
    environment_delete(environment=environment)
    assert not Environment.objects.filter(pk=environment.pk).exists()
