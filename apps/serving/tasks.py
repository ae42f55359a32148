"""Celery tasks of serving: a server runs on the ``gpu`` queue; the sweep on ``default``."""

import logging

from celery import shared_task

from apps.core.services import job_execute
from apps.core.tasks import durable_task
from apps.serving.running import model_server_run
from apps.serving.services import model_servers_sweep

logger = logging.getLogger(__name__)


@durable_task
def serve_model_task(job_id: int) -> None:
    """Claim a model server's job and serve until it stops; a duplicate finds it claimed."""
    job_execute(job_id=job_id, work=model_server_run)


@shared_task(ignore_result=True)
def sweep_model_servers_task() -> None:
    """Celery beat sends this every JOB_SWEEP_EVERY_S (see ``model_servers_sweep``)."""
    outcome = model_servers_sweep()
    if outcome["stopped"] or outcome["sent"]:
        logger.info("Model server sweep: %s", outcome)
