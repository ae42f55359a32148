"""Celery tasks of the curation app: ids in, one service call."""

from apps.core.services import job_execute
from apps.core.tasks import durable_task


@durable_task
def regrade_demonstrations_task(job_id: int) -> None:
    """Re-grade demonstrations (resumable: only stale ones are redone on redelivery)."""
    from apps.curation.services.regrade import regrade_demonstrations

    job_execute(job_id=job_id, work=regrade_demonstrations)
