from celery import shared_task

from apps.core.services import job_execute, worker_check_run


@shared_task(acks_late=True)
def check_worker_task(job_id: int) -> None:
    job_execute(job_id=job_id, work=worker_check_run)
