"""Re-grading on change: when an environment (its graders, tools, records, tasks) moves to a
new revision, its demonstrations' current versions are replayed and graded again in a job;
those whose pass/fail flipped are flagged (``regrade_flag``) and re-opened for review."""

from __future__ import annotations

import logging

from django.db import transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from apps.core.exceptions import ApplicationError
from apps.core.models import ACTIVE_JOB_STATUSES, Job
from apps.core.services import JobContext, job_create
from apps.curation.models import Demonstration, DemonstrationStatus, DemonstrationVersion
from apps.curation.services.grading import (
    NotGradable,
    flip_label,
    load_environment_spec,
    regrade_transcript,
)
from apps.llm.judge import judge_for_project

logger = logging.getLogger(__name__)

JOB_KIND = "curation.regrade"


def demonstration_regrade(*, demonstration: Demonstration, loaded=None, judge=None) -> str:
    """Grade the current version again on the environment as it is now. Returns the flip
    ("passed→failed", "failed→passed") or "". A flipped demonstration is flagged and, if it
    had been decided, re-opened for review in a new round. The transcript is not touched;
    the version's grading is replaced (the previous outcome is kept under ``previous``)."""
    version = demonstration.current_version
    if version is None:
        return ""
    graded = regrade_transcript(
        demonstration=demonstration, transcript=version.transcript, loaded=loaded, judge=judge
    )
    flip = flip_label(version.passed, graded.passed)
    grading = dict(graded.grading)
    grading["previous"] = {
        "score": version.score,
        "passed": version.passed,
        "strict": version.strict,
        "environment_revision": version.environment_revision,
    }
    with transaction.atomic():
        DemonstrationVersion.objects.filter(pk=version.pk).update(
            grading=grading,
            audit_log=graded.audit_log,
            exogenous_log=graded.exogenous_log,
            score=graded.score,
            passed=graded.passed,
            strict=graded.strict,
            environment_revision=graded.environment_revision,
            spec_hash=graded.spec_hash,
        )
        demo = Demonstration.objects.select_for_update().get(pk=demonstration.pk)
        fields = {"score": graded.score, "regraded_at": timezone.now()}
        if demo.task_id is None:
            # A whole-spec edit recreated the task rows: link the task of the same key again.
            from apps.environments.models import Task

            fields["task"] = Task.objects.filter(
                environment_id=demo.environment_id, key=demo.task_key
            ).first()
        if flip:
            fields["regrade_flag"] = flip
            if demo.status != DemonstrationStatus.PENDING or demo.disputed:
                fields.update(
                    status=DemonstrationStatus.PENDING,
                    review_round=demo.review_round + 1,
                    disputed=False,
                    decided_at=None,
                )
        Demonstration.objects.filter(pk=demo.pk).update(**fields)
    demonstration.refresh_from_db()
    version.refresh_from_db()
    return flip


def stale_demonstrations(*, environment):
    """The environment's demonstrations graded on another revision than its current one."""
    return Demonstration.objects.filter(
        environment=environment, current_version__isnull=False
    ).exclude(
        Q(current_version__environment_revision=environment.revision)
        & Q(current_version__spec_hash=environment.spec_hash)
    )


def regrade_job_start(*, project, environment=None, user=None, only_stale: bool = True) -> Job:
    """A job that re-grades the project's demonstrations (one environment's when given; only
    those graded on an older revision unless ``only_stale`` is False)."""
    from apps.curation.tasks import regrade_demonstrations_task

    if environment is not None and environment.project_id != project.pk:
        raise ApplicationError("That environment belongs to another project.")
    active = Job.objects.filter(project=project, kind=JOB_KIND, status__in=ACTIVE_JOB_STATUSES)
    environment_id = environment.pk if environment is not None else None
    for job in active:
        if job.params.get("environment") == environment_id:
            return job
    scope = f"“{environment.name}”" if environment is not None else "the project"
    total = _targets(project, environment_id, only_stale).count()
    return job_create(
        project=project,
        kind=JOB_KIND,
        title=f"Re-grade demonstrations of {scope}"[:200],
        started_by=user,
        params={"environment": environment_id, "only_stale": only_stale},
        total=total,
        task=regrade_demonstrations_task,
    )


def regrade_start_if_stale(*, environment) -> Job | None:
    """After a new revision was validated (the workspace calls it then): start a
    re-grade job if any demonstration was graded on an older revision."""
    if not stale_demonstrations(environment=environment).exists():
        return None
    return regrade_job_start(project=environment.project, environment=environment)


def _targets(project, environment_id, only_stale):
    qs = Demonstration.objects.filter(
        project=project, current_version__isnull=False, environment__isnull=False
    )
    if environment_id is not None:
        qs = qs.filter(environment_id=environment_id)
    if only_stale:
        from apps.environments.models import Environment

        stale = Q()
        for env in Environment.objects.filter(pk__in=qs.values("environment_id")).only(
            "pk", "revision", "spec_hash"
        ):
            stale |= Q(environment_id=env.pk) & ~(
                Q(current_version__environment_revision=env.revision)
                & Q(current_version__spec_hash=env.spec_hash)
            )
        qs = qs.filter(stale) if stale else qs.none()
    return qs


def regrade_demonstrations(ctx: JobContext) -> str:
    """The job's work: re-grade each target (stale ones only, by default, so a redelivered
    job resumes where it stopped), loading each environment's spec once."""
    job = ctx.job
    params = job.params or {}
    targets = list(
        _targets(job.project, params.get("environment"), params.get("only_stale", True))
        .select_related("current_version", "task", "environment", "run")
        .order_by("environment_id", "id")
    )
    already = job.result.get("flipped", []) if isinstance(job.result, dict) else []
    flipped: list[int] = list(already)
    failed: list[dict] = []
    ctx.progress(0, len(targets), f"Re-grading {len(targets)} demonstrations.")
    loaded: dict[int, tuple] = {}
    # The project's judge scores judge graders; unchanged evidence is answered by its cache.
    judge = judge_for_project(project=job.project, job=job)
    for done, demo in enumerate(targets, start=1):
        try:
            if demo.environment_id not in loaded:
                loaded[demo.environment_id] = load_environment_spec(demo.environment)
            if demonstration_regrade(
                demonstration=demo, loaded=loaded[demo.environment_id], judge=judge
            ):
                flipped.append(demo.pk)
                Job.objects.filter(pk=job.pk).update(result={"flipped": flipped, "failed": failed})
        except NotGradable as exc:
            failed.append({"demonstration": demo.pk, "error": str(exc)})
        ctx.progress(done, len(targets))
    url = reverse("curation:list", args=[job.project.slug]) + "?flag=flipped"
    Job.objects.filter(pk=job.pk).update(
        result={
            "flipped": flipped,
            "failed": failed,
            "links": [{"label": "Demonstrations whose outcome flipped", "url": url}],
        }
    )
    parts = [f"Re-graded {len(targets) - len(failed)} demonstrations; {len(flipped)} flipped"]
    if failed:
        parts.append(f"{len(failed)} could not be replayed")
    return "; ".join(parts) + "."
