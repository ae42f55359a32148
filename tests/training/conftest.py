"""Fixtures for the training tests: a built dataset version of real oracle transcripts (one
assistant turn excluded by a reviewer, weight 0), and settings that keep CPU training small."""

import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from apps.core.models import JobStatus
from apps.datasets.services import dataset_create
from tests.datasets.conftest import (  # noqa: F401  (fixtures)
    approved_demonstrations,
    build_version,
    make_demonstration,
    oracle_transcript,
    sample_environments,
)
from tests.workers import wait_for

ROOT = Path(__file__).resolve().parents[2]

# Every local test run trains the built-in tiny model: 2-layer Qwen2, hidden 64.
TINY = {
    "max_steps": 20,
    "learning_rate": 0.003,
    "batch_size": 2,
    "gradient_accumulation_steps": 1,
    "max_length": 2048,  # the first trained token of a sample row comes near 1,400
    "warmup_ratio": 0.0,
    "lr_scheduler_type": "linear",
    "save_steps": 10,
}
EXCLUDED_REPLY = "Noted, I will not repeat this turn in training."


@pytest.fixture(autouse=True)
def training_settings(settings, tmp_path, monkeypatch):
    settings.TRAINING_ROOT = tmp_path / "training"
    settings.TRAINING_DEVICE = "cpu"
    settings.TRAINING_POLL_S = 0.05
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # two shared cores: no thread oversubscription
    monkeypatch.setenv("TRAINING_ROOT", str(tmp_path / "training"))
    monkeypatch.setenv("TRAINING_DEVICE", "cpu")
    return settings


def excluded_turn_transcript(environment, task_key: str) -> tuple[list, list, float]:
    """The oracle transcript with an extra assistant reply, excluded from training."""
    transcript, tools, score = oracle_transcript(environment, task_key)
    copy = json.loads(json.dumps(transcript))
    # Worded per environment: the build joins environments whose replies coincide into one
    # group (which would leave no environment for the validation split).
    copy.insert(
        len(copy) - 1,
        {"role": "assistant", "content": f"{EXCLUDED_REPLY} ({environment.name})", "weight": 0},
    )
    copy.insert(len(copy) - 1, {"role": "user", "content": f"Go on with {task_key}."})
    return copy, tools, score


@pytest.fixture
def training_version(project, author, sample_environments, approved_demonstrations):  # noqa: F811
    """A ready version of 3 environments' oracle demonstrations, each environment with one
    more demonstration carrying a weight-0 assistant turn (so both splits have one)."""
    for env in sample_environments:
        task = env.tasks.filter(split="train").order_by("position").first()
        transcript, tools, score = excluded_turn_transcript(env, task.key)
        make_demonstration(env, task.key, transcript=transcript, tools=tools, score=score)
    dataset = dataset_create(project=project, name="Coworker SFT", user=author)
    return build_version(dataset, author)


def install_stand_in(tmp_path, monkeypatch, name: str, script: str) -> Path:
    """An executable ``tmp_path/name`` standing in for a cluster's submit command: ``script``
    formatted with this ``python`` and the repository ``root``; it records what it was given
    in ``$STANDIN_RECORD`` (``tmp_path/record.json``) and its trainer's output beside it."""
    path = tmp_path / name
    path.write_text(script.format(python=sys.executable, root=str(ROOT)))
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("STANDIN_RECORD", str(tmp_path / "record.json"))
    return path


def wait_for_stand_in_job(job, tmp_path, timeout: float) -> None:
    """Until the stand-in's trainer reported ``job`` finished; its log printed either way."""

    def finished():
        job.refresh_from_db()
        return job.status not in (JobStatus.PENDING, JobStatus.RUNNING)

    try:
        wait_for(finished, timeout=timeout, interval=0.5, message="the script's finished report")
    finally:
        log = Path(str(tmp_path / "record.json") + ".log")
        print(log.read_text()[-3000:] if log.exists() else "no log")


def run_sft_entry_point(
    tmp_path, base_model: str, train: Path, hyperparameters: dict, eval_file: Path | None = None
):
    """``python -m apps.training.sft`` on ``train`` (and ``eval_file``) in a fresh process (no
    Django, no worker), its output under ``tmp_path/run``: the finished process and the
    events it reported."""
    events = tmp_path / "events.jsonl"
    config = {
        "base_model": base_model,
        "train_file": str(train),
        "eval_file": str(eval_file) if eval_file else None,
        "output_dir": str(tmp_path / "run"),
        "hyperparameters": hyperparameters,
        "report": {"events_file": str(events)},
    }
    (tmp_path / "job.json").write_text(json.dumps(config))
    result = subprocess.run(
        [sys.executable, "-m", "apps.training.sft", "--config", str(tmp_path / "job.json")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return result, [json.loads(line) for line in events.read_text().splitlines()]


def execute_and_succeed(training_job):
    """``training_job_execute`` (what the gpu-queue task does) on ``training_job``, reloaded
    with its job: the job succeeded (else its message and log tail say why). Returns the job."""
    from apps.training.services import training_job_execute

    training_job_execute(training_job.job_id)
    training_job.refresh_from_db()
    job = training_job.job
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED, (job.message, training_job.log_tail[-3000:])
    return job


# What a stand-in's trainer needs from the test's environment (nothing else reaches it).
STAND_IN_PASS_ENV = [
    "STANDIN_RECORD",
    "OMP_NUM_THREADS",
    "TRAINING_DEVICE",
    "TRAINING_ROOT",
    "PYTHONPATH",
    "HOME",
    "HF_HOME",
    "HF_HUB_OFFLINE",
]


def slurm_template(program, **extra) -> dict:
    """An operator's Slurm-like template for ``program`` (a stand-in, or plain ``sbatch``)."""
    return {
        "kind": "slurm",
        "argv": [
            str(program),
            "--job-name=cw-{job_id}",
            "--export=ALL,COWORKENV_CONFIG={config_path}",
            "--comment={callback_url}",
            "deploy/slurm/train.sbatch",
        ],
        "pass_env": STAND_IN_PASS_ENV,
        **extra,
    }


@pytest.fixture
def operator_templates(settings, tmp_path):
    """Install the operator's command templates: ``operator_templates({name: template})``
    writes the file TRAINING_COMMAND_TEMPLATES_FILE names (its path returned)."""

    def install(templates: dict, suffix: str = ".json") -> Path:
        path = tmp_path / f"command-templates{suffix}"
        path.write_text(json.dumps({"templates": templates}))
        settings.TRAINING_COMMAND_TEMPLATES_FILE = str(path)
        return path

    return install
