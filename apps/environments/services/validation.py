"""Validation as a job: the engine's verdict on an environment's current revision."""

from django.conf import settings
from django.db import transaction
from django.urls import reverse
from django.utils import timezone
from django.utils.module_loading import import_string

from apps.core.exceptions import ApplicationError
from apps.core.models import Job
from apps.core.services import JobContext, job_create
from apps.environments.attachments import attachment_bytes
from apps.environments.models import Environment, EnvironmentStatus, ValidationReport
from apps.environments.specs import environment_spec
from apps.llm.judge import judge_for_project
from coworkenv_engine import spec as engine_spec
from coworkenv_engine.validation import validate_spec

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
        task=validate_environments_task,
    )


def environment_validation_run(context: JobContext) -> str:
    """Validate each environment of the job once; a redelivered job skips finished ones.

    The job's ``result`` lists the verdicts with a link to each environment, so its page
    leads back to what was validated (``links`` is rendered by the generic job page).
    """
    job = context.job
    ids = job.params["environment_ids"]
    outcomes = {
        report.environment_id: _outcome(report.environment, report)
        for report in ValidationReport.objects.filter(job=job).select_related("environment")
    }
    for index, environment_id in enumerate(ids):
        if environment_id in outcomes:
            continue
        environment = Environment.objects.filter(pk=environment_id, project=job.project).first()
        if environment is None:
            continue
        context.progress(index, len(ids), f"Validating {environment.name}")
        report = environment_validate(environment=environment, job=job)
        outcomes[environment_id] = _outcome(environment, report)
        _record_outcomes(job, ids, outcomes)
    _record_outcomes(job, ids, outcomes)
    context.progress(len(ids), len(ids))
    valid = sum(1 for outcome in outcomes.values() if outcome["valid"])
    missing = len(ids) - len(outcomes)
    return f"{valid} valid, {len(outcomes) - valid} invalid." + (
        f" {missing} no longer exist{'s' if missing == 1 else ''}." if missing else ""
    )


def _outcome(environment: Environment, report: ValidationReport) -> dict:
    errors, warnings = report.error_count, report.warning_count
    verdict = "valid" if report.valid else "invalid"
    details = [f"{errors} error{'s' if errors != 1 else ''}"] if errors else []
    if warnings:
        details.append(f"{warnings} warning{'s' if warnings != 1 else ''}")
    return {
        "environment_id": environment.pk,
        "valid": report.valid,
        "label": environment.name,
        "url": reverse("environments:detail", args=[environment.pk]),
        "note": f"{verdict} (r{report.revision})" + (f": {', '.join(details)}" if details else ""),
    }


def _record_outcomes(job: Job, ids: list[int], outcomes: dict[int, dict]) -> None:
    ordered = [outcomes[pk] for pk in ids if pk in outcomes]
    job.result = {
        "environment_ids": ids,
        "valid": sum(1 for outcome in ordered if outcome["valid"]),
        "invalid": sum(1 for outcome in ordered if not outcome["valid"]),
        "links": [{"label": o["label"], "url": o["url"], "note": o["note"]} for o in ordered],
    }
    Job.objects.filter(pk=job.pk).update(result=job.result)


def environment_validate(*, environment: Environment, job: Job | None = None) -> ValidationReport:
    """Run the engine's validation on the current revision and record the outcome.

    The status changes only if nobody edited the environment meanwhile; otherwise the report
    is kept for its revision and the environment stays a draft.
    """
    revision = environment.revision
    document = environment_spec(environment)
    # With the project's judge, judge graders are scored (the oracle must pass them); without
    # one they are skipped and the report warns that the task is only partially certified.
    judge = judge_for_project(project=environment.project, job=job)
    # The stored files are checked against the listed attachments (hash, size, type).
    # The time budget is a backstop: a spec that runs past it is reported invalid.
    result = validate_spec(
        document,
        judge=judge,
        attachments=attachment_bytes,
        time_budget=settings.VALIDATION_TIME_BUDGET_S,
    )
    if judge is not None and judge.outage is not None:
        # A judge that stayed down says nothing about the spec: fail the job, keep the status.
        raise judge.outage
    summary = result.to_dict()
    with transaction.atomic():
        report = ValidationReport.objects.create(
            environment=environment,
            job=job,
            revision=revision,
            spec_hash=engine_spec.canonical_hash(document),
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
        current = Environment.objects.filter(pk=environment.pk, revision=revision).first()
        if result.valid and current is not None:
            # What a valid revision asks of the apps above (re-grading, in the workspace's
            # composition), committed with the report: a redelivered job skips reported
            # environments, so the follow-up must not be left behind by a crash.
            import_string(settings.FOLLOW_UPS["environments.validated"])(environment=current)
    return report
