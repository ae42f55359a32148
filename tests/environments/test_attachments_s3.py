"""Attachments in an S3-compatible bucket for real: django-storages' ``S3Storage`` (what
``ATTACHMENTS_STORAGE=s3`` configures) against moto's S3 server on a loopback port. Files
are uploaded once by hash (a second environment listing the same bytes uploads nothing),
and read back from the bucket for validation, for a run (the model is sent the stored
bytes) and for a dataset export (the TRL bundle holds them)."""

import base64
import socket
import zipfile

import pytest

from apps.datasets.services import export_absolute_path
from apps.environments.attachments import attachment_bytes, attachment_name, attachment_storage
from apps.environments.models import Environment, EnvironmentStatus
from apps.environments.services import (
    attachment_add,
    environment_import_with_files,
    environment_validate,
)
from apps.runs.models import Run, RunStatus
from apps.synthesis.generators.receipts import generate_receipts_environment
from coworkenv_engine import policies, runner
from tests.datasets.conftest import build_version, dataset, make_demonstration  # noqa: F401
from tests.llm_server import LoopbackLLMServer
from tests.runs.test_llm_runs import KEY, KEY_ENV, make_endpoint, run_one
from tests.runs.test_multimodal_runs import _script

boto3 = pytest.importorskip("boto3")  # the `s3` extra (django-storages[s3])
pytest.importorskip("storages")
moto_server = pytest.importorskip("moto.server")  # the `test` extra (moto[server])

pytestmark = pytest.mark.django_db
BUCKET = "cowork-attachments"
PREFIX = "attachments"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def s3_server():
    port = _free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def bucket(s3_server, settings, monkeypatch):
    """A fresh bucket, and the attachments storage configured as ATTACHMENTS_STORAGE=s3
    configures it (coworkenv_web/settings.py), pointed at the loopback server."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    client = boto3.client("s3", endpoint_url=s3_server, region_name="us-east-1")
    client.create_bucket(Bucket=BUCKET)
    settings.STORAGES = {
        **settings.STORAGES,
        "attachments": {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {
                "bucket_name": BUCKET,
                "endpoint_url": s3_server,
                "region_name": "us-east-1",
                "location": PREFIX,
                "default_acl": None,
                "file_overwrite": False,
                "querystring_auth": True,
            },
        },
    }
    yield client
    listed = client.list_objects_v2(Bucket=BUCKET).get("Contents", [])
    for item in listed:
        client.delete_object(Bucket=BUCKET, Key=item["Key"])
    client.delete_bucket(Bucket=BUCKET)


def _objects(client) -> dict[str, tuple[int, str]]:
    listed = client.list_objects_v2(Bucket=BUCKET).get("Contents", [])
    return {item["Key"]: (item["Size"], item["ETag"]) for item in listed}


def _import(project, author, seed=1, tasks=2):
    doc, files = generate_receipts_environment(seed=seed, tasks=tasks, eval_fraction=0)
    environment = environment_import_with_files(project=project, spec=doc, files=files, user=author)
    return environment, doc, files


def test_the_storage_is_s3_and_files_are_uploaded_once_by_hash(bucket, project, author):
    from storages.backends.s3 import S3Storage

    assert isinstance(attachment_storage(), S3Storage)
    _, _, files = _import(project, author)
    objects = _objects(bucket)
    assert objects.keys() == {f"{PREFIX}/{sha[:2]}/{sha}" for sha in files}
    for sha, data in files.items():
        assert objects[f"{PREFIX}/{sha[:2]}/{sha}"][0] == len(data)
        assert attachment_bytes(sha) == data  # read back from the bucket

    # The same receipts in a second environment, and one uploaded again by hand: no new object.
    second, _, _ = _import(project, author)
    sha, data = next(iter(files.items()))
    attachment_add(environment=second, data=data, name="again.png")
    assert _objects(bucket) == objects
    assert attachment_bytes("0" * 64) is None  # nothing under that hash


def test_validation_reads_the_bucket_and_notices_a_file_gone(bucket, project, author):
    environment, doc, _ = _import(project, author)
    assert environment_validate(environment=environment).valid
    sha = doc["attachments"][0]["sha256"]
    attachment_storage().delete(attachment_name(sha))
    assert f"{PREFIX}/{sha[:2]}/{sha}" not in _objects(bucket)
    report = environment_validate(environment=environment)
    assert not report.valid
    assert "attachment_content_invalid" in {p["code"] for p in report.problems}


def test_a_run_sends_the_model_the_bytes_stored_in_the_bucket(
    bucket, project, author, settings, monkeypatch
):
    monkeypatch.setenv(KEY_ENV, KEY)
    settings.LLM_BACKOFF_BASE_S = 0.01
    settings.LLM_MAX_ATTEMPTS = 2
    environment, doc, files = _import(project, author, tasks=1)
    Environment.objects.filter(pk=environment.pk).update(status=EnvironmentStatus.VALID)
    environment.refresh_from_db()
    with LoopbackLLMServer(api_key=KEY) as server:
        _script(server, doc)
        batch = run_one(project, author, environment, make_endpoint(project, server))
        second = server.requests[1].messages
    run = Run.objects.get(batch=batch)
    assert (run.status, run.passed) == (RunStatus.SUCCEEDED, True)
    url = second[4]["content"][1]["image_url"]["url"]
    sha = doc["attachments"][0]["sha256"]
    assert base64.b64decode(url.removeprefix("data:image/png;base64,")) == files[sha]


def test_the_trl_bundle_is_written_from_the_bucket(bucket, project, author, dataset):  # noqa: F811
    environment, doc, files = _import(project, author, tasks=3)
    Environment.objects.filter(pk=environment.pk).update(status=EnvironmentStatus.VALID)
    for task in doc["tasks"]:
        result = runner.run_task(doc, task["key"], policies.OraclePolicy(), faults=False)
        make_demonstration(
            environment,
            task["key"],
            transcript=result.transcript,
            tools=result.tools,
            score=result.grading.score,
        )
    version = build_version(dataset, author)
    export = version.exports.get(format="trl", split="train")
    with zipfile.ZipFile(export_absolute_path(export)) as archive:
        images = {
            name.removeprefix("images/").removesuffix(".png"): archive.read(name)
            for name in archive.namelist()
            if name.startswith("images/")
        }
    assert images  # the viewed receipts, read from the bucket
    assert all(files[sha] == data for sha, data in images.items())
