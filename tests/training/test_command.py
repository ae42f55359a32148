"""The command backend: the operator's template is filled and run (a stand-in `sbatch` that
records its arguments and starts the same entry point), the trainer reports through the
callback with its per-job secret; a wrong secret is refused and changes nothing."""

import json
import os
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from apps.core.models import JobStatus
from apps.training.models import ModelKind, TrainedModel, TrainingMetric
from apps.training.reporting import HttpReporter
from apps.training.services import (
    training_job_cancel,
    training_job_create,
    training_job_execute,
)
from apps.training.services.reports import callback_secret_new
from tests.training.conftest import (
    TINY,
    install_stand_in,
    slurm_template,
    wait_for_stand_in_job,
)

STAND_IN = """#!{python}
# A stand-in for Slurm's sbatch: records its arguments, starts what the batch script would
# (the training entry point, on this machine) and answers like sbatch.
import json, os, subprocess, sys
with open(os.environ["STANDIN_RECORD"], "w") as f:
    json.dump(sys.argv[1:], f)
export = next(a for a in sys.argv if a.startswith("--export="))
config = dict(kv.split("=", 1) for kv in export[len("--export="):].split(",") if "=" in kv)
subprocess.Popen(
    [sys.executable, "-m", "apps.training.sft", "--config", config["COWORKENV_CONFIG"]],
    cwd={root!r}, start_new_session=True,
    stdout=open(os.environ["STANDIN_RECORD"] + ".log", "wb"), stderr=subprocess.STDOUT,
)
print("Submitted batch job 4242")
"""


@pytest.fixture
def stand_in_sbatch(tmp_path, monkeypatch):
    return install_stand_in(tmp_path, monkeypatch, "sbatch", STAND_IN)


def test_command_backend_trains_and_reports_through_the_callback(
    live_server,
    settings,
    project,
    author,
    training_version,
    stand_in_sbatch,
    tmp_path,
    operator_templates,
):
    settings.TRAINING_CALLBACK_BASE_URL = live_server.url
    operator_templates({"slurm": slurm_template(stand_in_sbatch)})
    training_job = training_job_create(
        project=project,
        user=author,
        dataset_version=training_version,
        backend="command",
        base_model="preset:tiny-qwen2",
        hyperparameters={**TINY, "max_steps": 6, "save_steps": 3},
        command_template="slurm",
    )
    training_job_execute(training_job.job_id)  # what the task does: fill and run the template

    training_job.refresh_from_db()
    job = training_job.job
    job.refresh_from_db()
    assert job.status == JobStatus.RUNNING
    assert job.message == "Submitted as 4242; waiting for its reports."
    assert training_job.external_id == "4242"
    config_path = Path(training_job.output_dir) / "job.json"
    callback = f"{live_server.url}/api/v1/training-jobs/{training_job.pk}/callback/"
    recorded = json.loads((tmp_path / "record.json").read_text())
    assert recorded == [
        f"--job-name=cw-{training_job.pk}",
        f"--export=ALL,COWORKENV_CONFIG={config_path}",
        f"--comment={callback}",
        "deploy/slurm/train.sbatch",
    ]
    config = json.loads(config_path.read_text())
    assert config["report"]["callback_url"] == callback
    secret = config["report"]["callback_secret"]
    assert secret not in training_job.command and secret not in json.dumps(training_job.artifacts)
    assert oct(config_path.stat().st_mode & 0o777) == "0o600"

    wait_for_stand_in_job(job, tmp_path, timeout=240)
    training_job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED, job.message
    assert job.message == "Trained 6 steps."
    steps = list(
        TrainingMetric.objects.filter(training_job=training_job, loss__isnull=False)
        .order_by("step")
        .values_list("step", flat=True)
    )
    assert steps == [1, 2, 3, 4, 5, 6]
    assert (
        training_job.artifacts["trained_on_sha256"]["train"]
        == (training_job.artifacts["data_sha256"]["train"])
    )
    model = TrainedModel.objects.get(training_job=training_job)
    assert (model.kind, model.path) == (ModelKind.FULL, f"{training_job.output_dir}/final")

    # The job has ended: even its own secret is answered "gone, stop".
    late = APIClient().post(
        callback,
        {"events": [{"type": "metrics", "step": 7, "loss": 1.0}]},
        format="json",
        HTTP_AUTHORIZATION=f"Bearer {secret}",
    )
    assert late.status_code == 410 and late.json()["cancel"] is True
    assert not TrainingMetric.objects.filter(training_job=training_job, step=7).exists()


@pytest.fixture
def command_jobs(project, author, training_version, operator_templates):
    operator_templates({"slurm": slurm_template("sbatch")})
    jobs = [
        training_job_create(
            project=project,
            user=author,
            dataset_version=training_version,
            backend="command",
            base_model="Qwen/Qwen2.5-0.5B-Instruct",
            command_template="slurm",
            name=f"cluster {i}",
        )
        for i in range(2)
    ]
    return [(job, callback_secret_new(job)) for job in jobs]


def _post(job, secret, events):
    return APIClient().post(
        f"/api/v1/training-jobs/{job.pk}/callback/",
        {"events": events},
        format="json",
        **({"HTTP_AUTHORIZATION": f"Bearer {secret}"} if secret else {}),
    )


def test_callback_secret_is_per_job_and_a_wrong_one_changes_nothing(command_jobs):
    (first, first_secret), (_second, second_secret) = command_jobs
    metrics = [{"type": "metrics", "step": 1, "loss": 2.5}]
    refused = _post(first, "not-the-secret", metrics)
    # Refused exactly like a job that does not exist.
    assert (refused.status_code, refused.json()) == (
        404,
        {"message": "No such training job.", "details": {}},
    )
    assert _post(first, "", metrics).status_code == 404
    assert _post(first, second_secret, metrics).status_code == 404  # another job's secret
    assert _post(first, first_secret.upper(), metrics).status_code == 404
    assert not TrainingMetric.objects.exists()
    first.job.refresh_from_db()
    assert first.job.status == JobStatus.PENDING

    ok = _post(first, first_secret, metrics)
    assert ok.status_code == 200 and ok.json() == {"cancel": False}
    first.job.refresh_from_db()
    assert first.job.status == JobStatus.RUNNING
    assert list(TrainingMetric.objects.values_list("training_job_id", "step", "loss")) == [
        (first.pk, 1, 2.5)
    ]
    # Bad input is refused with the one error shape.
    bad = _post(first, first_secret, [{"type": "metrics", "step": "one"}])
    assert bad.status_code == 400
    assert bad.json()["message"] == "A metrics event needs a whole, non-negative step."
    assert _post(first, first_secret, []).status_code == 400


def test_cancel_ends_a_command_job_and_the_script_is_told_to_stop(command_jobs):
    (job, secret), _ = command_jobs
    assert _post(job, secret, [{"type": "log", "line": "queued"}]).status_code == 200
    training_job_cancel(training_job=job)
    job.job.refresh_from_db()
    assert job.job.status == JobStatus.CANCELLED
    answer = _post(job, secret, [{"type": "metrics", "step": 1, "loss": 2.0}])
    assert answer.status_code == 410
    assert answer.json() == {
        "message": "This training job has already cancelled.",
        "details": {},
        "cancel": True,
    }


def test_config_and_data_are_served_to_the_secret_only(command_jobs, tmp_path):
    (job, secret), (_other, other_secret) = command_jobs
    data_dir = Path(job.output_dir) / "data"
    data_dir.mkdir(parents=True)
    (data_dir / "train.jsonl").write_text('{"messages": []}\n')
    api = APIClient()
    config_url = f"/api/v1/training-jobs/{job.pk}/callback/config/"
    assert api.get(config_url, HTTP_AUTHORIZATION=f"Bearer {other_secret}").status_code == 404
    config = api.get(config_url, HTTP_AUTHORIZATION=f"Bearer {secret}").json()
    assert config["train_file"] == (
        f"http://127.0.0.1:8000/api/v1/training-jobs/{job.pk}/callback/data/train/"
    )
    assert config["data_headers"] == {"Authorization": f"Bearer {secret}"}
    assert config["report"]["callback_secret"] == secret
    data_url = f"/api/v1/training-jobs/{job.pk}/callback/data/train/"
    assert api.get(data_url).status_code == 404
    data = api.get(data_url, HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert data.status_code == 200
    assert b"".join(data.streaming_content) == b'{"messages": []}\n'
    assert os.path.exists(data_dir / "train.jsonl")


@pytest.mark.django_db(transaction=True)
def test_a_finished_event_with_nul_and_a_lone_surrogate_still_closes_the_job(
    live_server, command_jobs
):
    """The API refuses NUL and lone surrogates anywhere in a body; the script's reporter
    replaces them, so a crash message read from stderr still ends the job."""
    (job, secret), _ = command_jobs
    reporter = HttpReporter(
        f"{live_server.url}/api/v1/training-jobs/{job.pk}/callback/", secret, attempts=1
    )
    reporter.emit({"type": "log", "line": "step 3\x00 nan \ud800"})
    reporter.emit({"type": "finished", "status": "failed", "message": "CUDA\x00 error \udcff"})
    job.job.refresh_from_db()
    assert (job.job.status, job.job.message) == (JobStatus.FAILED, "CUDA\ufffd error \ufffd")
    assert reporter.cancel_requested is False
    # the same raw text straight to the API is refused with the input gate's one message
    raw = APIClient().post(
        f"/api/v1/training-jobs/{command_jobs[1][0].pk}/callback/",
        '{"events": [{"type": "log", "line": "a\\u0000b"}]}',
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {command_jobs[1][1]}",
    )
    assert raw.status_code == 400


@pytest.mark.parametrize(
    "event",
    [
        {"type": "metrics", "step": 10**30, "loss": 1.0},
        {"type": "metrics", "step": 2**31, "loss": 1.0},
        {"type": "started", "total_steps": 10**30},
        {"type": "started", "total_steps": 2**31},
        {"type": "finished", "status": "succeeded", "artifacts": "final/model"},
        {"type": "finished", "status": "succeeded", "artifacts": ["final/model"]},
    ],
    ids=[
        "step past every column",
        "step past int32",
        "total past every column",
        "total past int32",
        "artifacts as text",
        "artifacts as a list",
    ],
)
def test_callback_events_out_of_shape_are_a_400_and_change_nothing(command_jobs, event):
    (job, secret), _ = command_jobs
    before = (job.current_step, job.total_steps, job.artifacts)
    answer = _post(job, secret, [event])
    assert answer.status_code == 400, answer.content[:300]
    assert set(answer.json()) == {"message", "details"}
    job.refresh_from_db()
    job.job.refresh_from_db()
    assert (job.current_step, job.total_steps, job.artifacts) == before
    assert job.job.status == JobStatus.PENDING
    assert not TrainingMetric.objects.exists()


def test_a_bad_event_after_good_ones_saves_none_of_them(command_jobs):
    (job, secret), _ = command_jobs
    events = [
        {"type": "metrics", "step": 1, "loss": 2.0},
        {"type": "checkpoint", "step": 1, "path": "ckpt-1"},
        {"type": "metrics", "step": "two"},
    ]
    assert _post(job, secret, events).status_code == 400
    job.refresh_from_db()
    assert (job.current_step, job.artifacts) == (0, {})
    assert not TrainingMetric.objects.exists()
