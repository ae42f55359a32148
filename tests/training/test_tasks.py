"""The training task is declared like every other job's task (``durable_task``)."""

from apps.core.leases import TRANSIENT_DB_ERRORS
from apps.core.models import Job
from apps.training.tasks import run_training_task


def test_the_training_task_retries_database_errors_and_survives_a_killed_pool_process():
    """``job_execute`` gives the claim back on a database error and raises it again, leaving
    the job pending; training jobs are created with their own ``enqueue`` (queue by backend),
    so the sweeper never sends them again: the task's own retry is what takes the job back.
    A pool process killed mid-training puts the message back rather than dropping it."""
    assert run_training_task.autoretry_for == TRANSIENT_DB_ERRORS
    assert run_training_task.max_retries == 12
    assert run_training_task.acks_late is True
    assert run_training_task.reject_on_worker_lost is True


def test_the_core_sweeper_leaves_training_jobs_to_their_own(db, project, author, training_version):
    """The job row names no task for the core sweeper (training routes its messages by
    backend); ``training_jobs_sweep`` sends them instead (tests/training/test_sweep.py)."""
    from apps.training.services import training_job_create
    from tests.training.conftest import TINY

    training_job = training_job_create(
        project=project,
        user=author,
        dataset_version=training_version,
        backend="local",
        preset="tiny-cpu",
        hyperparameters=TINY,
    )
    assert Job.objects.get(pk=training_job.job_id).task_name == ""
