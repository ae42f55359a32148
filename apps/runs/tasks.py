import logging

from celery import shared_task
from celery.worker import state as worker_state

from apps.core.tasks import durable_task
from apps.core.text import count_of
from apps.runs.services import run_execute, runs_sweep

logger = logging.getLogger(__name__)


@durable_task
def execute_run_task(run_id: int) -> None:
    """One (task, trial) of a run batch, then the batch's next ones in the same lane until
    the worker is asked to stop (see ``run_execute``). Idempotent: a redelivered message
    finds the run finished (and moves its batch along) or held by a live worker, and does
    nothing; a run whose worker died is sent again by the sweeper and taken over."""
    run_execute(run_id=run_id, lane=_worker_goes_on)


def _worker_goes_on() -> bool:
    # Celery sets these to an exit code (0 for a warm shutdown) when the worker is to stop.
    return worker_state.should_stop is None and worker_state.should_terminate is None


@shared_task(ignore_result=True)
def sweep_runs_task() -> None:
    """Celery beat sends this every JOB_SWEEP_EVERY_S (see ``runs_sweep``)."""
    outcome = runs_sweep()
    if outcome["sent"]:
        logger.info(
            "Sweeper sent %s again: %s", count_of(len(outcome["sent"]), "run"), outcome["sent"]
        )
