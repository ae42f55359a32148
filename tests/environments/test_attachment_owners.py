"""A document may list only attachments its project holds: another project's hash is
refused on every way in (spec PUT, API create, file import) with nothing saved, and a file
is served as the type its bytes show, whatever a document claims."""

import json

import pytest

from apps.core.exceptions import ApplicationError
from apps.environments.models import Environment
from apps.environments.services import environment_import, environment_import_with_files
from apps.environments.services.imports import environment_import_text
from apps.environments.specs import environment_spec
from apps.synthesis.generators.receipts import generate_receipts_environment
from tests.engine.test_attachments import PDF

pytestmark = pytest.mark.django_db


@pytest.fixture
def foreign(other_project, author):
    """Receipts imported with their files into another project (author is no member)."""
    doc, files = generate_receipts_environment(seed=1, tasks=2)
    environment_import_with_files(project=other_project, spec=doc, files=files, user=author)
    return doc


@pytest.fixture
def plain(project, author):
    doc, _ = generate_receipts_environment(seed=2, tasks=1)
    return environment_import(project=project, spec={**doc, "attachments": []}, user=author)


def _with_foreign_attachment(document, foreign):
    return {**document, "attachments": [foreign["attachments"][0]]}


def _assert_refused(response):
    assert response.status_code == 400
    problems = response.json()["details"]["problems"]
    assert [(p["code"], p["pointer"]) for p in problems] == [
        ("attachment_not_in_project", "/attachments/0")
    ]


def test_a_spec_put_naming_another_projects_file_is_refused(api_client_for, author, plain, foreign):
    before = environment_spec(plain)
    response = api_client_for(author).put(
        f"/api/v1/environments/{plain.pk}/spec/",
        _with_foreign_attachment(before, foreign),
        format="json",
    )
    _assert_refused(response)
    assert environment_spec(Environment.objects.get(pk=plain.pk)) == before


def test_an_api_create_naming_another_projects_file_creates_nothing(
    api_client_for, author, project, plain, foreign
):
    spec = _with_foreign_attachment(environment_spec(plain), foreign)
    response = api_client_for(author).post(
        "/api/v1/environments/import/", {"project": project.pk, "spec": spec}, format="json"
    )
    _assert_refused(response)
    assert Environment.objects.filter(project=project).count() == 1


def test_a_text_import_naming_another_projects_file_is_refused(author, project, plain, foreign):
    spec = _with_foreign_attachment(environment_spec(plain), foreign)
    with pytest.raises(ApplicationError) as refused:
        environment_import_text(project=project, user=author, text=json.dumps(spec))
    assert refused.value.extra["pointer"] == "/attachments/0"
    assert Environment.objects.filter(project=project).count() == 1


def test_a_file_the_project_holds_may_be_listed_by_its_other_environments(
    api_client_for, author, project, plain
):
    doc, files = generate_receipts_environment(seed=3, tasks=1)
    environment_import_with_files(project=project, spec=doc, files=files, user=author)
    spec = {**environment_spec(plain), "attachments": [doc["attachments"][0]]}
    response = api_client_for(author).put(
        f"/api/v1/environments/{plain.pk}/spec/", spec, format="json"
    )
    assert response.status_code == 200, response.json()


def test_a_file_is_served_as_its_bytes_show_not_as_the_document_claims(
    client_for, viewer, project, author
):
    from apps.environments.attachments import attachment_save
    from coworkenv_engine.attachments import describe

    pdf = describe(PDF, name="notes.pdf")
    attachment_save(pdf.sha256, PDF)
    environment = environment_import_with_files(
        project=project,
        spec={**generate_receipts_environment(seed=4, tasks=1)[0], "attachments": []},
        files={},
        user=author,
    )
    claimed = {**pdf.to_dict(), "media_type": "image/png", "name": "notes.png"}
    Environment.objects.filter(pk=environment.pk).update(attachments=[claimed])
    response = client_for(viewer).get(f"/environments/{environment.pk}/attachments/{pdf.sha256}/")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/pdf"
    assert response["Content-Disposition"].startswith("attachment")
