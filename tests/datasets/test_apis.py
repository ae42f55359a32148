"""REST API: datasets, versions, rows, rebuild/verify, and streamed exports."""

import hashlib
import json

import jsonschema
import pytest
from rest_framework.test import APIClient

from apps.accounts.services import api_token_create
from apps.datasets.models import Dataset, DatasetVersion
from apps.datasets.services import export_absolute_path
from apps.datasets.services.datasets import dataset_create
from tests.datasets.conftest import make_demonstration
from tests.datasets.test_formats import OPENAI_LINE_SCHEMA


def _body(response) -> bytes:
    if response.streaming:
        return b"".join(response.streaming_content)
    return response.content


def _export_url(version, **query) -> str:
    params = "&".join(f"{key}={value}" for key, value in query.items())
    return f"/api/v1/datasets/{version.dataset_id}/versions/{version.number}/export/?{params}"


@pytest.fixture
def token_client(viewer):
    _token, secret = api_token_create(user=viewer, name="trainer")
    return APIClient(HTTP_AUTHORIZATION=f"Bearer {secret}")


def test_export_streams_the_cached_file_with_etag_and_checksum(token_client, built_version):
    response = token_client.get(_export_url(built_version, format="openai", split="train"))
    assert response.status_code == 200
    export = built_version.exports.get(format="openai", split="train")
    body = _body(response)
    assert response["Content-Length"] == str(export.size) == str(len(body))
    assert response["ETag"] == f'"{export.sha256}"'
    assert hashlib.sha256(body).hexdigest() == export.sha256
    assert response["X-Dataset-Checksum"] == built_version.checksum
    assert response["X-Dataset-Rows"] == str(built_version.train_rows)
    assert response["Content-Type"] == "application/jsonl; charset=utf-8"
    assert 'filename="coworker-sft-v1-openai-train.jsonl"' in response["Content-Disposition"]
    lines = body.decode().splitlines()
    assert len(lines) == built_version.train_rows
    for line in lines:
        jsonschema.validate(json.loads(line), OPENAI_LINE_SCHEMA)


def test_if_none_match_answers_304(token_client, built_version):
    export = built_version.exports.get(format="trl", split="validation")
    url = _export_url(built_version, format="trl", split="validation")
    response = token_client.get(url, HTTP_IF_NONE_MATCH=f'"{export.sha256}"')
    assert response.status_code == 304
    assert response["ETag"] == f'"{export.sha256}"'
    assert _body(response) == b""
    assert token_client.get(url, HTTP_IF_NONE_MATCH='"something-else"').status_code == 200


def test_a_missing_cache_file_is_streamed_again_and_recached(token_client, built_version):
    export = built_version.exports.get(format="sharegpt", split="train")
    path = export_absolute_path(export)
    original = path.read_bytes()
    path.unlink()
    response = token_client.get(_export_url(built_version, format="sharegpt", split="train"))
    assert response.status_code == 200
    assert response.streaming
    assert not response.has_header("Content-Length")
    assert response["ETag"] == f'"{export.sha256}"'
    assert _body(response) == original
    assert path.read_bytes() == original  # cached again once streamed whole
    again = token_client.get(_export_url(built_version, format="sharegpt", split="train"))
    assert again["Content-Length"] == str(len(original))


def test_card_and_dataset_info(token_client, built_version):
    response = token_client.get(_export_url(built_version, format="card"))
    assert response.status_code == 200
    assert response["Content-Type"] == "text/markdown; charset=utf-8"
    text = _body(response).decode()
    assert text.startswith("# Coworker SFT — version 1")
    assert built_version.checksum in text
    info = token_client.get(_export_url(built_version, format="dataset_info")).json()
    assert info == {
        f"coworker_sft_v1{key}_{split}": {
            "file_name": f"coworker-sft-v1-{fmt}-{split}.jsonl",
            "formatting": "sharegpt",
            "columns": {"messages": "conversations", "system": "system", "tools": "tools"},
            "tags": {
                "role_tag": "from",
                "content_tag": "value",
                "user_tag": "human",
                "assistant_tag": "gpt",
                "observation_tag": "observation",
                "function_tag": "function_call",
            },
        }
        for split in ("train", "validation")
        for key, fmt in (("", "sharegpt"), ("_turns", "sharegpt_turns"))
    }


def test_bad_export_requests(token_client, built_version):
    assert token_client.get(_export_url(built_version, format="csv")).status_code == 400
    response = token_client.get(_export_url(built_version, format="openai"))
    assert response.status_code == 400
    assert response.json()["message"] == "split is one of train, validation."
    missing = f"/api/v1/datasets/{built_version.dataset_id}/versions/9/export/?format=card"
    assert token_client.get(missing).status_code == 404


def test_a_linter_failure_is_409_with_the_errors(
    token_client, dataset, author, sample_environments
):
    from tests.datasets.conftest import build_version, make_demonstration

    make_demonstration(sample_environments[0], "book-q3-review")
    version = build_version(dataset, author, validation_fraction=0)
    response = token_client.get(_export_url(version, format="openai", split="train"))
    assert response.status_code == 409
    body = response.json()
    assert body["message"] == (
        "The openai export of the train split failed its linter (1 errors), so it is not offered."
    )
    assert body["details"]["lint"]["error_count"] == 1
    empty = token_client.get(_export_url(version, format="trl", split="validation"))
    assert empty.status_code == 404
    assert empty.json()["message"] == "The validation split of version 1 has no rows."


def test_a_building_version_is_409(token_client, dataset, author, sample_environments):
    from apps.datasets.services import VersionFilter, dataset_version_create

    make_demonstration(sample_environments[0], "book-q3-review")
    version = dataset_version_create(dataset=dataset, user=author, filters=VersionFilter())
    response = token_client.get(_export_url(version, format="openai", split="train"))
    assert response.status_code == 409
    assert response.json()["details"] == {"job": version.job_id}


def test_outsider_gets_404_everywhere(api_client_for, outsider, built_version):
    client = api_client_for(outsider)
    dataset = built_version.dataset
    for url in (
        f"/api/v1/projects/{dataset.project_id}/datasets/",
        f"/api/v1/datasets/{dataset.pk}/",
        f"/api/v1/datasets/{dataset.pk}/versions/",
        f"/api/v1/datasets/{dataset.pk}/versions/1/",
        f"/api/v1/datasets/{dataset.pk}/versions/1/rows/",
        _export_url(built_version, format="openai", split="train"),
        _export_url(built_version, format="card"),
    ):
        assert client.get(url).status_code == 404, url
    assert (
        client.post(f"/api/v1/datasets/{dataset.pk}/versions/", {}, format="json").status_code
        == 404
    )
    assert DatasetVersion.objects.count() == 1


def test_anonymous_is_401(built_version):
    response = APIClient().get(_export_url(built_version, format="openai", split="train"))
    assert response.status_code == 401


def test_viewer_reads_but_cannot_create(token_client, built_version, viewer):
    dataset = built_version.dataset
    listed = token_client.get(f"/api/v1/projects/{dataset.project_id}/datasets/").json()
    assert [
        (d["id"], d["name"], d["version_count"], d["latest_version"]) for d in listed["results"]
    ] == [(dataset.pk, "Coworker SFT", 1, 1)]
    versions = token_client.get(f"/api/v1/datasets/{dataset.pk}/versions/").json()["results"]
    assert [(v["number"], v["status"], v["checksum"]) for v in versions] == [
        (1, "ready", built_version.checksum)
    ]
    response = token_client.post(f"/api/v1/datasets/{dataset.pk}/versions/", {}, format="json")
    assert response.status_code == 403
    assert (
        token_client.post(f"/api/v1/datasets/{dataset.pk}/versions/1/rebuild/").status_code == 403
    )
    assert token_client.post(f"/api/v1/datasets/{dataset.pk}/versions/1/verify/").status_code == 403
    response = token_client.post(
        f"/api/v1/projects/{dataset.project_id}/datasets/", {"name": "Mine"}, format="json"
    )
    assert response.status_code == 403
    assert DatasetVersion.objects.count() == 1
    assert Dataset.objects.count() == 1


def test_version_detail_and_rows(token_client, built_version):
    dataset = built_version.dataset
    detail = token_client.get(f"/api/v1/datasets/{dataset.pk}/versions/1/").json()
    assert (detail["train_rows"], detail["validation_rows"], detail["excluded_eval"]) == (
        built_version.train_rows,
        built_version.validation_rows,
        3,
    )
    assert detail["token_stats"]["all"]["rows"] == 18
    assert {(e["format"], e["split"], e["status"]) for e in detail["exports"]} >= {
        ("openai", "train", "ready"),
        ("card", "", "ready"),
    }
    openai_train = next(
        e for e in detail["exports"] if (e["format"], e["split"]) == ("openai", "train")
    )
    assert openai_train["url"].endswith(
        f"/api/v1/datasets/{dataset.pk}/versions/1/export/?format=openai&split=train"
    )
    rows = token_client.get(
        f"/api/v1/datasets/{dataset.pk}/versions/1/rows/?split=validation"
    ).json()
    assert rows["count"] == built_version.validation_rows
    assert [r["position"] for r in rows["results"]] == list(range(built_version.validation_rows))
    assert {r["split"] for r in rows["results"]} == {"validation"}


def test_author_creates_a_version_and_gets_its_job(
    api_client_for,
    author,
    dataset,
    approved_demonstrations,
    django_capture_on_commit_callbacks,
    monkeypatch,
):
    sent = []
    monkeypatch.setattr("apps.datasets.tasks.build_dataset_version_task.delay", sent.append)
    with django_capture_on_commit_callbacks(execute=True):
        response = api_client_for(author).post(
            f"/api/v1/datasets/{dataset.pk}/versions/",
            {
                "seed": 3,
                "validation_fraction": 0.2,
                "min_score": 0.5,
                "max_tokens": 8000,
                "long_trajectories": "drop",
            },
            format="json",
        )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["version"]["max_tokens"], body["version"]["long_trajectories"]) == (8000, "drop")
    assert body["version"]["long_counts"] == {}
    version = DatasetVersion.objects.get()
    assert body["version"]["number"] == 1
    assert body["version"]["status"] == "building"
    assert body["job"]["id"] == version.job_id
    assert body["job"]["status"] == "pending"
    assert sent == [version.job_id]
    assert version.filters == {
        "approved_only": True,
        "capabilities": [],
        "environments": [],
        "min_score": 0.5,
        "min_agreement": None,
        "splits": ["train"],
    }
    bad = api_client_for(author).post(
        f"/api/v1/datasets/{dataset.pk}/versions/",
        {"capabilities": ["no-such-capability"]},
        format="json",
    )
    assert bad.status_code == 400
    assert (
        bad.json()["message"] == "The filter is not valid: Not in this project: no-such-capability."
    )
    assert DatasetVersion.objects.count() == 1


def test_author_creates_a_dataset(api_client_for, author, project):
    client = api_client_for(author)
    response = client.post(
        f"/api/v1/projects/{project.pk}/datasets/",
        {"name": "Agents", "description": "x"},
        format="json",
    )
    assert response.status_code == 201
    assert response.json()["name"] == "Agents"
    again = client.post(
        f"/api/v1/projects/{project.pk}/datasets/", {"name": "Agents"}, format="json"
    )
    assert again.status_code == 400
    assert again.json()["message"] == "This project already has a dataset named “Agents”."


def test_same_name_in_another_project_is_fine(other_project, project, author, outsider):
    dataset_create(project=project, name="Shared name", user=author)
    dataset_create(project=other_project, name="Shared name", user=outsider)
    assert Dataset.objects.filter(name="Shared name").count() == 2


def test_the_schema_describes_the_export(db):
    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.validation import validate_schema

    schema = SchemaGenerator().get_schema(request=None, public=True)
    validate_schema(schema)
    paths = schema["paths"]
    export = paths["/api/v1/datasets/{id}/versions/{number}/export/"]["get"]
    assert export["operationId"] == "dataset_versions_export"
    assert {p["name"] for p in export["parameters"]} >= {"format", "split", "If-None-Match"}
    assert "/api/v1/datasets/{id}/versions/{number}/export" not in paths
    assert "/api/v1/projects/{id}/datasets/" in paths


def test_an_empty_build_is_refused_by_the_api_before_a_version_exists(
    api_client_for, author, dataset, sample_environments
):
    make_demonstration(sample_environments[0], "notice-moved-dentist")  # an eval task
    response = api_client_for(author).post(
        f"/api/v1/datasets/{dataset.pk}/versions/", {}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["message"] == (
        "Nothing to build: the filter matches 1 approved demonstration, all of eval tasks, "
        "which never enter a dataset. Approve train-task demonstrations in the review queue, "
        "or widen the filter."
    )
    assert not DatasetVersion.objects.exists()


def test_a_dataset_names_its_tokenizer_over_the_api(api_client_for, author, project, settings):
    settings.DATASET_TOKENIZERS = {"qwen": "/models/qwen"}
    client = api_client_for(author)
    url = f"/api/v1/projects/{project.pk}/datasets/"
    created = client.post(url, {"name": "Counted", "tokenizer": "qwen"}, format="json")
    assert created.status_code == 201
    assert created.json()["tokenizer"] == "qwen"
    refused = client.post(url, {"name": "Odd", "tokenizer": "gpt2"}, format="json")
    assert refused.status_code == 400
    assert refused.json()["message"] == "No tokenizer named “gpt2” is configured on this server."
    huge = client.post(url, {"name": "Odd", "tokenizer": "t" * 100_000}, format="json")
    assert huge.status_code == 400
    assert huge.json()["details"] == {
        "tokenizer": ["Ensure this field has no more than 120 characters."]
    }
    assert not Dataset.objects.filter(name="Odd").exists()


def test_version_detail_reports_removals_groups_and_token_counting(token_client, built_version):
    detail = token_client.get(
        f"/api/v1/datasets/{built_version.dataset_id}/versions/{built_version.number}/"
    ).json()
    assert (detail["removed_duplicates"], detail["removed_near_duplicates"]) == (0, 0)
    assert detail["removals"] == []
    assert detail["tokenizer"] == ""
    assert detail["token_counting"].startswith("estimated: characters of the row's canonical JSON")
    assert [(g["split"], g["rows"]) for g in detail["groups"]] == [
        ("train", 6),
        ("train", 6),
        ("validation", 6),
    ]
