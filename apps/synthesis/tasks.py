"""Celery tasks of synthesis (routed to the ``llm`` queue). Thin: ids in, one service call."""

import logging

from celery import shared_task
from celery.signals import worker_ready

from apps.synthesis.models import SynthesisJob
from apps.synthesis.services import synthesis_recover, synthesis_resume, synthesis_slot_run

logger = logging.getLogger(__name__)


@shared_task(acks_late=True)
def synthesize_slot_task(slot_id: int) -> str:
    """Claim and work one slot; a duplicate or late message finds it claimed or done."""
    return synthesis_slot_run(slot_id=slot_id)


@shared_task
def resume_synthesis_task(synthesis_id: int) -> None:
    """Queue a job's slots that nobody works on; check again when the leases run out."""
    synthesis = SynthesisJob.objects.filter(pk=synthesis_id).first()
    if synthesis is None:
        return
    outcome = synthesis_resume(synthesis=synthesis)
    if outcome["recheck_in"] is not None:
        resume_synthesis_task.apply_async((synthesis_id,), countdown=outcome["recheck_in"])


@shared_task
def recover_synthesis_task() -> None:
    """Resume every active synthesis job (sent when a worker starts)."""
    for outcome in synthesis_recover():
        if outcome["recheck_in"] is not None:
            resume_synthesis_task.apply_async(
                (outcome["synthesis_id"],), countdown=outcome["recheck_in"]
            )


@worker_ready.connect
def _recover_on_worker_start(sender=None, **kwargs) -> None:
    """A worker that starts picks up the jobs a killed worker left behind: their lost
    messages are re-sent and their stale leases taken over once they expire."""
    try:
        recover_synthesis_task.delay()
    except Exception:  # a broker hiccup must not stop the worker from starting
        logger.exception("Could not queue the synthesis recovery task.")
