"""Fixtures for the serving tests: tiny models trained by the project's own SFT entry point
to answer with a tool call (valid, or malformed), served by ``transformers serve`` on
loopback, and settings that keep the poll short and everything under the test's folder."""

import json
import threading

import pytest

from apps.core.models import Job
from apps.core.services import job_execute
from apps.serving.running import model_server_run
from apps.training.services import trained_model_register, training_job_create
from tests.datasets.conftest import (  # noqa: F401  (fixtures)
    approved_demonstrations,
    sample_environments,
)
from tests.training.conftest import run_sft_entry_point, training_version  # noqa: F401

LOOKUP = {
    "type": "function",
    "function": {
        "name": "lookup",
        "description": "Look a word up.",
        "parameters": {
            "type": "object",
            "properties": {"q": {"type": "string"}},
            "required": ["q"],
        },
    },
}
PROMPT = "Look up apple."
VALID_CALL = {"type": "function", "function": {"name": "lookup", "arguments": {"q": "apple"}}}
MALFORMED_CALL = '<tool_call>\n{"name": "lookup", "arguments": {"q": apple}}\n</tool_call>'
MEMORIZE = {
    "max_steps": 150,
    "learning_rate": 0.01,
    "batch_size": 4,
    "gradient_accumulation_steps": 1,
    "max_length": 1024,
    "warmup_ratio": 0.0,
    "lr_scheduler_type": "constant",
    "save_steps": 1000,
}


def _train(folder, assistant: dict):
    """A tiny Qwen2 trained until it answers ``PROMPT`` with ``assistant`` (greedy)."""
    row = {"messages": [{"role": "user", "content": PROMPT}, assistant], "tools": [LOOKUP]}
    train = folder / "train.jsonl"
    train.write_text((json.dumps(row) + "\n") * 4)
    result, events = run_sft_entry_point(folder, "preset:tiny-qwen2", train, MEMORIZE)
    assert result.returncode == 0, result.stderr[-3000:]
    return events[-1]["artifacts"]["final"]


@pytest.fixture(scope="session")
def tool_model(tmp_path_factory):
    """A folder of full weights whose answer is the valid call ``lookup(q="apple")``."""
    assistant = {"role": "assistant", "content": "", "tool_calls": [VALID_CALL]}
    return _train(tmp_path_factory.mktemp("tool-model"), assistant)


@pytest.fixture(scope="session")
def broken_model(tmp_path_factory):
    """A folder of full weights whose answer is a ``<tool_call>`` that is not JSON."""
    assistant = {"role": "assistant", "content": MALFORMED_CALL}
    return _train(tmp_path_factory.mktemp("broken-model"), assistant)


@pytest.fixture(autouse=True)
def serving_settings(settings, tmp_path, monkeypatch):
    settings.SERVING_ROOT = tmp_path / "serving"
    settings.SERVING_ENGINE = "transformers"
    settings.SERVING_DEVICE = "cpu"
    settings.SERVING_POLL_S = 0.1
    settings.SERVING_HOST = "127.0.0.1"
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return settings


class Worker:
    """``serve_model_task``'s work (``job_execute`` + ``model_server_run``) in a thread, as
    a gpu worker runs it, with the clock the test sets."""

    def __init__(self, job_id: int, clock):
        self.job_id = job_id
        self.thread = threading.Thread(
            target=job_execute,
            kwargs={"job_id": job_id, "work": lambda ctx: model_server_run(ctx, clock=clock)},
            daemon=True,
        )

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, kind, *exc):
        if kind is not None:  # the test failed while serving: stop the server first
            Job.objects.filter(pk=self.job_id).update(cancel_requested=True)
        self.thread.join(timeout=60)
        assert not self.thread.is_alive(), "the worker did not stop"


@pytest.fixture(scope="session")
def lora_adapter(tmp_path_factory):
    """A LoRA adapter of the tiny preset (a few steps) and the base folder it was built on."""
    folder = tmp_path_factory.mktemp("lora")
    row = {
        "messages": [{"role": "user", "content": PROMPT}, {"role": "assistant", "content": "Hi"}]
    }
    train = folder / "train.jsonl"
    train.write_text((json.dumps(row) + "\n") * 4)
    hyperparameters = {**MEMORIZE, "max_steps": 4, "lora": True, "lora_r": 8, "lora_alpha": 16}
    result, events = run_sft_entry_point(folder, "preset:tiny-qwen2", train, hyperparameters)
    assert result.returncode == 0, result.stderr[-3000:]
    return events[-1]["artifacts"]


HUB_MODEL = "Qwen/Qwen2.5-0.5B-Instruct"


@pytest.fixture
def register_trained(project, author, training_version):  # noqa: F811  (the fixture)
    """A trained model of ``kind`` registered from a local training job on ``HUB_MODEL`` (its
    weights at a path that need not exist: nothing here serves them)."""

    def register(kind, name="coworker"):
        training_job = training_job_create(
            project=project,
            user=author,
            dataset_version=training_version,
            backend="local",
            base_model=HUB_MODEL,
            name=name,
            enqueue=False,
        )
        return trained_model_register(
            training_job=training_job, kind=kind, path="/models/run-1/final"
        )

    return register
