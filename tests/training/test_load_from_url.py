"""With the train extra, `datasets.load_dataset("json", data_files=EXPORT_URL,
storage_options={"headers": …})` reads an export straight from the API (fsspec's HTTP
filesystem needs aiohttp and requests); a bad token surfaces as an HTTP 401 when the URL is
checked with fsspec first (the recipe in docs/training.md)."""

import json

import pytest

datasets = pytest.importorskip("datasets")
aiohttp = pytest.importorskip("aiohttp")
fsspec = pytest.importorskip("fsspec")

from apps.accounts.services import api_token_create  # noqa: E402
from apps.datasets.services import export_absolute_path  # noqa: E402


def test_load_dataset_from_the_export_url(live_server, viewer, training_version, tmp_path):
    _, secret = api_token_create(user=viewer, name="trainer")
    url = (
        f"{live_server.url}/api/v1/datasets/{training_version.dataset_id}/versions/"
        f"{training_version.number}/export?format=trl&split=train"
    )
    loaded = datasets.load_dataset(
        "json",
        data_files=url,
        storage_options={"headers": {"Authorization": f"Bearer {secret}"}},
        split="train",
        cache_dir=str(tmp_path / "ok"),
    )
    export = training_version.exports.get(format="trl", split="train")
    rows = [json.loads(line) for line in export_absolute_path(export).read_text().splitlines()]
    assert loaded.num_rows == training_version.train_rows == len(rows)
    assert loaded[0]["messages"] == rows[0]["messages"]

    # datasets 5.2 does not raise the HTTP status itself (a refused download reads as an
    # empty file); asking fsspec's HTTP filesystem first, with the same headers, does.
    fs = fsspec.filesystem("http", headers={"Authorization": "Bearer not-a-token"})
    with pytest.raises(FileNotFoundError) as refused:
        fs.info(url)
    assert isinstance(refused.value.__cause__, aiohttp.ClientResponseError)
    assert refused.value.__cause__.status == 401
    good = fsspec.filesystem("http", headers={"Authorization": f"Bearer {secret}"})
    assert good.info(url)["size"] == export.size
