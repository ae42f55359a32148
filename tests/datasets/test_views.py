"""Dataset pages: list, create, detail, new version, version detail, progress, verify,
rebuild and downloads — roles, htmx variants, escaping."""

import pytest
from django.urls import reverse

from apps.core.models import Job
from apps.datasets.models import Dataset, DatasetVersion
from apps.datasets.services import dataset_create
from tests.conftest import HTMX_HEADERS
from tests.datasets.conftest import make_demonstration


def _urls(version):
    d, n = version.dataset_id, version.number
    return {
        "detail": f"/datasets/{d}/",
        "version": f"/datasets/{d}/versions/{n}/",
        "progress": f"/datasets/{d}/versions/{n}/progress/",
        "download": f"/datasets/{d}/versions/{n}/download/openai/train/",
        "card": f"/datasets/{d}/versions/{n}/download/card/",
    }


def test_list_and_empty_state(client_for, viewer, project):
    response = client_for(viewer).get("/p/acme/datasets/")
    assert response.status_code == 200
    assert "No datasets yet." in response.content.decode()
    assert "New dataset" not in response.content.decode()  # viewers create nothing


def test_list_shows_datasets_and_the_htmx_variant_is_the_rows(client_for, author, built_version):
    client = client_for(author)
    page = client.get("/p/acme/datasets/").content.decode()
    assert "Coworker SFT" in page and ">v1</a>" in page and "New dataset" in page
    fragment = client.get("/p/acme/datasets/", **HTMX_HEADERS).content.decode()
    assert fragment.lstrip().startswith('<div id="dataset-rows">')
    assert "<html" not in fragment


def test_list_refuses_outsiders_anonymous_and_posts(client, client_for, outsider, project):
    assert client.get("/p/acme/datasets/").status_code == 302
    assert client_for(outsider).get("/p/acme/datasets/").status_code == 404
    assert client_for(outsider).post("/p/other/datasets/").status_code == 405


def test_create_dataset(client_for, author, project):
    client = client_for(author)
    assert client.get("/p/acme/datasets/new/").status_code == 200
    response = client.post("/p/acme/datasets/new/", {"name": "Agents", "description": "For SFT"})
    dataset = Dataset.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/datasets/{dataset.pk}/"
    assert (dataset.name, dataset.description, dataset.created_by) == ("Agents", "For SFT", author)
    # htmx: an invalid form re-renders its partial (duplicate name).
    again = client.post("/p/acme/datasets/new/", {"name": "Agents"}, **HTMX_HEADERS)
    assert again.status_code == 200
    assert "Already taken in this project." in again.content.decode()
    assert again.content.decode().lstrip().startswith("<form")
    ok = client.post("/p/acme/datasets/new/", {"name": "Second"}, **HTMX_HEADERS)
    assert ok["HX-Redirect"] == f"/datasets/{Dataset.objects.get(name='Second').pk}/"


def test_create_dataset_refusals(client, client_for, viewer, outsider, project):
    assert client.post("/p/acme/datasets/new/", {"name": "x"}).status_code == 302
    assert client_for(viewer).post("/p/acme/datasets/new/", {"name": "x"}).status_code == 403
    assert client_for(outsider).post("/p/acme/datasets/new/", {"name": "x"}).status_code == 404
    assert client_for(viewer).put("/p/acme/datasets/new/").status_code == 405
    assert not Dataset.objects.exists()


def test_dataset_detail(client_for, viewer, outsider, built_version):
    urls = _urls(built_version)
    page = client_for(viewer).get(urls["detail"]).content.decode()
    assert built_version.checksum[:12] in page
    assert "New version" not in page
    fragment = client_for(viewer).get(urls["detail"], **HTMX_HEADERS).content.decode()
    assert fragment.lstrip().startswith('<div id="version-rows">')
    assert client_for(outsider).get(urls["detail"]).status_code == 404
    assert client_for(viewer).post(urls["detail"]).status_code == 405


def test_new_version_form_builds_through_a_job(
    client_for,
    author,
    dataset,
    approved_demonstrations,
    django_capture_on_commit_callbacks,
    monkeypatch,
):
    sent = []
    monkeypatch.setattr("apps.datasets.tasks.build_dataset_version_task.delay", sent.append)
    client = client_for(author)
    form = client.get(f"/datasets/{dataset.pk}/versions/new/")
    assert form.status_code == 200
    assert "follow-policy" in form.content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            f"/datasets/{dataset.pk}/versions/new/",
            {"seed": "5", "validation_fraction": "0.2", "capabilities": ["follow-policy"]},
        )
    version = DatasetVersion.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/datasets/{dataset.pk}/versions/1/"
    assert sent == [version.job_id]
    assert (version.seed, version.validation_fraction, version.filters["capabilities"]) == (
        5,
        0.2,
        ["follow-policy"],
    )
    page = client.get(response["Location"]).content.decode()
    assert 'data-status="building"' in page
    assert f'hx-get="/datasets/{dataset.pk}/versions/1/progress/"' in page
    bad = client.post(
        f"/datasets/{dataset.pk}/versions/new/",
        {"seed": "1", "validation_fraction": "0.9"},
        **HTMX_HEADERS,
    )
    assert bad.status_code == 200
    assert "Ensure this value is less than or equal to 0.5." in bad.content.decode()
    assert DatasetVersion.objects.count() == 1
    assert (version.max_tokens, version.long_trajectories) == (None, "split")
    with django_capture_on_commit_callbacks(execute=True):
        limited = client.post(
            f"/datasets/{dataset.pk}/versions/new/",
            {
                "seed": "5",
                "validation_fraction": "0.2",
                "max_tokens": "4096",
                "long_trajectories": "drop",
            },
        )
    assert limited["Location"] == f"/datasets/{dataset.pk}/versions/2/"
    second = DatasetVersion.objects.get(number=2)
    assert (second.max_tokens, second.long_trajectories) == (4096, "drop")
    # The next form starts from the latest version's choices.
    again = client.get(f"/datasets/{dataset.pk}/versions/new/").content.decode()
    assert 'name="max_tokens" value="4096"' in again
    bad = client.post(
        f"/datasets/{dataset.pk}/versions/new/",
        {"seed": "1", "validation_fraction": "0.1", "long_trajectories": "truncate"},
        **HTMX_HEADERS,
    )
    assert "Select a valid choice. truncate is not one of the available choices." in (
        bad.content.decode()
    )
    assert DatasetVersion.objects.count() == 2


def test_a_build_that_would_be_empty_is_refused_on_the_form(
    client_for, author, dataset, sample_environments
):
    from tests.datasets.conftest import make_demonstration

    make_demonstration(sample_environments[0], "notice-moved-dentist")  # an eval task
    url = f"/datasets/{dataset.pk}/versions/new/"
    for headers in ({}, HTMX_HEADERS):
        response = client_for(author).post(
            url, {"seed": "1", "validation_fraction": "0.1"}, **headers
        )
        assert response.status_code == 200
        assert (
            "Nothing to build: the filter matches 1 approved demonstration, all of eval tasks"
            in response.content.decode()
        )
    assert not DatasetVersion.objects.exists()
    assert not Job.objects.exists()


def test_new_version_refusals(client, client_for, viewer, outsider, dataset):
    url = f"/datasets/{dataset.pk}/versions/new/"
    data = {"seed": "1", "validation_fraction": "0.1"}
    assert client.post(url, data).status_code == 302
    assert client_for(viewer).post(url, data).status_code == 403
    assert client_for(outsider).post(url, data).status_code == 404
    assert client_for(viewer).delete(url).status_code == 405
    assert not DatasetVersion.objects.exists()
    assert not Job.objects.exists()


def test_version_detail_shows_figures_exports_and_rows(client_for, viewer, built_version):
    client = client_for(viewer)
    urls = _urls(built_version)
    page = client.get(urls["version"]).content.decode()
    assert built_version.checksum in page
    assert f'href="{urls["download"]}"' in page
    assert 'data-testid="download-openai-validation"' in page
    assert "Rebuild" not in page and "Verify" not in page  # viewer
    assert "Coworker SFT — version 1" in page  # the card, as text
    assert 'data-testid="no-limit"' in page  # no maximum length: no splitting
    assert page.count("<tr") >= 18
    fragment = client.get(urls["version"] + "?split=validation", **HTMX_HEADERS).content.decode()
    assert fragment.lstrip().startswith('<div id="version-rows">')
    assert fragment.count("<td>validation</td>") == built_version.validation_rows
    assert "<td>train</td>" not in fragment


def test_version_detail_escapes_the_card_and_names(
    client_for, author, project, approved_demonstrations
):
    from tests.datasets.conftest import build_version

    dataset = dataset_create(project=project, name="<script>alert(1)</script>", user=author)
    version = build_version(dataset, author)
    page = client_for(author).get(_urls(version)["version"]).content.decode()
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_lint_errors_are_shown_and_nothing_is_offered(
    client_for, viewer, dataset, author, sample_environments
):
    from tests.datasets.conftest import build_version, make_demonstration

    make_demonstration(sample_environments[0], "book-q3-review")
    version = build_version(dataset, author, validation_fraction=0)
    page = client_for(viewer).get(_urls(version)["version"]).content.decode()
    assert "failed its linter" in page
    assert "The training file has 1 examples; openai needs at least 10." in page
    assert 'data-testid="download-openai-train"' not in page
    assert 'data-testid="download-trl-train"' in page
    assert client_for(viewer).get(_urls(version)["download"]).status_code == 404


def test_progress_partial_polls_until_done(
    client_for, viewer, dataset, author, sample_environments
):
    from apps.datasets.services import VersionFilter, dataset_version_create

    make_demonstration(sample_environments[0], "book-q3-review")
    version = dataset_version_create(dataset=dataset, user=author, filters=VersionFilter())
    client = client_for(viewer)
    polling = client.get(_urls(version)["progress"], **HTMX_HEADERS)
    assert 'hx-trigger="every 2s"' in polling.content.decode()
    assert not polling.has_header("HX-Refresh")
    Job.objects.filter(pk=version.job_id).update(status="succeeded")
    done = client.get(_urls(version)["progress"], **HTMX_HEADERS)
    assert done["HX-Refresh"] == "true"


def test_download_sends_the_file(client_for, viewer, built_version, outsider):
    from django.test import Client

    urls = _urls(built_version)
    response = client_for(viewer).get(urls["download"])
    export = built_version.exports.get(format="openai", split="train")
    assert response.status_code == 200
    assert response["ETag"] == f'"{export.sha256}"'
    assert response["Content-Length"] == str(export.size)
    assert b"".join(response.streaming_content).count(b"\n") == built_version.train_rows
    card = client_for(viewer).get(urls["card"])
    assert card["Content-Type"] == "text/markdown; charset=utf-8"
    assert client_for(outsider).get(urls["download"]).status_code == 404
    assert Client().get(urls["download"]).status_code == 302
    assert client_for(viewer).get(urls["version"] + "download/csv/train/").status_code == 404


def test_verify_and_rebuild_actions(
    client_for, author, viewer, built_version, django_capture_on_commit_callbacks, monkeypatch
):
    built, verified = [], []
    monkeypatch.setattr("apps.datasets.tasks.build_dataset_version_task.delay", built.append)
    monkeypatch.setattr("apps.datasets.tasks.verify_dataset_version_task.delay", verified.append)
    urls = _urls(built_version)
    # viewers may do neither
    assert client_for(viewer).post(urls["version"] + "verify/").status_code == 403
    assert client_for(viewer).post(urls["version"] + "rebuild/").status_code == 403
    assert client_for(viewer).get(urls["version"] + "rebuild/").status_code == 405
    assert (built, verified, DatasetVersion.objects.count()) == ([], [], 1)
    client = client_for(author)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(urls["version"] + "verify/", **HTMX_HEADERS)
    built_version.refresh_from_db()
    assert response["HX-Redirect"] == urls["version"]
    assert verified == [built_version.verify_job_id]
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(urls["version"] + "rebuild/")
    rebuild = DatasetVersion.objects.get(number=2)
    assert response["Location"] == f"/datasets/{built_version.dataset_id}/versions/2/"
    assert built == [rebuild.job_id]
    assert rebuild.rebuilt_from == built_version


@pytest.mark.parametrize("path", ["/p/acme/datasets/"])
def test_nav_has_datasets(client_for, viewer, path):
    page = client_for(viewer).get(path).content.decode()
    assert '<a href="/p/acme/datasets/" aria-current="page">Datasets</a>' in page


def test_page_queries_do_not_grow_with_rows(
    client_for, viewer, author, dataset, sample_environments, built_version
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from apps.datasets.services import VersionFilter
    from tests.datasets.conftest import build_version

    small = build_version(
        dataset,
        author,
        filters=VersionFilter(environments=(sample_environments[0].pk,)),
        validation_fraction=0,
    )
    assert (small.rows_total, built_version.rows_total) == (6, 18)
    client = client_for(viewer)
    counts = []
    for version in (small, built_version):
        with CaptureQueriesContext(connection) as queries:
            assert client.get(_urls(version)["version"]).status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1]
    listed = []
    for extra in range(2):
        dataset_create(project=dataset.project, name=f"More {extra}", user=author)
        with CaptureQueriesContext(connection) as queries:
            assert client.get("/p/acme/datasets/").status_code == 200
        listed.append(len(queries))
    assert listed[0] == listed[1]


def test_edit_dataset(client, client_for, author, viewer, outsider, dataset):
    url = reverse("datasets:edit", args=[dataset.pk])
    assert client.get(url).status_code == 302
    assert client_for(outsider).get(url).status_code == 404
    assert client_for(viewer).post(url, {"name": "Hijacked", "description": ""}).status_code == 403
    dataset.refresh_from_db()
    assert dataset.name != "Hijacked"
    editor = client_for(author)
    assert editor.get(url).status_code == 200
    invalid = editor.post(url, {"name": "", "description": ""}, **HTMX_HEADERS)
    assert (invalid.status_code, b"<html" in invalid.content) == (200, False)
    response = editor.post(url, {"name": "Renamed SFT", "description": "For the v2 student"})
    assert response["Location"] == reverse("datasets:detail", args=[dataset.pk])
    dataset.refresh_from_db()
    assert (dataset.name, dataset.description) == ("Renamed SFT", "For the v2 student")


def test_edit_dataset_name_clash_is_a_form_error(client_for, author, project, dataset):
    dataset_create(project=project, name="Taken", user=author)
    response = client_for(author).post(
        reverse("datasets:edit", args=[dataset.pk]), {"name": "Taken", "description": ""}
    )
    assert response.status_code == 200
    assert "Already taken in this project." in response.content.decode()


def test_delete_dataset_removes_versions_and_files(
    client_for, author, admin, built_version, django_capture_on_commit_callbacks
):
    from apps.datasets.models import DatasetExport
    from apps.datasets.services import export_absolute_path

    dataset = built_version.dataset
    files = [
        export_absolute_path(e)
        for e in DatasetExport.objects.filter(version=built_version).exclude(path="")
    ]
    assert files and all(path.exists() for path in files)
    url = reverse("datasets:delete", args=[dataset.pk])
    assert client_for(author).post(url).status_code == 403  # only admins delete
    assert Dataset.objects.filter(pk=dataset.pk).exists()
    client = client_for(admin)
    assert "1 version" in client.get(url).content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url)
    assert response["Location"] == reverse("datasets:list", args=[dataset.project.slug])
    assert not Dataset.objects.filter(pk=dataset.pk).exists()
    assert not DatasetVersion.objects.filter(pk=built_version.pk).exists()
    assert not any(path.exists() for path in files)


def test_the_sample_api_url_names_an_offered_export(
    client_for, viewer, author, dataset, sample_environments
):
    from apps.datasets.card import sample_export
    from apps.datasets.models import ExportStatus
    from tests.datasets.conftest import build_version

    # Three train rows: OpenAI's linter refuses a train file under 10 rows, TRL's does not.
    for key in ("book-q3-review", "budget-figure-clarify"):
        make_demonstration(sample_environments[0], key)
    make_demonstration(sample_environments[1], "book-invoices")
    version = build_version(dataset, author, validation_fraction=0.0)
    assert version.exports.get(format="openai", split="train").status == ExportStatus.INVALID
    page = client_for(viewer).get(_urls(version)["version"]).content.decode()
    assert (
        f'data-testid="api-sample">http://testserver/api/v1/datasets/{dataset.pk}/versions/1/'
        "export/?format=trl&amp;split=train<" in page
    )
    card = version.exports.get(format="card")
    from apps.datasets.services import export_absolute_path

    text = export_absolute_path(card).read_text()
    assert '?format=trl&split=train" -OJ' in text
    assert "format=openai" not in text.split("Download over the REST API")[1]
    # The preference order, and nothing offered at all.
    assert sample_export([{"format": "sharegpt", "split": "validation", "status": "ready"}]) == (
        "sharegpt",
        "validation",
    )
    assert sample_export([{"format": "openai", "split": "train", "status": "invalid"}]) is None


def test_the_dataset_form_offers_the_configured_tokenizers(client_for, author, project, settings):
    settings.DATASET_TOKENIZERS = {"qwen": "/models/qwen", "llama": "/models/llama"}
    settings.DATASET_TOKENIZER_DEFAULT = "qwen"
    client = client_for(author)
    form = client.get("/p/acme/datasets/new/").content.decode()
    assert '<option value="" selected>Server default (qwen)</option>' in form
    assert '<option value="llama">llama</option>' in form
    response = client.post("/p/acme/datasets/new/", {"name": "Counted", "tokenizer": "llama"})
    assert response.status_code == 302
    assert Dataset.objects.get(name="Counted").tokenizer == "llama"
    bad = client.post("/p/acme/datasets/new/", {"name": "Odd", "tokenizer": "gpt2"}, **HTMX_HEADERS)
    assert bad.status_code == 200
    assert "Select a valid choice. gpt2 is not one of the available choices." in (
        bad.content.decode()
    )
    assert not Dataset.objects.filter(name="Odd").exists()
    settings.DATASET_TOKENIZERS = {}
    settings.DATASET_TOKENIZER_DEFAULT = ""
    plain = client.get("/p/acme/datasets/new/").content.decode()
    assert '<option value="" selected>None: estimate (characters / 4)</option>' in plain
