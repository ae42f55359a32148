"""The local backend end to end on the CPU: the tiny preset trains 20 steps on an exported
dataset version through `accelerate launch`, the loss falls, the model loads and generates."""

import hashlib
import json
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("trl")  # the `train` extra
transformers = pytest.importorskip("transformers")

from apps.core.models import Job, JobStatus  # noqa: E402
from apps.training.models import ModelKind, TrainedModel, TrainingJob  # noqa: E402
from apps.training.services import training_job_create, training_job_execute  # noqa: E402
from apps.training.services.local import group_alive  # noqa: E402
from tests.training.conftest import TINY, execute_and_succeed  # noqa: E402


def test_local_training_end_to_end(project, author, training_version):
    training_job = training_job_create(
        project=project,
        user=author,
        dataset_version=training_version,
        backend="local",
        base_model="preset:tiny-qwen2",
        hyperparameters=TINY,
    )
    assert training_job.total_steps == 20
    assert training_job.job.status == JobStatus.PENDING

    job = execute_and_succeed(training_job)  # what the gpu-queue task does
    assert job.message == "Trained 20 steps."
    assert (job.progress_done, job.progress_total) == (20, 20)
    assert training_job.command.split()[1:4] == [
        "-m",
        "accelerate.commands.launch",
        "--num_processes",
    ]
    assert "--cpu" in training_job.command.split()

    metrics = list(training_job.metrics.order_by("step"))
    train_steps = [m.step for m in metrics if m.loss is not None]
    assert train_steps == list(range(1, 21))
    losses = [m.loss for m in metrics if m.loss is not None]
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5 - 0.5  # it learned
    assert [m.step for m in metrics if m.eval_loss is not None] == [10, 20]
    assert all(m.learning_rate is not None and m.grad_norm is not None for m in metrics if m.loss)
    assert any(m.tokens_per_second for m in metrics)
    assert training_job.current_step == 20
    assert training_job.last_loss == losses[-1]

    # Artifacts: the exact config, the data files and their sha256, the checkpoints.
    artifacts = training_job.artifacts
    data = artifacts["data_sha256"]
    train_file = Path(training_job.output_dir) / "data" / "train.jsonl"
    assert data["train"] == hashlib.sha256(train_file.read_bytes()).hexdigest()
    assert artifacts["trained_on_sha256"] == {"train": data["train"], "eval": data["eval"]}
    assert len(train_file.read_text().splitlines()) == training_version.train_rows == 14
    config = json.loads(Path(artifacts["config_path"]).read_text())
    assert config == artifacts["config"]
    assert config["hyperparameters"]["max_steps"] == 20
    assert [c["step"] for c in artifacts["checkpoints"]] == [10, 20]
    assert artifacts["attempts"][0]["resumed_from_step"] == 0
    assert artifacts["attempts"][0]["excluded_tokens"] > 0  # the weight-0 turn was masked
    assert "[coworkenv] step 20" in training_job.log_tail

    model_row = TrainedModel.objects.get(training_job=training_job)
    assert model_row.kind == ModelKind.FULL
    assert model_row.path == str(Path(training_job.output_dir) / "final")
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_row.path)
    model = transformers.AutoModelForCausalLM.from_pretrained(model_row.path)
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Book the Q3 review."}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )
    generated = model.generate(**prompt, max_new_tokens=8, do_sample=False)
    assert generated.shape[1] == prompt["input_ids"].shape[1] + 8 or (
        generated[0, -1].item() == tokenizer.eos_token_id
    )
    assert isinstance(tokenizer.decode(generated[0][prompt["input_ids"].shape[1] :]), str)


@pytest.mark.django_db(transaction=True)
def test_cancel_kills_the_trainer_process_group(project, author, training_version):
    training_job = training_job_create(
        project=project,
        user=author,
        dataset_version=training_version,
        backend="local",
        base_model="preset:tiny-qwen2",
        hyperparameters={**TINY, "max_steps": 500, "save_steps": 1000},
        enqueue=False,
    )
    pid_file = Path(training_job.output_dir) / "trainer.pid"
    seen = {}

    def cancel_after_two_steps():
        rows = TrainingJob.objects.filter(pk=training_job.pk)
        for _ in range(3000):
            if rows.values_list("current_step", flat=True)[0] >= 2 and pid_file.exists():
                seen["pid"] = int(pid_file.read_text())
                Job.objects.filter(pk=training_job.job_id).update(cancel_requested=True)
                return
            time.sleep(0.05)

    helper = threading.Thread(target=cancel_after_two_steps)
    helper.start()
    training_job_execute(training_job.job_id)
    helper.join()
    job = Job.objects.get(pk=training_job.job_id)
    assert job.status == JobStatus.CANCELLED
    assert not group_alive(seen["pid"])  # the launcher and the trainer are gone
    training_job.refresh_from_db()
    assert 2 <= training_job.current_step < 500
    assert not TrainedModel.objects.filter(training_job=training_job).exists()
    assert not pid_file.exists()


def test_a_worker_without_the_train_extra_says_which_to_install(
    project, author, training_version, monkeypatch
):
    from apps.training.services import local

    monkeypatch.setattr(local, "TRAIN_LIBRARIES", ("json", "coworkenv_no_such_library"))
    training_job = training_job_create(
        project=project,
        user=author,
        dataset_version=training_version,
        backend="local",
        base_model="preset:tiny-qwen2",
        hyperparameters=TINY,
    )
    training_job_execute(training_job.job_id)
    job = Job.objects.get(pk=training_job.job_id)
    assert job.status == JobStatus.FAILED
    assert job.message.startswith("This worker lacks coworkenv_no_such_library:")
    assert "pip install '.[train]'" in job.message
    assert not TrainingJob.objects.get(pk=training_job.pk).command  # no trainer was started
