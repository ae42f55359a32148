"""The ``local`` backend: a ``gpu``-queue worker runs the entry point as a subprocess
(``accelerate launch -m apps.training.sft --config job.json``, or ``apps.training.grpo`` for
a GRPO job, whose files are the environments' specs) and supervises it.

The worker writes the data files (the version's ``trl`` export of each split, re-rendered
from its rows so the job never depends on the export cache) and ``job.json`` under the
job's output folder, starts the trainer in its own process group, and then, until it exits:
tails ``events.jsonl`` into the database (metrics, checkpoints, attempts), tails the
trainer's output into the log, sends the job's heartbeat, and — when someone cancels —
kills the process group. A worker that dies stops heartbeating; the trainer notices its
supervisor is gone and stops; the next worker takes the job over and the trainer resumes
from its last checkpoint (the step count continues).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings

from apps.core.exceptions import ApplicationError
from apps.core.services import JobCancelled, JobContext
from apps.datasets.services import export_lines
from apps.environments.attachments import attachment_bytes
from apps.training.entry import EXIT_CANCELLED
from apps.training.models import ModelKind, TrainingJob, TrainingMethod
from apps.training.services.reports import (
    trained_model_register,
    training_events_apply,
    training_log_append,
    training_progress_message,
)

logger = logging.getLogger(__name__)

SUPERVISE_INTERVAL_S = 0.5
STOP_GRACE_S = 10.0
LOG_CHUNK = 64_000
# What the entry points import: the `train` extra (`make run` installs it).
TRAIN_LIBRARIES = ("torch", "transformers", "trl", "datasets", "accelerate", "peft")


def train_libraries_check() -> None:
    """Refuse to start a trainer that would die on its first import, naming what to add."""
    missing = [name for name in TRAIN_LIBRARIES if importlib.util.find_spec(name) is None]
    if missing:
        raise ApplicationError(
            f"This worker lacks {', '.join(missing)}: install the train extra where the gpu "
            "queue's worker runs (pip install '.[train]'; make run installs it)."
        )


def write_split(training_job: TrainingJob, fmt: str, split: str, path: Path) -> str:
    """Write one split of the version in ``fmt`` to ``path`` (atomically); its sha256. The
    images a row names (``images/<sha256>.<ext>``, relative to the file: a split whose
    demonstrations show images) are written beside it from the attachment storage."""
    path.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    temp = path.with_name(f".{path.name}.part")
    with open(temp, "wb") as handle:
        for line, _ in export_lines(training_job.dataset_version, fmt, split):
            data = line.encode()
            digest.update(data)
            handle.write(data)
            if '"images": ["' in line:
                write_images(json.loads(line)["images"], path.parent)
    temp.replace(path)
    return digest.hexdigest()


def write_images(names: list[str], folder: Path) -> None:
    for name in names:
        target = folder / name
        if target.exists() or not name.startswith("images/"):
            continue
        data = attachment_bytes(Path(name).stem)
        if data is None:  # the export wrote "[image unavailable]" for it instead
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        part = target.with_name(f".{target.name}.part")
        part.write_bytes(data)
        part.replace(target)


def prepare_files(training_job: TrainingJob, *, fmt: str = "trl") -> dict:
    """The data files and their sha256, recorded in the job's artifacts."""
    data_dir = Path(training_job.output_dir) / "data"
    files = {"train": str(data_dir / "train.jsonl")}
    sha = {"train": write_split(training_job, fmt, "train", Path(files["train"]))}
    if training_job.eval_split:
        files["eval"] = str(data_dir / "eval.jsonl")
        sha["eval"] = write_split(training_job, fmt, training_job.eval_split, Path(files["eval"]))
    return {"files": files, "data_sha256": sha, "format": fmt}


def job_config(training_job: TrainingJob, files: dict, report: dict, **extra) -> dict:
    return {
        "job": training_job.pk,
        "method": training_job.method,
        "base_model": training_job.base_model,
        "train_file": files["train"],
        "eval_file": files.get("eval"),
        "output_dir": training_job.output_dir,
        "hyperparameters": training_job.hyperparameters,
        "report": report,
        "dataset": {
            "id": training_job.dataset_version.dataset_id,
            "version": training_job.dataset_version.number,
            "checksum": training_job.dataset_version.checksum,
        },
        **extra,
    }


def _device() -> str:
    if settings.TRAINING_DEVICE != "auto":
        return settings.TRAINING_DEVICE
    return "gpu" if Path("/dev/nvidia0").exists() else "cpu"


ENTRY_POINTS = {TrainingMethod.SFT: "apps.training.sft", TrainingMethod.GRPO: "apps.training.grpo"}


def launch_command(config_path: Path, method: str = TrainingMethod.SFT) -> list[str]:
    """``accelerate launch`` (one process per GPU, or as TRAINING_ACCELERATE_CONFIG says);
    ``python -m`` only when TRAINING_LAUNCHER=python. The method's entry point runs."""
    entry = ["-m", ENTRY_POINTS[method], "--config", str(config_path)]
    if settings.TRAINING_LAUNCHER == "python":
        return [sys.executable, *entry]
    command = [sys.executable, "-m", "accelerate.commands.launch"]
    if settings.TRAINING_ACCELERATE_CONFIG:
        command += ["--config_file", settings.TRAINING_ACCELERATE_CONFIG]
    else:
        processes = max(1, settings.TRAINING_NUM_PROCESSES)
        command += ["--num_processes", str(processes), "--num_machines", "1"]
        command += ["--mixed_precision", "no", "--dynamo_backend", "no"]
        if _device() == "cpu":
            command.append("--cpu")
        elif processes > 1:
            command.append("--multi_gpu")
    return [*command, *entry]


def _kill_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def group_alive(pgid: int) -> bool:
    """Whether any process of the group still runs (zombies waiting to be reaped do not)."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return True
    return False


def _wait_group(pgid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not group_alive(pgid):
            return True
        time.sleep(0.1)
    return not group_alive(pgid)


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM to the whole group (launcher and trainers), SIGKILL after a grace period."""
    _kill_group(process.pid, signal.SIGTERM)
    if not _wait_group(process.pid, STOP_GRACE_S):
        _kill_group(process.pid, signal.SIGKILL)
        _wait_group(process.pid, STOP_GRACE_S)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=STOP_GRACE_S)


def _stop_previous_trainer(pid_file: Path) -> None:
    """A trainer left by a dead worker on this machine is stopped before a new one starts,
    so two never write the same checkpoints."""
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return
    _kill_group(pid, signal.SIGKILL)
    _wait_group(pid, STOP_GRACE_S)


class _Tail:
    """New complete lines of a growing file, from a starting offset."""

    def __init__(self, path: Path, offset: int = 0):
        self.path = path
        self.offset = offset

    def read(self) -> str:
        if not self.path.exists():
            return ""
        with open(self.path, "rb") as handle:
            handle.seek(self.offset)
            data = handle.read(LOG_CHUNK * 4)
        end = data.rfind(b"\n")
        if end < 0:
            return ""
        self.offset += end + 1
        return data[: end + 1].decode("utf-8", errors="replace")


def grpo_job_config(training_job: TrainingJob, report: dict, **extra) -> tuple[dict, dict]:
    """``job.json`` of a GRPO job (``apps.training.grpo``) and the specs' sha256."""
    from apps.training.services.grpo import grpo_environment_files

    files = grpo_environment_files(training_job)
    config = {
        "job": training_job.pk,
        "method": training_job.method,
        "base_model": training_job.base_model,
        "environments": files["environments"],
        "split": training_job.task_split,
        "output_dir": training_job.output_dir,
        "hyperparameters": training_job.hyperparameters,
        "report": report,
        **extra,
    }
    return config, files["spec_sha256"]


def local_training_run(context: JobContext, training_job: TrainingJob) -> str:
    train_libraries_check()
    out = Path(training_job.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    events_path = out / "events.jsonl"
    log_path = out / "train.log"
    config_path = _write_config(training_job, out, events_path, log_path)
    pid_file = out / "trainer.pid"
    _stop_previous_trainer(pid_file)
    command = launch_command(config_path, training_job.method)
    TrainingJob.objects.filter(pk=training_job.pk).update(command=" ".join(command))
    output = _TrainerOutput(training_job, events_path, log_path)
    training_log_append(
        training_job=training_job,
        text=f"[coworkenv] attempt {context.job.attempts}: {' '.join(command)}\n",
    )
    with open(log_path, "ab") as log_file:
        process = subprocess.Popen(
            command,
            cwd=settings.BASE_DIR,
            env=_trainer_env(),
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    pid_file.write_text(str(process.pid))
    code = _supervise(context, training_job, process, output, pid_file)
    output.drain()
    pid_file.unlink(missing_ok=True)
    return _outcome(training_job, code, output.finished)


def _write_config(training_job: TrainingJob, out: Path, events_path: Path, log_path: Path) -> Path:
    """Write ``job.json`` (and a supervised SFT job's data files); record them in the job's
    artifacts. Returns the config's path."""
    report = {"events_file": str(events_path)}
    if training_job.method == TrainingMethod.GRPO:
        config, data_sha256 = grpo_job_config(training_job, report, supervisor_pid=os.getpid())
    else:
        prepared = prepare_files(training_job, fmt="trl")
        config = job_config(training_job, prepared["files"], report, supervisor_pid=os.getpid())
        data_sha256 = prepared["data_sha256"]
    config_path = out / "job.json"
    config_path.write_text(json.dumps(config, indent=2))
    artifacts = dict(training_job.artifacts or {})
    artifacts.update(
        output_dir=str(out),
        config_path=str(config_path),
        config=config,
        data_sha256=data_sha256,
        log_path=str(log_path),
    )
    training_job.artifacts = artifacts
    TrainingJob.objects.filter(pk=training_job.pk).update(artifacts=artifacts)
    return config_path


def _trainer_env() -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(settings.BASE_DIR), os.environ.get("PYTHONPATH", "")) if p
        ),
        "PYTHONUNBUFFERED": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }


class _TrainerOutput:
    """What the trainer writes, followed from where the files stood when it started: its
    events go to the database, its output to the job's log. ``finished`` is the last
    event that closed the run, once one came."""

    def __init__(self, training_job: TrainingJob, events_path: Path, log_path: Path):
        self.training_job = training_job
        self.events = _Tail(events_path, events_path.stat().st_size if events_path.exists() else 0)
        self.log = _Tail(log_path, log_path.stat().st_size if log_path.exists() else 0)
        self.finished: dict | None = None

    def drain(self) -> None:
        training_job = self.training_job
        lines = [json.loads(line) for line in self.events.read().splitlines() if line.strip()]
        if lines:
            self.finished = (
                training_events_apply(training_job=training_job, events=lines) or self.finished
            )
        text = self.log.read()
        if text:
            training_log_append(training_job=training_job, text=text[-LOG_CHUNK:])


def _supervise(
    context: JobContext,
    training_job: TrainingJob,
    process: subprocess.Popen,
    output: _TrainerOutput,
    pid_file: Path,
) -> int:
    """Follow the trainer until it exits (its exit code), reporting progress; a cancel or
    any other exception stops its process group first."""
    try:
        while True:
            code = process.poll()
            output.drain()
            training_job.refresh_from_db(
                fields=["current_step", "last_loss", "last_reward", "total_steps"]
            )
            context.progress(
                min(training_job.current_step, training_job.total_steps),
                training_job.total_steps,
                training_progress_message(training_job),
            )
            if code is not None:
                return code
            time.sleep(SUPERVISE_INTERVAL_S)
    except JobCancelled:
        _stop(process)
        output.drain()
        pid_file.unlink(missing_ok=True)
        raise
    except BaseException:
        _stop(process)
        raise


def _outcome(training_job: TrainingJob, code: int, finished: dict | None) -> str:
    """Register the trained model of a run that succeeded and return its message; raise
    for one that was cancelled or failed."""
    if code == 0 and finished and finished.get("status") == "succeeded":
        final = finished.get("artifacts") or {}
        kind = ModelKind.ADAPTER if final.get("kind") == "adapter" else ModelKind.FULL
        trained_model_register(
            training_job=training_job, kind=kind, path=str(final.get("final", ""))
        )
        return finished.get("message") or "Trained."
    if code == EXIT_CANCELLED:
        raise JobCancelled
    reason = (finished or {}).get("message") or _last_line(training_job.log_tail)
    raise ApplicationError(f"Training exited with status {code}: {reason}")


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1][:500] if lines else "no output."
