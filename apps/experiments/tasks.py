"""Celery tasks of experiments: advance one, and look again while its stages work; send
again the advance of those whose message was lost."""

import logging

from celery import shared_task
from django.conf import settings

from apps.experiments.advance import experiment_advance
from apps.experiments.services import experiments_sweep

logger = logging.getLogger(__name__)


@shared_task(ignore_result=True)
def advance_experiment_task(experiment_id: int) -> None:
    """Advance the experiment; while a stage's jobs still work, look again in
    EXPERIMENT_POLL_S (a redelivered or doubled message only advances what is finished)."""
    experiment = experiment_advance(experiment_id=experiment_id)
    if experiment.is_active:
        advance_experiment_task.apply_async((experiment_id,), countdown=settings.EXPERIMENT_POLL_S)


@shared_task(ignore_result=True)
def sweep_experiments_task() -> None:
    """Celery beat sends this every JOB_SWEEP_EVERY_S (see ``experiments_sweep``)."""
    sent = experiments_sweep()
    if sent:
        logger.info("Sweeper sent experiments again: %s", sent)
