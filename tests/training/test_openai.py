"""The openai backend against a loopback OpenAI-compatible server, through the real `openai`
client: the export is uploaded, a supervised fine-tuning job created with the mapped
hyperparameters, its status and events polled into the job, the resulting model recorded."""

import threading

import pytest

from apps.core.models import Job, JobStatus
from apps.datasets.services import export_absolute_path
from apps.llm.services import endpoint_create
from apps.training.models import ModelKind, TrainedModel, TrainingMetric
from apps.training.services import training_job_create, training_job_execute
from tests.llm_server import FineTuning, LoopbackLLMServer

KEY_ENV = "TRAINING_TEST_API_KEY"
KEY = "sk-loopback-training"
BASE = "gpt-4.1-mini-2025-04-14"


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    with LoopbackLLMServer(api_key=KEY, fine_tuning=FineTuning(steps=3)) as running:
        yield running


def _job(project, author, version, server, *, key_env=KEY_ENV):
    endpoint = endpoint_create(
        project=project,
        created_by=author,
        name="fine-tuning",
        base_url=server.base_url,
        model=BASE,
        api_key_env=key_env,
    )
    return training_job_create(
        project=project,
        user=author,
        dataset_version=version,
        backend="openai",
        preset="openai-mini",
        endpoint=endpoint,
    )


def test_openai_fine_tuning_end_to_end(project, author, training_version, server):
    training_job = _job(project, author, training_version, server)
    assert training_job.base_model == BASE
    training_job_execute(training_job.job_id)

    training_job.refresh_from_db()
    job = Job.objects.get(pk=training_job.job_id)
    remote_id = training_job.external_id
    model_id = f"ft:{BASE}:loopback:coworkenv-{training_job.pk}:{remote_id[-4:]}"
    assert job.status == JobStatus.SUCCEEDED, job.message
    assert job.message == f"Fine-tuned model {model_id}."
    # The uploads are the version's openai export, byte for byte.
    tuning = server.fine_tuning
    remote = tuning.jobs[remote_id]
    for split, key in (("train", "training_file"), ("validation", "validation_file")):
        export = training_version.exports.get(format="openai", split=split)
        uploaded = tuning.files[remote[key]]
        assert uploaded["content"] == export_absolute_path(export).read_bytes()
        assert uploaded["purpose"] == "fine-tune"
        assert uploaded["filename"] == f"coworkenv-{training_job.pk}-{split}.jsonl"
    assert remote["hyperparameters"] == {
        "n_epochs": 3,
        "batch_size": 8,
        "learning_rate_multiplier": 1.0,
    }
    assert remote["method"]["type"] == "supervised"
    assert remote["metadata"] == {"coworkenv_training_job": str(training_job.pk)}
    assert training_job.artifacts["files"] == {
        "train": remote["training_file"],
        "eval": remote["validation_file"],
    }
    assert list(
        TrainingMetric.objects.filter(training_job=training_job)
        .order_by("step")
        .values_list("step", "loss", "eval_loss")
    ) == [(1, 2.0, 2.5), (2, 1.0, 1.25), (3, 2.0 / 3, 2.5 / 3)]
    assert "info: Fine-tuning job started." in training_job.log_tail
    assert "info: The job has successfully completed." in training_job.log_tail
    model = TrainedModel.objects.get(training_job=training_job)
    assert (model.kind, model.remote_model, model.served_name) == (
        ModelKind.REMOTE,
        model_id,
        model_id,
    )
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in server.requests)


def test_provider_failure_fails_the_job_with_its_reason(project, author, training_version, server):
    server.fine_tuning.fail_with = "Example 3 contains an extra 'tools'."
    training_job = _job(project, author, training_version, server)
    training_job_execute(training_job.job_id)
    job = Job.objects.get(pk=training_job.job_id)
    assert job.status == JobStatus.FAILED
    assert job.message == "The provider's job failed: Example 3 contains an extra 'tools'."
    assert not TrainedModel.objects.exists()


def test_a_refused_key_fails_the_job_and_creates_nothing_remote(
    project, author, training_version, server, monkeypatch
):
    monkeypatch.setenv("OTHER_API_KEY", "sk-wrong")
    training_job = _job(project, author, training_version, server, key_env="OTHER_API_KEY")
    training_job_execute(training_job.job_id)
    job = Job.objects.get(pk=training_job.job_id)
    assert job.status == JobStatus.FAILED
    assert job.message == (
        "The fine-tuning API refused to take the train file: HTTP 401: Incorrect API key provided."
    )
    assert server.fine_tuning.files == {} and server.fine_tuning.jobs == {}


@pytest.mark.django_db(transaction=True)
def test_cancel_is_sent_to_the_provider(project, author, training_version, server):
    server.fine_tuning.steps = 10_000  # it would run for a long time
    training_job = _job(project, author, training_version, server)

    def cancel_once_running():
        for _ in range(2000):
            if any(j["status"] == "running" for j in list(server.fine_tuning.jobs.values())):
                Job.objects.filter(pk=training_job.job_id).update(cancel_requested=True)
                return
            threading.Event().wait(0.01)

    helper = threading.Thread(target=cancel_once_running)
    helper.start()
    training_job_execute(training_job.job_id)
    helper.join()
    job = Job.objects.get(pk=training_job.job_id)
    assert job.status == JobStatus.CANCELLED
    training_job.refresh_from_db()
    assert server.fine_tuning.jobs[training_job.external_id]["status"] == "cancelled"
    assert "[coworkenv] cancel sent" in training_job.log_tail
    assert any(r.path.endswith("/cancel") for r in server.requests)
