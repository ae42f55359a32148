import logging

from celery import shared_task

from apps.core.tasks import durable_task
from apps.core.text import count_of
from apps.runs.services import run_execute, runs_sweep

logger = logging.getLogger(__name__)


@durable_task
def execute_run_task(run_id: int) -> None:
    """One (task, trial) of a run batch. Idempotent: a redelivered message finds the run
    finished (and moves its batch along) or held by a live worker, and does nothing; a run
    whose worker died is sent again by the sweeper and taken over."""
    run_execute(run_id=run_id)


@shared_task(ignore_result=True)
def sweep_runs_task() -> None:
    """Celery beat sends this every JOB_SWEEP_EVERY_S (see ``runs_sweep``)."""
    outcome = runs_sweep()
    if outcome["sent"]:
        logger.info(
            "Sweeper sent %s again: %s", count_of(len(outcome["sent"]), "run"), outcome["sent"]
        )
