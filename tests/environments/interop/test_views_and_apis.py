"""The environment page's Claw-Eval and ClawMark downloads, Claw-Eval archives on the import
page, the lineage shown, and the same over the API."""

import base64
import io
import json
import zipfile

import pytest
import yaml
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from apps.environments.interop.claw_eval import task_id_for
from apps.environments.models import Environment, EnvironmentStatus
from apps.environments.specs import environment_spec
from tests.conftest import HTMX_HEADERS
from tests.environments.interop.test_claw_eval_import import foreign_files, tarball

pytestmark = pytest.mark.django_db
API = "/api/v1"


def members(content: bytes) -> list[str]:
    with zipfile.ZipFile(io.BytesIO(content)) as archive:
        return archive.namelist()


def upload(name: str, content: bytes):
    return SimpleUploadedFile(name, content, content_type="application/octet-stream")


def import_url(project):
    return reverse("environments:import", args=[project.slug])


# --- downloads -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "suffix", "marker"),
    [
        ("environments:export_claw_eval", "claw-eval", "mock_services/coworkenv/server.py"),
        ("environments:export_clawmark", "clawmark", "/_coworkenv/coworkenv_clawmark.py"),
    ],
)
def test_page_downloads(client_for, viewer, environment, name, suffix, marker):
    response = client_for(viewer).get(reverse(name, args=[environment.pk]))
    assert response.status_code == 200
    assert response["Content-Type"] == "application/zip"
    filename = f"acme-ops-meeting-coordination-{environment.pk}-{suffix}.zip"
    assert response["Content-Disposition"] == f'attachment; filename="{filename}"'
    assert any(m.endswith(marker) for m in members(response.content))


@pytest.mark.parametrize("name", ["environments:export_claw_eval", "environments:export_clawmark"])
def test_page_downloads_access(client, client_for, outsider, viewer, environment, name):
    url = reverse(name, args=[environment.pk])
    assert client.get(url).status_code == 302
    denied = client_for(outsider).get(url)
    missing = client_for(viewer).get(reverse(name, args=[987654]))
    assert denied.status_code == missing.status_code == 404
    assert denied.content == missing.content
    assert client_for(viewer).post(url).status_code == 405


def test_detail_page_links_the_downloads(client_for, viewer, environment):
    html = client_for(viewer).get(reverse("environments:detail", args=[environment.pk]))
    html = html.content.decode()
    assert reverse("environments:export_claw_eval", args=[environment.pk]) in html
    assert reverse("environments:export_clawmark", args=[environment.pk]) in html
    assert 'data-testid="claw-eval-lineage"' not in html


# --- import page ---------------------------------------------------------------------------


def test_import_page_takes_a_claw_eval_tarball(client_for, author, project):
    response = client_for(author).post(
        import_url(project), {"file": upload("tasks.tar.gz", tarball(foreign_files()))}
    )
    environment = Environment.objects.get()
    assert response["Location"] == reverse("environments:detail", args=[environment.pk])
    assert environment.status == EnvironmentStatus.DRAFT
    page = client_for(author).get(response["Location"]).content.decode()
    assert (
        '<span data-testid="claw-eval-lineage">imported from Claw-Eval task '
        '<span class="mono">T900en_inbox_followup</span></span>'
    ) in page
    # the Overview's lineage says the same, not "Original (imported)"
    lineage = page.split('data-testid="lineage">')[1].split("</dd>")[0]
    assert "Imported from Claw-Eval task" in lineage and "Original" not in lineage
    tasks = client_for(author).get(reverse("environments:tab", args=[environment.pk, "tasks"]))
    tasks = tasks.content.decode()
    assert (
        '<dd data-testid="task-claw-eval"><span class="mono">T900en_inbox_followup</span> '
        '<span class="muted small">v1.2</span></dd>'
    ) in tasks
    assert (
        '<dd class="prewrap small" data-testid="task-claw-eval-plan">1. gmail_list_messages\n'
        "2. gmail_get_message(msg_1)\n3. reply</dd>"
    ) in tasks


def test_import_page_htmx_redirects_the_client(client_for, author, project):
    response = client_for(author).post(
        import_url(project),
        {"file": upload("tasks.tar.gz", tarball(foreign_files()))},
        **HTMX_HEADERS,
    )
    assert response["HX-Redirect"] == reverse(
        "environments:detail", args=[Environment.objects.get().pk]
    )


def test_import_page_takes_an_exported_zip(client_for, author, project, environment):
    client = client_for(author)
    exported = client.get(reverse("environments:export_claw_eval", args=[environment.pk]))
    response = client.post(import_url(project), {"file": upload("back.zip", exported.content)})
    document = environment_spec(environment)
    assert response.status_code == 302
    assert Environment.objects.count() == 1 + len(document["tasks"])
    ids = sorted(
        e.metadata["claw_eval"]["task_id"] for e in Environment.objects.exclude(pk=environment.pk)
    )
    assert ids == sorted(task_id_for(document, t["key"]) for t in document["tasks"])


@pytest.mark.parametrize("headers", [{}, HTMX_HEADERS], ids=["page", "htmx"])
def test_import_page_shows_why_nothing_was_imported(client_for, author, project, headers):
    files = {**foreign_files(), "../escape/task.yaml": b"task_id: x\n"}
    response = client_for(author).post(
        import_url(project), {"file": upload("evil.tar.gz", tarball(files))}, **headers
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert "points outside the archive (absolute path or &#x27;..&#x27;)" in html
    assert 'data-testid="import-error"' in html
    assert ("<html" in html) is (not headers)
    assert not Environment.objects.exists()


def test_import_page_claw_eval_needs_author(client_for, viewer, outsider, project):
    content = tarball(foreign_files())
    assert (
        client_for(viewer).post(import_url(project), {"file": upload("t.tgz", content)}).status_code
        == 403
    )
    assert (
        client_for(outsider)
        .post(import_url(project), {"file": upload("t.tgz", content)})
        .status_code
        == 404
    )
    assert not Environment.objects.exists()


# --- API -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "marker"), [("claw-eval", "task.yaml"), ("clawmark", "task.py")])
def test_api_exports(api_client_for, viewer, outsider, environment, kind, marker):
    url = f"{API}/environments/{environment.pk}/export/{kind}/"
    response = api_client_for(viewer).get(url)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/zip"
    document = environment_spec(environment)
    assert sum(m.endswith(marker) for m in members(response.content)) == len(document["tasks"])
    denied = api_client_for(outsider).get(url)
    assert denied.status_code == 404
    assert denied.json() == {"message": "No such environment.", "details": {}}
    assert api_client_for().get(url).status_code == 401


def archive_body(project, files, filename="t.tar.gz") -> dict:
    return {
        "project": project.pk,
        "filename": filename,
        "content_base64": base64.b64encode(tarball(files)).decode(),
    }


def test_api_import(api_client_for, author, project):
    response = api_client_for(author).post(
        f"{API}/environments/import/claw-eval/",
        archive_body(project, foreign_files()),
        format="json",
    )
    assert response.status_code == 201
    [row] = response.json()["environments"]
    assert row["name"] == "Follow up on the supplier email"
    assert row["status"] == "draft"


def test_api_import_bad_input_and_roles(api_client_for, author, viewer, outsider, project):
    files = {"t/task.yaml": yaml.safe_dump({"task_id": "T1"}).encode()}
    url = f"{API}/environments/import/claw-eval/"
    response = api_client_for(author).post(url, archive_body(project, files), format="json")
    assert response.status_code == 400
    assert response.json()["message"] == "t/task.yaml has no 'prompt'."
    not_base64 = {**archive_body(project, files), "content_base64": "not base64!"}
    refused = api_client_for(author).post(url, not_base64, format="json")
    assert (refused.status_code, refused.json()["message"]) == (
        400,
        "content_base64 is not valid base64.",
    )
    body = archive_body(project, foreign_files())
    assert api_client_for(viewer).post(url, body, format="json").status_code == 403
    assert api_client_for(outsider).post(url, body, format="json").status_code == 404
    assert not Environment.objects.exists()
    assert (
        json.loads(json.dumps(response.json()["details"]["problems"][0]))["file"] == "t/task.yaml"
    )
