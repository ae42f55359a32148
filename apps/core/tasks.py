"""Celery tasks of the core app, and ``durable_task``: how every job's task is declared."""

import logging

from celery import shared_task

from apps.core.leases import TRANSIENT_DB_ERRORS
from apps.core.services import job_execute, jobs_sweep, worker_check_run
from apps.core.text import count_of

logger = logging.getLogger(__name__)


def durable_task(*args, **options):
    """``shared_task`` for work that is claimed in the database, so that running it twice
    is harmless. Nothing is lost on the way:

    - ``acks_late`` + ``reject_on_worker_lost``: a message is acknowledged only when its task
      returns; if the pool process running it is killed (out of memory, ``kill -9``) the
      message goes back to the queue instead of being dropped;
    - a database that refuses connections, drops them or is locked makes the task retry with
      exponential backoff (1 s up to a minute, with jitter) instead of failing;
    - whatever still slips through (a whole worker killed with the messages it had reserved,
      a broker restarted empty) is sent again by the sweeper, from the rows' state.
    """
    defaults = {
        "acks_late": True,
        "reject_on_worker_lost": True,
        "autoretry_for": TRANSIENT_DB_ERRORS,
        "retry_backoff": 1,
        "retry_backoff_max": 60,
        "retry_jitter": True,
        "max_retries": 12,
    }
    return shared_task(*args, **{**defaults, **options})


@durable_task
def check_worker_task(job_id: int) -> None:
    job_execute(job_id=job_id, work=worker_check_run)


@shared_task(ignore_result=True)
def sweep_jobs_task() -> None:
    """Celery beat sends this every JOB_SWEEP_EVERY_S: jobs whose worker died, or whose
    message was lost, are sent again."""
    outcome = jobs_sweep()
    if outcome["sent"]:
        logger.info(
            "Sweeper sent %s again: %s", count_of(len(outcome["sent"]), "job"), outcome["sent"]
        )
