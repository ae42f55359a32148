from celery import shared_task

from apps.core.services import job_execute
from apps.environments.services import environment_validation_run


@shared_task(acks_late=True)
def validate_environments_task(job_id: int) -> None:
    job_execute(job_id=job_id, work=environment_validation_run)
