from celery import shared_task

from apps.core.services import job_execute
from apps.llm.services import endpoint_test_run


@shared_task(acks_late=True)
def check_endpoint_task(job_id: int) -> None:
    """One connection test; a redelivered message finds the job claimed or finished."""
    job_execute(job_id=job_id, work=endpoint_test_run)
