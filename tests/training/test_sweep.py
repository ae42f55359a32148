"""The training sweeper (``training_jobs_sweep``, sent by Celery beat): a job whose launch
message never left is sent once the broker is back; a local or openai job whose worker went
silent is sent again to be taken over; a command job never; two sweeps send a job once."""

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.core.models import Job, JobStatus
from apps.training.services import training_job_create
from apps.training.services.jobs import training_jobs_sweep
from coworkenv_web.settings import CELERY_BEAT_SCHEDULE
from tests.training.conftest import TINY

pytestmark = pytest.mark.django_db


@pytest.fixture
def make_job(project, author, training_version):
    def make(**fields):
        training_job = training_job_create(
            project=project,
            user=author,
            dataset_version=training_version,
            backend="local",
            preset="tiny-cpu",
            hyperparameters=TINY,
        )
        Job.objects.filter(pk=training_job.job_id).update(**fields)
        return training_job.job_id

    return make


def test_a_job_whose_launch_message_never_left_is_sent_once(make_job):
    # what a launch during a broker outage leaves: pending, never sent
    job_id = make_job(enqueued_at=None)
    now = timezone.now()
    assert training_jobs_sweep(now=now) == {"sent": [job_id], "failed": []}
    assert Job.objects.get(pk=job_id).enqueued_at == now
    # the next sweep (or a second beat process) does not send it again
    assert training_jobs_sweep(now=now + timedelta(seconds=15)) == {"sent": [], "failed": []}


def test_a_silent_running_job_is_sent_again_and_a_live_one_is_not(make_job, settings):
    now = timezone.now()
    stale = now - timedelta(seconds=settings.TRAINING_STALE_S + 1)
    silent = make_job(status=JobStatus.RUNNING, heartbeat_at=stale, enqueued_at=stale)
    live = make_job(status=JobStatus.RUNNING, heartbeat_at=now, enqueued_at=stale)
    queued = make_job(enqueued_at=stale)  # waiting behind other work on the gpu queue
    assert training_jobs_sweep(now=now) == {"sent": [silent], "failed": []}
    assert Job.objects.get(pk=silent).enqueued_at == now
    assert {Job.objects.get(pk=pk).enqueued_at for pk in (live, queued)} == {stale}


def test_command_jobs_are_never_sent_again(project, author, training_version, operator_templates):
    from apps.training.services.reports import callback_secret_new

    operator_templates({"slurm": {"argv": ["sbatch", "{config_path}"]}})
    training_job = training_job_create(
        project=project,
        user=author,
        dataset_version=training_version,
        backend="command",
        base_model="Qwen/Qwen2.5-0.5B-Instruct",
        command_template="slurm",
    )
    callback_secret_new(training_job)
    long_ago = timezone.now() - timedelta(minutes=30)  # stale for a worker, not past the deadline
    Job.objects.filter(pk=training_job.job_id).update(
        status=JobStatus.RUNNING, heartbeat_at=long_ago, enqueued_at=long_ago
    )
    assert training_jobs_sweep() == {"sent": [], "failed": []}


def test_a_command_job_silent_past_its_deadline_is_failed(
    project, author, training_version, operator_templates, settings
):
    """No report for TRAINING_COMMAND_SILENT_S: the sweep fails it with a message that says
    why; a job that reported within the deadline, and a finished one, are left alone."""
    settings.TRAINING_COMMAND_SILENT_S = 600
    operator_templates({"slurm": {"argv": ["sbatch", "{config_path}"]}})
    jobs = [
        training_job_create(
            project=project,
            user=author,
            dataset_version=training_version,
            backend="command",
            base_model="Qwen/Qwen2.5-0.5B-Instruct",
            command_template="slurm",
            enqueue=False,
        )
        for _ in range(3)
    ]
    now = timezone.now()
    silent, talking, done = (j.job_id for j in jobs)
    Job.objects.filter(pk=silent).update(
        status=JobStatus.RUNNING, heartbeat_at=now - timedelta(seconds=601)
    )
    Job.objects.filter(pk=talking).update(
        status=JobStatus.RUNNING, heartbeat_at=now - timedelta(seconds=599)
    )
    Job.objects.filter(pk=done).update(
        status=JobStatus.SUCCEEDED, heartbeat_at=now - timedelta(days=2), message="Trained."
    )
    assert training_jobs_sweep(now=now) == {"sent": [], "failed": [silent]}
    job = Job.objects.get(pk=silent)
    assert job.status == JobStatus.FAILED and job.finished_at == now
    assert job.message.startswith("No report from the training script for more than 600 s")
    assert Job.objects.get(pk=talking).status == JobStatus.RUNNING
    assert Job.objects.get(pk=done).message == "Trained."
    # later: the second one's deadline passes too; the first is not failed twice
    assert training_jobs_sweep(now=now + timedelta(seconds=2)) == {"sent": [], "failed": [talking]}


def test_beat_sends_the_training_sweep_on_the_default_queue():
    entry = CELERY_BEAT_SCHEDULE["sweep-training"]
    assert entry["task"] == "apps.training.tasks.sweep_training_task"
    assert entry["options"]["queue"] == "default"
