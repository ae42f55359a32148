"""A ``command`` job on a version whose demonstrations show images: the script gets the
split's image bundle URL (a template placeholder and an environment variable), downloads it
with the job's secret like the rows, finds the images the rows name, and trains
``preset:tiny-llava`` from the downloaded config (whose data file is that bundle URL)."""

import json
import zipfile
from pathlib import Path

import pytest
from rest_framework.test import APIClient

pytest.importorskip("trl")  # the `train` extra

from apps.core.models import JobStatus
from apps.training.services import (
    training_job_create,
    training_job_execute,
)
from apps.training.services.command import bundle_path
from tests.datasets.conftest import dataset  # noqa: F401
from tests.datasets.test_multimodal_exports import receipts, version  # noqa: F401
from tests.training.conftest import STAND_IN_PASS_ENV, install_stand_in, wait_for_stand_in_job
from tests.training.test_local_vision import TWO_STEPS

pytestmark = pytest.mark.django_db

STAND_IN = """#!{python}
# A stand-in for a cluster's submit command on a node that does not share the disk: it gets
# the bundle URL as an argument and in its environment, downloads the bundle and the config
# with the job's secret, checks the images are there and starts the entry point.
import io, json, os, subprocess, sys, urllib.request, zipfile
args = dict(a[2:].split("=", 1) for a in sys.argv[1:])
secret = os.environ["COWORKENV_CALLBACK_SECRET"]
def get(url):
    request = urllib.request.Request(url, headers={{"Authorization": "Bearer " + secret}})
    with urllib.request.urlopen(request) as response:
        return response.headers.get("Content-Type"), response.read()
kind, data = get(args["bundle"])
with zipfile.ZipFile(io.BytesIO(data)) as archive:
    names = archive.namelist()
    rows = [json.loads(l) for l in archive.read("metadata.jsonl").decode().splitlines() if l]
named = sorted({{n for row in rows for n in row["file_names"]}})
config = json.loads(get(args["config"])[1])
config["output_dir"] = os.environ["STANDIN_OUTPUT"]
with open(os.environ["STANDIN_RECORD"], "w") as f:
    json.dump({{"argv": sys.argv[1:], "env": os.environ["COWORKENV_TRAIN_BUNDLE_URL"],
               "content_type": kind, "names": names, "named": named,
               "found": [n for n in named if n in names], "rows": len(rows),
               "train_file": config["train_file"]}}, f)
with open(os.environ["STANDIN_OUTPUT"] + ".json", "w") as f:
    json.dump(config, f)
subprocess.Popen(
    [sys.executable, "-m", "apps.training.sft", "--config", os.environ["STANDIN_OUTPUT"] + ".json"],
    cwd={root!r}, start_new_session=True,
    stdout=open(os.environ["STANDIN_RECORD"] + ".log", "wb"), stderr=subprocess.STDOUT,
)
print("Submitted batch job 4343")
"""


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    monkeypatch.setenv("STANDIN_OUTPUT", str(tmp_path / "node"))
    return install_stand_in(tmp_path, monkeypatch, "submit", STAND_IN)


def test_a_command_job_downloads_the_image_bundle_and_trains_a_vlm(
    live_server,
    settings,
    project,
    author,
    version,  # noqa: F811
    receipts,  # noqa: F811
    stand_in,
    tmp_path,
    operator_templates,
):
    _, _, files = receipts
    settings.TRAINING_CALLBACK_BASE_URL = live_server.url
    operator_templates(
        {
            "cluster": {
                "argv": [str(stand_in), "--bundle={train_bundle_url}", "--config={config_url}"],
                "pass_env": [*STAND_IN_PASS_ENV, "STANDIN_OUTPUT"],
            }
        }
    )
    training_job = training_job_create(
        project=project,
        user=author,
        dataset_version=version,
        backend="command",
        preset="tiny-vlm-cpu",
        hyperparameters=TWO_STEPS,
        command_template="cluster",
        enqueue=False,
    )
    assert training_job.base_model == "preset:tiny-llava"
    training_job_execute(training_job.job_id)

    training_job.refresh_from_db()
    job = training_job.job
    job.refresh_from_db()
    assert job.message == "Submitted as 4343; waiting for its reports.", job.message
    bundle = f"{live_server.url}/api/v1/training-jobs/{training_job.pk}/callback/data/train/bundle/"
    record = json.loads((tmp_path / "record.json").read_text())
    assert record["argv"][0] == f"--bundle={bundle}"
    assert record["env"] == bundle
    assert record["content_type"] == "application/zip"
    # every image a row names is in the bundle, byte for byte what the attachments hold
    assert record["named"] and record["found"] == record["named"]
    assert record["names"][0] == "metadata.jsonl"
    with zipfile.ZipFile(bundle_path(training_job, "train")) as archive:
        for name in record["named"]:
            assert archive.read(name) == files[Path(name).stem]
    # the downloaded config names the bundle as its data file
    assert record["train_file"] == bundle
    assert training_job.artifacts["bundle_sha256"]["train"]

    wait_for_stand_in_job(job, tmp_path, timeout=300)
    assert job.status == JobStatus.SUCCEEDED, job.message
    assert job.message == "Trained 2 steps."
    training_job.refresh_from_db()
    # the trainer read the bundle it downloaded: the sha256 of what it trained on
    assert (
        training_job.artifacts["trained_on_sha256"]["train"]
        == training_job.artifacts["bundle_sha256"]["train"]
    )
    attempt = training_job.artifacts["attempts"][-1]
    # 2 steps of 2 train rows, and the eval rows at step 2: counted as collated
    assert attempt["rows"] == version.train_rows + version.validation_rows
    assert 4 <= attempt["counted_rows"] <= attempt["rows"]
    assert attempt["dropped_rows"] == 0


def test_the_bundle_is_served_only_to_the_jobs_secret(
    project,
    author,
    version,  # noqa: F811
    operator_templates,
):
    from apps.training.services.command import write_bundle
    from apps.training.services.local import prepare_files
    from apps.training.services.reports import callback_secret_new

    operator_templates({"cluster": {"argv": ["true"]}})
    jobs = [
        training_job_create(
            project=project,
            user=author,
            dataset_version=version,
            backend="command",
            base_model="Qwen/Qwen2-VL-2B-Instruct",
            command_template="cluster",
            enqueue=False,
        )
        for _ in range(2)
    ]
    first, second = jobs
    prepared = prepare_files(first)
    assert write_bundle(Path(prepared["files"]["train"]), bundle_path(first, "train"))
    secret, other = callback_secret_new(first), callback_secret_new(second)
    url = f"/api/v1/training-jobs/{first.pk}/callback/data/train/bundle/"

    def get(token, path=url):
        return APIClient().get(path, HTTP_AUTHORIZATION=f"Bearer {token}")

    ok = get(secret)
    assert (ok.status_code, ok["Content-Type"]) == (200, "application/zip")
    assert b"".join(ok.streaming_content) == bundle_path(first, "train").read_bytes()
    for refused in (get(other), get("wrong"), APIClient().get(url)):
        assert (refused.status_code, refused.json()) == (
            404,
            {"message": "No such training job.", "details": {}},
        )
    # the other job wrote no bundle: its own secret finds none
    none = get(other, f"/api/v1/training-jobs/{second.pk}/callback/data/train/bundle/")
    assert none.status_code == 404
    assert none.json()["message"] == "This job's split has no image bundle."


def test_a_text_version_gets_no_bundle(tmp_path):
    from apps.training.services.command import write_bundle

    rows = tmp_path / "train.jsonl"
    rows.write_text(json.dumps({"messages": [], "tools": "[]"}) + "\n")
    target = tmp_path / "train.zip"
    assert write_bundle(rows, target) is None and not target.exists()
    rows.write_text(json.dumps({"messages": [], "images": ["images/missing.png"]}) + "\n")
    from apps.core.exceptions import ApplicationError

    with pytest.raises(ApplicationError, match=r"images/missing\.png"):
        write_bundle(rows, target)
