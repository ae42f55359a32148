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
    assert training_jobs_sweep(now=now) == {"sent": [job_id]}
    assert Job.objects.get(pk=job_id).enqueued_at == now
    # the next sweep (or a second beat process) does not send it again
    assert training_jobs_sweep(now=now + timedelta(seconds=15)) == {"sent": []}


def test_a_silent_running_job_is_sent_again_and_a_live_one_is_not(make_job, settings):
    now = timezone.now()
    stale = now - timedelta(seconds=settings.TRAINING_STALE_S + 1)
    silent = make_job(status=JobStatus.RUNNING, heartbeat_at=stale, enqueued_at=stale)
    live = make_job(status=JobStatus.RUNNING, heartbeat_at=now, enqueued_at=stale)
    queued = make_job(enqueued_at=stale)  # waiting behind other work on the gpu queue
    assert training_jobs_sweep(now=now) == {"sent": [silent]}
    assert Job.objects.get(pk=silent).enqueued_at == now
    assert {Job.objects.get(pk=pk).enqueued_at for pk in (live, queued)} == {stale}


def test_command_jobs_are_never_sent_again(project, author, training_version):
    from apps.training.services import command_template_create
    from apps.training.services.jobs import callback_secret_new

    template = command_template_create(
        project=project, user=author, name="slurm", kind="slurm", template="sbatch {config_path}"
    )
    training_job = training_job_create(
        project=project,
        user=author,
        dataset_version=training_version,
        backend="command",
        base_model="Qwen/Qwen2.5-0.5B-Instruct",
        command_template=template,
    )
    callback_secret_new(training_job)
    long_ago = timezone.now() - timedelta(days=1)
    Job.objects.filter(pk=training_job.job_id).update(
        status=JobStatus.RUNNING, heartbeat_at=long_ago, enqueued_at=long_ago
    )
    assert training_jobs_sweep() == {"sent": []}


def test_beat_sends_the_training_sweep_on_the_default_queue():
    entry = CELERY_BEAT_SCHEDULE["sweep-training"]
    assert entry["task"] == "apps.training.tasks.sweep_training_task"
    assert entry["options"]["queue"] == "default"
