"""Reads of environments; each owns its joins so a page's query count stays flat."""

from dataclasses import dataclass

from django.db.models import (
    Count,
    Exists,
    F,
    IntegerField,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
)
from django.db.models.functions import Coalesce

from apps.core.safeinput import is_id, parse_id
from apps.environments.models import (
    Environment,
    EnvironmentSource,
    EnvironmentStatus,
    Grader,
    ServiceRecord,
    Split,
    Task,
    TaskCapability,
    ToolSchema,
)
from apps.environments.specs import environment_spec
from coworkenv_engine.validation import validate_spec

SORTS = {
    "updated": "-updated_at",
    "name": "name",
    "status": "status",
    "tasks": "-task_count",
    "created": "-created_at",
}


@dataclass(frozen=True)
class EnvironmentFilters:
    q: str = ""
    status: str = ""
    domain: str = ""
    capability: str = ""
    split: str = ""
    source: str = ""
    sort: str = "updated"
    include_archived: bool = False

    @classmethod
    def from_query(cls, params) -> "EnvironmentFilters":
        def choice(name, allowed):
            value = params.get(name, "")
            return value if value in allowed else ""

        return cls(
            q=params.get("q", "").strip()[:200],
            status=choice("status", EnvironmentStatus.values),
            domain=params.get("domain", "").strip()[:100],
            capability=params.get("capability", "").strip()[:80],
            split=choice("split", Split.values),
            source=choice("source", EnvironmentSource.values),
            sort=params.get("sort") if params.get("sort") in SORTS else "updated",
        )


def environment_list(*, project, filters: EnvironmentFilters | None = None) -> QuerySet:
    return _environment_list(Environment.objects.filter(project=project), filters)


def environment_list_for_user(*, user, filters: EnvironmentFilters | None = None) -> QuerySet:
    """Like ``environment_list``, over every project the user is a member of."""
    return _environment_list(Environment.objects.filter(project__memberships__user=user), filters)


def _environment_list(environments: QuerySet, filters: EnvironmentFilters | None) -> QuerySet:
    filters = filters or EnvironmentFilters()
    # A correlated COUNT, not Count("tasks"): a join + GROUP BY would aggregate every
    # environment of the project before ORDER BY … LIMIT, and the paginator's COUNT would
    # repeat it; this way only the rows of the page are counted (bench/pages.py).
    task_counts = (
        Task.objects.filter(environment=OuterRef("pk"))
        .order_by()
        .values("environment")
        .annotate(n=Count("*"))
        .values("n")
    )
    environments = environments.select_related("latest_validation", "created_by").annotate(
        task_count=Coalesce(Subquery(task_counts, output_field=IntegerField()), 0)
    )
    if filters.status:
        environments = environments.filter(status=filters.status)
    elif not filters.include_archived:
        environments = environments.exclude(status=EnvironmentStatus.ARCHIVED)
    if filters.q:
        environments = environments.filter(
            Q(name__icontains=filters.q)
            | Q(description__icontains=filters.q)
            | Q(domain__icontains=filters.q)
        )
    if filters.domain:
        environments = environments.filter(domain=filters.domain)
    if filters.source:
        environments = environments.filter(source=filters.source)
    if filters.capability:
        environments = environments.filter(
            Exists(
                TaskCapability.objects.filter(
                    task__environment=OuterRef("pk"), capability__slug=filters.capability
                )
            )
        )
    if filters.split:
        environments = environments.filter(
            Exists(Task.objects.filter(environment=OuterRef("pk"), split=filters.split))
        )
    return environments.order_by(SORTS[filters.sort], "-id")


def environment_domains(*, project) -> list[str]:
    return list(
        Environment.objects.filter(project=project)
        .exclude(domain="")
        .values_list("domain", flat=True)
        .distinct()
        .order_by("domain")
    )


def environment_tasks(*, environment: Environment) -> QuerySet:
    return (
        environment.tasks.order_by("position", "id")
        .prefetch_related(
            Prefetch("graders", queryset=Grader.objects.order_by("position", "id")),
            Prefetch(
                "capability_links",
                queryset=TaskCapability.objects.select_related("capability").order_by("position"),
            ),
        )
        .annotate(task_record_count=Count("records"))
    )


def environment_collections(*, environment: Environment) -> list[dict]:
    """Each collection of the environment with its record count, in spec order."""
    counts = {
        (row["service"], row["collection"]): row["n"]
        for row in ServiceRecord.objects.filter(environment=environment, task__isnull=True)
        .values("service", "collection")
        .annotate(n=Count("id"))
    }
    return [
        {
            "service": service,
            "collection": collection,
            "count": counts.get((service, collection), 0),
        }
        for service, collections in environment.collections.items()
        for collection in collections
    ]


def collection_records(
    *, environment: Environment, service: str, collection: str, task: Task | None = None
) -> QuerySet:
    return ServiceRecord.objects.filter(
        environment=environment, service=service, collection=collection, task=task
    ).order_by("position", "id")


def project_environment_counts(*, project) -> dict[str, int]:
    """The dashboard's figures for environments and tasks."""
    active = Environment.objects.filter(project=project).exclude(status=EnvironmentStatus.ARCHIVED)
    return {
        "environments": active.count(),
        "valid_environments": active.filter(
            status__in=[EnvironmentStatus.VALID, EnvironmentStatus.APPROVED]
        ).count(),
        "tasks": Task.objects.filter(environment__in=active).count(),
    }


def environment_status_counts(*, project) -> dict[str, int]:
    """How many environments of the project have each status (every status present, 0s too)."""
    counts = dict.fromkeys(EnvironmentStatus.values, 0)
    counts.update(
        Environment.objects.filter(project=project)
        .order_by()
        .values_list("status")
        .annotate(n=Count("id"))
    )
    return counts


def environment_capability_choices(*, project) -> list[tuple[str, str]]:
    """(slug, name) of the project's capabilities in use or not archived, for the filter."""
    from apps.capabilities.models import Capability

    return list(
        Capability.objects.filter(project=project)
        .filter(Q(archived_at__isnull=True) | Q(task_links__isnull=False))
        .distinct()
        .order_by("name")
        .values_list("slug", "name")
    )


def environments_by_ids(*, project, ids) -> QuerySet:
    """The project's environments among ``ids`` (others' and unknown ids are dropped)."""
    clean = [parse_id(i) for i in ids if is_id(i)]
    return Environment.objects.filter(project=project, pk__in=clean).order_by("name", "id")


# --- parts of one environment, as the REST API lists them ----------------------------------


def environment_task_list(
    *, environment: Environment, split: str = "", capability: str = ""
) -> QuerySet:
    tasks = environment_tasks(environment=environment)
    if split:
        tasks = tasks.filter(split=split)
    if capability:
        tasks = tasks.filter(
            Exists(TaskCapability.objects.filter(task=OuterRef("pk"), capability__slug=capability))
        )
    return tasks


def environment_task_get(*, environment: Environment, pk) -> Task | None:
    """One task of this environment with its graders and capabilities, or None."""
    if not is_id(pk):
        return None
    return environment_tasks(environment=environment).filter(pk=pk).first()


def task_grader_list(*, task: Task, category: str = "") -> QuerySet:
    graders = Grader.objects.filter(task=task).order_by("position", "id")
    if category:
        graders = graders.filter(category=category)
    return graders


def environment_tool_list(*, environment: Environment) -> QuerySet:
    return ToolSchema.objects.filter(environment=environment).order_by("position", "id")


def environment_record_list(
    *,
    environment: Environment,
    service: str = "",
    collection: str = "",
    task_id: int | None = None,
    environment_level_only: bool = False,
) -> QuerySet:
    """Records of an environment; ``task_id`` keeps one task's own records,
    ``environment_level_only`` those shared by every task."""
    records = ServiceRecord.objects.filter(environment=environment).select_related("task")
    if service:
        records = records.filter(service=service)
    if collection:
        records = records.filter(collection=collection)
    if task_id is not None:
        records = records.filter(task_id=task_id)
    elif environment_level_only:
        records = records.filter(task__isnull=True)
    return records.order_by(
        "service", "collection", F("task_id").asc(nulls_first=True), "position", "id"
    )


def environment_static_problems(*, environment: Environment) -> list[dict]:
    """What the engine's static validation (no simulation) finds in the current spec."""
    result = validate_spec(environment_spec(environment), dynamic=False)
    return [problem.to_dict() for problem in result.problems]


# --- editing: the detail page's reads -------------------------------------------------------


def environment_part_counts(*, environment: Environment) -> dict[str, int]:
    """The overview's figures; a handful of indexed COUNTs whatever the environment's size."""
    return {
        "services": len(environment.collections),
        "collections": sum(len(c) for c in environment.collections.values()),
        "records": ServiceRecord.objects.filter(environment=environment).count(),
        "tools": ToolSchema.objects.filter(environment=environment).count(),
        "tasks": Task.objects.filter(environment=environment).count(),
        "graders": Grader.objects.filter(task__environment=environment).count(),
    }


def environment_task_records(*, environment: Environment) -> QuerySet:
    """Every task-level record of the environment, grouped by task, then collection."""
    return (
        ServiceRecord.objects.filter(environment=environment, task__isnull=False)
        .select_related("task")
        .order_by("task__position", "task_id", "service", "collection", "position", "id")
    )


def environment_validation_reports(*, environment: Environment) -> QuerySet:
    """The environment's reports, newest first, without their (large) problem lists."""
    return environment.validation_reports.defer("problems", "tasks").order_by("-created_at", "-id")


def environment_active_validation_job(*, environment: Environment):
    """The newest pending or running validation job that covers this environment, if any."""
    from apps.core.models import ACTIVE_JOB_STATUSES

    return _newest_validation_job(environment, ACTIVE_JOB_STATUSES)


def environment_failed_validation_job(*, environment: Environment):
    """The environment's newest validation job when it failed or was cancelled without a
    report: its page says so rather than pass the older report off as the answer."""
    from apps.core.models import JobStatus

    job = _newest_validation_job(environment, None)
    if job is None or job.status not in (JobStatus.FAILED, JobStatus.CANCELLED):
        return None
    report = environment.latest_validation
    if report is not None and (report.job_id == job.pk or report.created_at >= job.created_at):
        return None
    return job


def _newest_validation_job(environment: Environment, statuses):
    from apps.core.models import Job
    from apps.environments.services import VALIDATION_JOB_KIND

    jobs = Job.objects.filter(project_id=environment.project_id, kind=VALIDATION_JOB_KIND)
    if statuses is not None:
        jobs = jobs.filter(status__in=statuses)
    return next(
        (
            job
            for job in jobs.order_by("-created_at", "-id")[:50]
            if environment.pk in job.params.get("environment_ids", [])
        ),
        None,
    )
