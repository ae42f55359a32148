"""The `trl_parquet` export: `datasets.load_dataset("parquet", data_files=URL)` reads it from
the app served on loopback, with the token in the headers, and decodes its `Image` feature to
the very pictures the view tool returned; a text-only version gets the same file without
pictures; a file gone from the cache answers 410; other projects' tokens get 404."""

import json

import pytest
import requests

from apps.accounts.services import api_token_create
from apps.datasets.services import export_absolute_path
from tests.datasets.test_multimodal_exports import receipts, version  # noqa: F401

datasets = pytest.importorskip("datasets")  # the `train` extra (with Pillow)
pytest.importorskip("aiohttp")  # fsspec's HTTP filesystem

pytestmark = pytest.mark.django_db


def _url(server, built, split="train"):
    return (
        f"{server.url}/api/v1/datasets/{built.dataset_id}/versions/{built.number}"
        f"/export/?format=trl_parquet&split={split}"
    )


def _load(url, secret, cache):
    return datasets.load_dataset(
        "parquet",
        data_files=url,
        storage_options={"headers": {"Authorization": f"Bearer {secret}"}},
        split="train",
        cache_dir=str(cache),
    )


def test_the_parquet_export_loads_from_its_url_with_images(
    live_server,
    viewer,
    version,  # noqa: F811
    receipts,  # noqa: F811
    tmp_path,
):
    _, _, files = receipts
    _, secret = api_token_create(user=viewer, name="trainer")
    export = version.exports.get(format="trl_parquet", split="train")
    assert export.path.endswith("/trl_parquet-train.parquet")
    trl_bundle_rows = version.exports.get(format="trl", split="train").rows

    loaded = _load(_url(live_server, version), secret, tmp_path / "cache")

    assert loaded.num_rows == export.rows == trl_bundle_rows
    assert loaded.features["images"] == datasets.List(datasets.Image())
    raw = loaded.cast_column("images", datasets.List(datasets.Image(decode=False)))
    for row, stored in zip(loaded, raw, strict=True):
        (picture,) = row["images"]
        user = row["messages"][4]
        assert [p["type"] for p in user["content"]] == ["text", "image"]
        sha = json.loads(row["messages"][3]["content"][0]["text"])["image"]
        # the bytes the view tool returned, decoded to a picture on access
        assert stored["images"][0]["bytes"] == files[sha.removeprefix("sha256:")]
        assert picture.size[0] == 360
        assert isinstance(json.loads(row["tools"]), list)


def test_a_text_version_writes_parquet_without_pictures(built_version, tmp_path):
    export = built_version.exports.get(format="trl_parquet", split="train")
    loaded = datasets.load_dataset(
        "parquet",
        data_files=str(export_absolute_path(export)),
        split="train",
        cache_dir=str(tmp_path),
    )
    trl = built_version.exports.get(format="trl", split="train")
    lines = [json.loads(line) for line in export_absolute_path(trl).read_text().splitlines()]
    assert loaded.num_rows == len(lines) == export.rows
    assert loaded.features["images"] == datasets.List(datasets.Image())
    for row, line in zip(loaded, lines, strict=True):
        assert row["images"] == []
        assert row["messages"] == line["messages"]  # no keys from other rows


def test_a_parquet_file_gone_from_the_cache_answers_410(api_client_for, viewer, built_version):
    export = built_version.exports.get(format="trl_parquet", split="train")
    export_absolute_path(export).unlink()
    url = (
        f"/api/v1/datasets/{built_version.dataset_id}/versions/{built_version.number}"
        "/export/?format=trl_parquet&split=train"
    )
    response = api_client_for(viewer).get(url)
    assert response.status_code == 410
    assert "Parquet file of the train split is no longer cached" in response.json()["message"]


def test_another_projects_token_gets_404(live_server, outsider, built_version):
    _, secret = api_token_create(user=outsider, name="elsewhere")
    response = requests.get(
        _url(live_server, built_version), headers={"Authorization": f"Bearer {secret}"}
    )
    assert response.status_code == 404
