"""python manage.py train: launches on a version and prints the loss; refuses bad input."""

import pytest
from django.core.management import CommandError, call_command

from apps.core.models import JobStatus
from apps.llm.services import endpoint_create
from apps.training.models import TrainingJob
from tests.llm_server import FineTuning, LoopbackLLMServer


def test_train_sync_with_the_openai_backend(project, author, training_version, monkeypatch, capsys):
    monkeypatch.setenv("TRAINING_TEST_API_KEY", "sk-loop")
    with LoopbackLLMServer(api_key="sk-loop", fine_tuning=FineTuning(steps=2)) as server:
        endpoint_create(
            project=project,
            name="ft-api",
            base_url=server.base_url,
            model="gpt-4.1-mini",
            api_key_env="TRAINING_TEST_API_KEY",
        )
        call_command(
            "train",
            "--project=acme",
            f"--dataset={training_version.dataset_id}",
            f"--version={training_version.number}",
            "--backend=openai",
            "--base-model=gpt-4.1-mini",
            "--endpoint=ft-api",
            "--epochs=2",
            "--sync",
        )
    out = capsys.readouterr().out
    training_job = TrainingJob.objects.get()
    assert training_job.job.status == JobStatus.SUCCEEDED
    assert training_job.hyperparameters["epochs"] == 2.0
    assert f"Training job #{training_job.pk}" in out
    assert "  step     1  loss 2.0000  eval 2.5000" in out
    assert "  step     2  loss 1.0000  eval 1.2500" in out
    assert f"Model: {training_job.trained_model.remote_model}" in out


def test_train_refuses_bad_input(project, training_version):
    with pytest.raises(CommandError, match="No project “nope”"):
        call_command("train", "--project=nope", "--dataset=1", "--version=1")
    with pytest.raises(
        CommandError, match=f"No version 9 of dataset {training_version.dataset_id}"
    ):
        call_command(
            "train", "--project=acme", f"--dataset={training_version.dataset_id}", "--version=9"
        )
    with pytest.raises(CommandError, match="max_steps: Use -1"):
        call_command(
            "train",
            "--project=acme",
            f"--dataset={training_version.dataset_id}",
            f"--version={training_version.number}",
            "--base-model=preset:tiny-qwen2",
            "--max-steps=0",
        )
    assert not TrainingJob.objects.exists()
