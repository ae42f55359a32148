"""Attachments in the app: stored by hash in the "attachments" storage, imported with their
environment, uploaded over the API, served to members, checked by the validation job."""

import base64
import hashlib

import pytest

from apps.core.exceptions import ApplicationError
from apps.environments.attachments import attachment_bytes, attachment_name, attachment_storage
from apps.environments.models import Environment
from apps.environments.services import (
    attachment_add,
    environment_import_with_files,
    environment_validate,
)
from apps.environments.specs import environment_spec
from apps.synthesis.generators.receipts import generate_receipts_environment
from tests.engine.test_attachments import PDF, tiny_png

pytestmark = pytest.mark.django_db


@pytest.fixture
def receipts():
    return generate_receipts_environment(seed=1, tasks=2)


@pytest.fixture
def environment(project, author, receipts):
    doc, files = receipts
    return environment_import_with_files(project=project, spec=doc, files=files, user=author)


def test_import_with_files_stores_each_file_once_by_hash_and_round_trips(environment, receipts):
    doc, files = receipts
    assert environment_spec(environment)["attachments"] == doc["attachments"]
    for sha, data in files.items():
        assert attachment_bytes(sha) == data
        assert attachment_storage().exists(f"{sha[:2]}/{sha}")
    report = environment_validate(environment=environment)
    assert (report.valid, report.problems) == (True, [])


def test_import_refuses_a_missing_or_altered_file_and_saves_nothing(project, author, receipts):
    doc, files = receipts
    first = doc["attachments"][0]
    altered = {**files, first["sha256"]: tiny_png((1, 2, 3))}
    with pytest.raises(ApplicationError) as raised:
        environment_import_with_files(project=project, spec=doc, files=altered, user=author)
    assert raised.value.message.startswith(f"Attachment '{first['name']}': the stored bytes hash")
    assert raised.value.extra == {"pointer": "/attachments/0"}
    missing = {k: v for k, v in files.items() if k != first["sha256"]}
    with pytest.raises(ApplicationError, match="no stored file has the hash"):
        environment_import_with_files(project=project, spec=doc, files=missing, user=author)
    assert Environment.objects.count() == 0
    assert attachment_bytes(first["sha256"]) is None


def test_validation_reports_a_file_gone_from_storage(environment, receipts):
    doc, _ = receipts
    sha = doc["attachments"][1]["sha256"]
    attachment_storage().delete(attachment_name(sha))
    report = environment_validate(environment=environment)
    assert report.valid is False
    assert [(p["code"], p["pointer"]) for p in report.problems] == [
        ("attachment_content_invalid", "/attachments/1")
    ]


def test_adding_an_attachment_lists_it_once_and_sends_the_environment_back_to_draft(
    environment,
):
    png = tiny_png((9, 9, 9))
    before = environment.revision
    added = attachment_add(environment=environment, data=png, name="scan.png")
    again = attachment_add(environment=environment, data=png, name="scan again.png")
    environment.refresh_from_db()
    assert added == again
    assert environment.attachments[-1] == {
        "sha256": hashlib.sha256(png).hexdigest(),
        "media_type": "image/png",
        "size": len(png),
        "name": "scan.png",
    }
    assert (environment.revision, environment.status) == (before + 1, "draft")


SUPPORTED = "(supported: image/png, image/jpeg, image/webp, image/gif, application/pdf)"


@pytest.mark.parametrize(
    ("data", "media_type", "message"),
    [
        (b"GIF8", None, f"x: unknown type is not a supported attachment type {SUPPORTED}"),
        (b"<svg/>", "image/svg+xml",
         f"x: image/svg+xml is not a supported attachment type {SUPPORTED}"),
        (PDF, "image/png", "x: the file is application/pdf, not image/png"),
        (
            b"\x89PNG\r\n\x1a\n" + b"0" * 5_000_000,
            None,
            "x: 5000008 bytes is over the 5000000-byte limit for image/png",
        ),
    ],
)  # fmt: skip
def test_a_wrong_type_or_oversized_file_is_refused_with_a_clear_error(
    environment, data, media_type, message
):
    before = list(environment.attachments)
    with pytest.raises(ApplicationError) as raised:
        attachment_add(environment=environment, data=data, name="x", media_type=media_type)
    assert raised.value.message == message
    environment.refresh_from_db()
    assert environment.attachments == before


# --- API -------------------------------------------------------------------------------------


def test_api_uploads_and_lists_attachments(api_client_for, author, environment):
    api = api_client_for(author)
    png = tiny_png((0, 128, 0))
    url = f"/api/v1/environments/{environment.pk}/attachments/"
    response = api.post(
        url, {"name": "chart.png", "content_base64": base64.b64encode(png).decode()}, format="json"
    )
    sha = hashlib.sha256(png).hexdigest()
    assert response.status_code == 201
    assert response.json() == {
        "sha256": sha,
        "media_type": "image/png",
        "size": len(png),
        "name": "chart.png",
        "ref": f"sha256:{sha}",
    }
    listed = api.get(url).json()
    names = [f"receipt-rc-{i}.png" for i in (1, 2, 3, 4)]
    assert (listed["count"], listed["next"], listed["previous"]) == (5, None, None)
    assert [a["name"] for a in listed["results"]] == [*names, "chart.png"]


def test_api_refuses_bad_base64_and_a_too_low_role(api_client_for, author, viewer, environment):
    url = f"/api/v1/environments/{environment.pk}/attachments/"
    bad = api_client_for(author).post(
        url, {"name": "x.png", "content_base64": "not base64!"}, format="json"
    )
    assert (bad.status_code, bad.json()["message"]) == (400, "content_base64 is not valid base64.")
    denied = api_client_for(viewer).post(
        url, {"name": "x.png", "content_base64": base64.b64encode(PDF).decode()}, format="json"
    )
    assert denied.status_code == 403
    environment.refresh_from_db()
    assert len(environment.attachments) == 4


# --- serving ---------------------------------------------------------------------------------


def test_members_get_the_image_inline_and_the_pdf_as_a_download(
    client_for, viewer, environment, receipts
):
    doc, files = receipts
    sha = doc["attachments"][0]["sha256"]
    client = client_for(viewer)
    response = client.get(f"/environments/{environment.pk}/attachments/{sha}/")
    assert response.status_code == 200
    assert response.content == files[sha]
    assert (response["Content-Type"], response["X-Content-Type-Options"]) == (
        "image/png",
        "nosniff",
    )
    assert response["Content-Disposition"] == 'inline; filename="receipt-rc-1.png"'
    assert response["Content-Security-Policy"] == "default-src 'none'; sandbox"
    pdf = attachment_add(environment=environment, data=PDF, name="policy.pdf")
    download = client.get(f"/environments/{environment.pk}/attachments/{pdf.sha256}/")
    assert download["Content-Disposition"] == 'attachment; filename="policy.pdf"'
    cached = client.get(
        f"/environments/{environment.pk}/attachments/{sha}/", HTTP_IF_NONE_MATCH=f'"{sha}"'
    )
    assert (cached.status_code, cached.content) == (304, b"")


def test_a_hash_the_environment_does_not_list_or_an_outsider_gets_404(
    client_for, viewer, outsider, environment, receipts
):
    doc, _ = receipts
    listed = doc["attachments"][0]["sha256"]
    stored_elsewhere = hashlib.sha256(b"x").hexdigest()
    response = client_for(viewer).get(
        f"/environments/{environment.pk}/attachments/{stored_elsewhere}/"
    )
    assert response.status_code == 404
    outside = client_for(outsider).get(f"/environments/{environment.pk}/attachments/{listed}/")
    missing = client_for(outsider).get(f"/environments/987654321/attachments/{listed}/")
    assert (outside.status_code, outside.content) == (missing.status_code, missing.content)
    assert outside.status_code == 404
    post = client_for(viewer).post(f"/environments/{environment.pk}/attachments/{listed}/")
    assert post.status_code == 405


# --- zip export and import -------------------------------------------------------------------


def test_the_zip_export_carries_the_files_and_imports_elsewhere_with_them(
    environment, receipts, other_project, outsider
):
    import io
    import zipfile

    from apps.environments.services import environment_import_upload, environments_export_zip

    doc, files = receipts
    content = environments_export_zip(environments=[environment])
    with zipfile.ZipFile(io.BytesIO(content)) as archive:
        names = sorted(archive.namelist())
    assert names == sorted(
        [f"orbital-foods-expense-receipts-{environment.pk}.json"]
        + [f"attachments/{s}" for s in files]
    )
    for sha in files:  # another deployment: nothing stored yet
        attachment_storage().delete(attachment_name(sha))

    (imported,) = environment_import_upload(
        project=other_project, user=outsider, filename="export.zip", content=content
    )

    assert imported.attachments == doc["attachments"]
    assert all(attachment_bytes(sha) == data for sha, data in files.items())
    assert environment_validate(environment=imported).valid


def test_a_zip_whose_attachment_member_differs_from_its_entry_imports_nothing(
    environment, receipts, other_project, outsider
):
    import io
    import zipfile

    from apps.environments.services import environment_import_upload, environments_export_zip

    doc, _ = receipts
    sha = doc["attachments"][0]["sha256"]
    original = environments_export_zip(environments=[environment])
    buffer = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(original)) as source, zipfile.ZipFile(buffer, "w") as out:
        for info in source.infolist():
            data = source.read(info)
            out.writestr(
                info.filename, tiny_png((7, 7, 7)) if info.filename.endswith(sha) else data
            )
    attachment_storage().delete(attachment_name(sha))

    with pytest.raises(ApplicationError) as raised:
        environment_import_upload(
            project=other_project, user=outsider, filename="x.zip", content=buffer.getvalue()
        )

    assert raised.value.message.startswith("Attachment 'receipt-rc-1.png': the stored bytes hash")
    assert Environment.objects.filter(project=other_project).count() == 0
    assert attachment_bytes(sha) is None


def test_the_overview_lists_the_attachments_as_thumbnails_and_links(
    client_for, viewer, environment, receipts
):
    from tests.conftest import HTMX_HEADERS

    doc, _ = receipts
    attachment_add(environment=environment, data=PDF, name="policy.pdf")
    url = f"/environments/{environment.pk}/"
    body = client_for(viewer).get(url).content.decode()
    assert body.count('data-testid="thumbnail"') == len(doc["attachments"])
    first = doc["attachments"][0]["sha256"]
    assert (
        f'src="/environments/{environment.pk}/attachments/{first}/" alt="receipt-rc-1.png"' in body
    )
    assert body.count('data-testid="document-link"') == 1
    partial = client_for(viewer).get(url, **HTMX_HEADERS).content.decode()
    assert 'data-testid="attachments"' in partial


def test_an_environment_without_attachments_shows_no_attachment_panel(
    client_for, viewer, project, author
):
    import json
    from pathlib import Path

    from apps.environments.services import environment_import

    sample = Path(__file__).resolve().parents[2] / "samples" / "acme-ops.json"
    plain = environment_import(project=project, spec=json.loads(sample.read_text()), user=author)
    body = client_for(viewer).get(f"/environments/{plain.pk}/").content.decode()
    assert 'data-testid="attachments"' not in body
