"""Reads of environments; each owns its joins so a page's query count stays flat."""

from dataclasses import dataclass

from django.db.models import Count, Exists, OuterRef, Prefetch, Q, QuerySet

from apps.environments.models import (
    Environment,
    EnvironmentSource,
    EnvironmentStatus,
    Grader,
    ServiceRecord,
    Split,
    Task,
    TaskCapability,
)

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
    filters = filters or EnvironmentFilters()
    environments = (
        Environment.objects.filter(project=project)
        .select_related("latest_validation", "created_by")
        .annotate(task_count=Count("tasks", distinct=True))
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
