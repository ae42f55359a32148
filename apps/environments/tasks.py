from apps.core.services import job_execute
from apps.core.tasks import durable_task
from apps.environments.services import environment_validation_run
from apps.environments.services.interop import claw_eval_checks_propose_run


@durable_task
def validate_environments_task(job_id: int) -> None:
    """Validate a job's environments (a redelivered job skips the ones already reported)."""
    job_execute(job_id=job_id, work=environment_validation_run)


@durable_task
def propose_checks_task(job_id: int) -> None:
    """Checks for an imported Claw-Eval task, proposed by a model (the ``llm`` queue)."""
    job_execute(job_id=job_id, work=claw_eval_checks_propose_run)
