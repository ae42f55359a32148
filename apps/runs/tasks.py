from celery import shared_task

from apps.runs.models import Run, RunStatus
from apps.runs.services import RUN_STALE_AFTER, run_execute


@shared_task(bind=True, acks_late=True, max_retries=12)
def execute_run_task(self, run_id: int) -> None:
    """One (task, trial) of a run batch. Idempotent: a redelivered message finds the run
    finished and does nothing; one that finds it running elsewhere looks again later, and
    takes it over once that worker has stopped heartbeating (it was killed)."""
    if run_execute(run_id=run_id) is None and (
        Run.objects.filter(pk=run_id, status=RunStatus.RUNNING).exists()
    ):
        raise self.retry(countdown=RUN_STALE_AFTER.total_seconds() / 2)
