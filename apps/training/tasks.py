"""Celery tasks of training. Thin: ids in, one service call. Local training runs on the
``gpu`` queue; the openai and command backends on ``llm`` (they only talk to a service)."""

import logging

from celery import shared_task
from celery.signals import worker_ready

from apps.core.tasks import durable_task
from apps.training.models import TrainingJob
from apps.training.services import training_job_execute, training_jobs_recover
from apps.training.services.jobs import training_jobs_sweep, training_queue

logger = logging.getLogger(__name__)


@durable_task
def run_training_task(job_id: int) -> None:
    """Claim and run a training job; a duplicate finds it claimed (or finished). Durable:
    a database error gives the claim back (``job_execute``) and the task's retry takes the
    job again; a message lost with its worker is sent again by ``sweep_training_task``."""
    training_job_execute(job_id)


@shared_task
def recover_training_task() -> None:
    """Queue again the training jobs whose worker died (sent when a worker starts); look
    again when the others' heartbeats would expire, while any training job runs."""
    stale, recheck_in = training_jobs_recover()
    for job_id in stale:
        backend = TrainingJob.objects.filter(job_id=job_id).values_list("backend", flat=True)[0]
        run_training_task.apply_async((job_id,), queue=training_queue(backend))
    if recheck_in is not None:
        recover_training_task.apply_async(countdown=recheck_in)


@shared_task(ignore_result=True)
def sweep_training_task() -> None:
    """Celery beat sends this every JOB_SWEEP_EVERY_S (see ``training_jobs_sweep``)."""
    outcome = training_jobs_sweep()
    if outcome["sent"]:
        logger.info("Sweeper sent training jobs again: %s", outcome["sent"])
    if outcome["failed"]:
        logger.warning("Sweeper failed silent command jobs: %s", outcome["failed"])


@worker_ready.connect
def _recover_on_worker_start(sender=None, **kwargs) -> None:
    """A worker that starts re-queues the training jobs a killed worker left behind; they
    are taken over once their heartbeat is TRAINING_STALE_S old."""
    try:
        recover_training_task.apply_async(countdown=0)
    except Exception:  # a broker hiccup must not stop the worker from starting
        logger.exception("Could not queue the training recovery task.")
