"""Celery tasks of synthesis (routed to the ``llm`` queue). Thin: ids in, one service call."""

import logging

from celery import shared_task

from apps.core.tasks import durable_task
from apps.core.text import count_of
from apps.synthesis.services import synthesis_slot_run, synthesis_sweep

logger = logging.getLogger(__name__)


@durable_task
def synthesize_slot_task(slot_id: int) -> str:
    """Claim and work one slot; a duplicate or late message finds it claimed or done."""
    return synthesis_slot_run(slot_id=slot_id)


@shared_task(ignore_result=True)
def sweep_synthesis_task() -> None:
    """Celery beat sends this every JOB_SWEEP_EVERY_S (see ``synthesis_sweep``)."""
    outcome = synthesis_sweep()
    if outcome["sent"]:
        logger.info(
            "Sweeper sent %s again: %s", count_of(len(outcome["sent"]), "slot"), outcome["sent"]
        )
