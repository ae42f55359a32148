"""Validation as a job: the engine's verdict on an environment's current revision."""

from django.db import transaction
from django.utils import timezone

from apps.core.exceptions import ApplicationError
from apps.core.models import Job
from apps.core.services import JobContext, job_create
from apps.environments.engine import spec as engine_spec
from apps.environments.engine.validation import validate_spec
from apps.environments.models import Environment, EnvironmentStatus, ValidationReport
from apps.environments.specs import environment_spec

VALIDATION_JOB_KIND = "environment_validation"
MAX_ENVIRONMENTS_PER_VALIDATION_JOB = 500


def environment_validation_start(*, project, environments, started_by) -> Job:
    """Queue one job that validates these environments, each against its current revision."""
    from apps.environments.tasks import validate_environments_task

    ids = [environment.pk for environment in environments]
    if not ids:
        raise ApplicationError("Choose at least one environment to validate.")
    if len(ids) > MAX_ENVIRONMENTS_PER_VALIDATION_JOB:
        raise ApplicationError(
            f"Validate at most {MAX_ENVIRONMENTS_PER_VALIDATION_JOB} environments at a time."
        )
    title = (
        f"Validate “{environments[0].name}”"
        if len(ids) == 1
        else f"Validate {len(ids)} environments"
    )
    return job_create(
        project=project,
        kind=VALIDATION_JOB_KIND,
        title=title[:200],
        started_by=started_by,
        params={"environment_ids": ids},
        total=len(ids),
        enqueue=validate_environments_task.delay,
    )


def environment_validation_run(context: JobContext) -> str:
    """Validate each environment of the job once; a redelivered job skips finished ones."""
    job = context.job
    ids = job.params["environment_ids"]
    done = set(ValidationReport.objects.filter(job=job).values_list("environment_id", flat=True))
    valid = invalid = 0
    for index, environment_id in enumerate(ids):
        if environment_id in done:
            continue
        environment = Environment.objects.filter(pk=environment_id, project=job.project).first()
        if environment is None:
            continue
        context.progress(index, len(ids), f"Validating {environment.name}")
        report = environment_validate(environment=environment, job=job)
        valid += report.valid
        invalid += not report.valid
    context.progress(len(ids), len(ids))
    return f"{valid} valid, {invalid} invalid."


def environment_validate(*, environment: Environment, job: Job | None = None) -> ValidationReport:
    """Run the engine's validation on the current revision and record the outcome.

    The status changes only if nobody edited the environment meanwhile; otherwise the report
    is kept for its revision and the environment stays a draft.
    """
    revision = environment.revision
    document = environment_spec(environment)
    result = validate_spec(document)
    summary = result.to_dict()
    with transaction.atomic():
        report = ValidationReport.objects.create(
            environment=environment,
            job=job,
            revision=revision,
            spec_hash=engine_spec.spec_hash(document),
            valid=result.valid,
            problems=summary["problems"],
            tasks=summary["tasks"],
        )
        Environment.objects.filter(
            pk=environment.pk,
            revision=revision,
            status__in=[
                EnvironmentStatus.DRAFT,
                EnvironmentStatus.VALID,
                EnvironmentStatus.INVALID,
            ],
        ).update(
            status=EnvironmentStatus.VALID if result.valid else EnvironmentStatus.INVALID,
            latest_validation=report,
            updated_at=timezone.now(),
        )
        Environment.objects.filter(pk=environment.pk, revision=revision).update(
            latest_validation=report
        )
    return report
