from apps.core.services import job_execute
from apps.core.tasks import durable_task
from apps.llm.services import endpoint_test_run


@durable_task
def check_endpoint_task(job_id: int) -> None:
    """One connection test; a redelivered message finds the job claimed or finished (a test
    taken over after its worker died simply asks again)."""
    job_execute(job_id=job_id, work=endpoint_test_run)
