"""A real gpu-queue worker trains a job; it is killed mid-training; the trainer stops with
its supervisor; the next worker takes the job over and the trainer resumes from the last
checkpoint: the step count continues, every step has its metrics once, the model is saved."""

import contextlib
import re
from pathlib import Path

import pytest

pytest.importorskip("trl")  # the `train` extra

from apps.core.models import Job, JobStatus
from apps.training.models import TrainedModel, TrainingJob, TrainingMetric
from apps.training.services import training_job_create
from apps.training.services.local import group_alive
from tests.training.conftest import TINY
from tests.workers import WorkerProcess, purge_queues, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

STEPS = 30
SAVE_EVERY = 5


def test_killed_worker_resumes_from_the_last_checkpoint(
    project, author, training_version, settings, monkeypatch, tmp_path
):
    monkeypatch.setenv("TRAINING_STALE_S", "3")
    settings.TRAINING_STALE_S = 3
    purge_queues()
    first = WorkerProcess(queues="gpu", concurrency=1, log_path=tmp_path / "w1.log").start()
    second = None
    try:
        training_job = training_job_create(
            project=project,
            user=author,
            dataset_version=training_version,
            backend="local",
            base_model="preset:tiny-qwen2",
            hyperparameters={**TINY, "max_steps": STEPS, "save_steps": SAVE_EVERY},
        )
        rows = TrainingJob.objects.filter(pk=training_job.pk)
        wait_for(
            lambda: rows.values_list("current_step", flat=True)[0] >= 12,
            timeout=240,
            interval=0.2,
            message="training to pass step 12",
        )
        pid = int((Path(training_job.output_dir) / "trainer.pid").read_text())
        first.kill()
        # The trainer notices its supervisor is gone at its next step and stops.
        wait_for(
            lambda: not group_alive(pid), timeout=60, interval=0.1, message="the orphaned trainer"
        )
        checkpoints = sorted(
            int(m.group(1))
            for p in (Path(training_job.output_dir) / "checkpoints").iterdir()
            if (m := re.fullmatch(r"checkpoint-(\d+)", p.name))
        )
        resume_from = checkpoints[-1]
        assert resume_from >= 10 and resume_from % SAVE_EVERY == 0
        assert Job.objects.get(pk=training_job.job_id).status == JobStatus.RUNNING

        second = WorkerProcess(queues="gpu", concurrency=1, log_path=tmp_path / "w2.log").start()

        def finished():
            return Job.objects.get(pk=training_job.job_id).status not in (
                JobStatus.PENDING,
                JobStatus.RUNNING,
            )

        wait_for(finished, timeout=300, interval=0.5, message="the resumed job to finish")
    finally:
        first.kill()
        if second is not None:
            second.stop()
        for name in ("w1.log", "w2.log"):
            with contextlib.suppress(OSError):
                print(name, (tmp_path / name).read_text()[-3000:])

    job = Job.objects.get(pk=training_job.job_id)
    training_job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED, (job.message, training_job.log_tail[-2000:])
    assert job.attempts == 2
    assert job.message == f"Trained {STEPS} steps."
    attempts = training_job.artifacts["attempts"]
    assert [a["resumed_from_step"] for a in attempts] == [0, resume_from]
    assert f"[coworkenv] started (resumed from step {resume_from})" in training_job.log_tail
    steps = list(
        TrainingMetric.objects.filter(training_job=training_job, loss__isnull=False)
        .order_by("step")
        .values_list("step", flat=True)
    )
    assert steps == list(range(1, STEPS + 1))
    assert (job.progress_done, job.progress_total) == (STEPS, STEPS)
    assert TrainedModel.objects.get(training_job=training_job).path.endswith("/final")
