"""Reads of the capability catalogue and of the coverage it has in a project's tasks."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Count, Q, QuerySet

from apps.capabilities.models import Capability
from apps.environments import horizon
from apps.environments.models import (
    EnvironmentStatus,
    Split,
    Task,
    TaskCapability,
    ValidationReport,
)

VALID_STATUSES = (EnvironmentStatus.VALID, EnvironmentStatus.APPROVED)
# Tasks of archived environments are out of the working set: they count nowhere.
ACTIVE_STATUSES = tuple(s for s in EnvironmentStatus.values if s != EnvironmentStatus.ARCHIVED)


def _with_task_counts(capabilities: QuerySet) -> QuerySet:
    return capabilities.annotate(
        task_count=Count(
            "task_links",
            filter=Q(task_links__task__environment__status__in=ACTIVE_STATUSES),
            distinct=True,
        ),
        valid_task_count=Count(
            "task_links",
            filter=Q(task_links__task__environment__status__in=VALID_STATUSES),
            distinct=True,
        ),
    )


def capability_list(
    *,
    project=None,
    member=None,
    q: str = "",
    group: str = "",
    archived: bool = False,
) -> QuerySet:
    """A project's capabilities (or those of every project ``member`` belongs to) with their
    task counts.

    ``archived`` False lists the active ones, True only the archived ones.
    """
    capabilities = Capability.objects.all()
    if project is not None:
        capabilities = capabilities.filter(project=project)
    if member is not None:
        capabilities = capabilities.filter(project__memberships__user=member)
    capabilities = capabilities.filter(archived_at__isnull=not archived)
    if q:
        capabilities = capabilities.filter(
            Q(name__icontains=q)
            | Q(slug__icontains=q)
            | Q(description__icontains=q)
            | Q(group__icontains=q)
        )
    if group:
        capabilities = capabilities.filter(group=group)
    return _with_task_counts(capabilities.select_related("created_by")).order_by(
        "group", "name", "id"
    )


def capability_get_with_counts(*, pk) -> Capability:
    return _with_task_counts(Capability.objects.select_related("created_by")).get(pk=pk)


def capability_groups(*, project) -> list[str]:
    return list(
        Capability.objects.filter(project=project, archived_at__isnull=True)
        .exclude(group="")
        .values_list("group", flat=True)
        .distinct()
        .order_by("group")
    )


def capability_exists(*, project, archived: bool | None = None) -> bool:
    capabilities = Capability.objects.filter(project=project)
    if archived is not None:
        capabilities = capabilities.filter(archived_at__isnull=not archived)
    return capabilities.exists()


def capability_tasks(*, capability: Capability) -> QuerySet:
    """Every task tagged with the capability, archived environments included (last)."""
    return (
        Task.objects.filter(capability_links__capability=capability)
        .select_related("environment")
        .order_by("environment__name", "environment_id", "position", "id")
    )


# --- coverage ------------------------------------------------------------------------------


@dataclass
class CoverageRow:
    """One line of the coverage matrix; ``capability`` is None for untagged tasks."""

    capability: Capability | None
    tasks: int = 0
    valid: int = 0
    train: int = 0
    eval: int = 0
    measured: int = 0
    sensitivity_sum: float = 0.0
    environments: set = field(default_factory=set)

    @property
    def name(self) -> str:
        return self.capability.name if self.capability else "No capability"

    @property
    def sensitivity(self) -> float | None:
        """Mean grader sensitivity over the tasks whose latest validation measured one."""
        return self.sensitivity_sum / self.measured if self.measured else None

    @property
    def environment_count(self) -> int:
        return len(self.environments)

    @property
    def no_valid(self) -> bool:
        return self.valid == 0

    @property
    def no_eval(self) -> bool:
        return self.eval == 0

    @property
    def low_sensitivity(self) -> bool:
        return self.sensitivity is not None and self.sensitivity < 1.0

    @property
    def thin(self) -> bool:
        return self.no_valid or self.no_eval or self.low_sensitivity

    def add(self, task: dict, sensitivity: float | None) -> None:
        self.tasks += 1
        self.environments.add(task["environment_id"])
        if task["environment__status"] in VALID_STATUSES:
            self.valid += 1
        if task["split"] == Split.TRAIN:
            self.train += 1
        elif task["split"] == Split.EVAL:
            self.eval += 1
        if sensitivity is not None:
            self.measured += 1
            self.sensitivity_sum += sensitivity


COVERAGE_SORTS = {
    "name": lambda row: (row.name.lower(),),
    "tasks": lambda row: (row.tasks,),
    "valid": lambda row: (row.valid,),
    "sensitivity": lambda row: (row.sensitivity is not None, row.sensitivity or 0.0),
    "train": lambda row: (row.train,),
    "eval": lambda row: (row.eval,),
}


@dataclass
class HorizonDistribution:
    """How long the project's tasks are: tasks per bucket of turns, reference calls and
    calendar days spanned (``apps.environments.horizon``), with medians and maxima."""

    turns: list[dict] = field(default_factory=list)
    calls: list[dict] = field(default_factory=list)
    days: list[dict] = field(default_factory=list)
    median: dict = field(default_factory=dict)
    maximum: dict = field(default_factory=dict)
    tasks: int = 0

    @classmethod
    def of(cls, horizons: list[dict]) -> HorizonDistribution:
        out = cls(tasks=len(horizons))
        for name, buckets in (
            ("turns", horizon.TURN_BUCKETS),
            ("calls", horizon.CALL_BUCKETS),
            ("days", horizon.DAY_BUCKETS),
        ):
            values = sorted(h[name] for h in horizons)
            counts = dict.fromkeys([label for label, _ in buckets], 0)
            for value in values:
                label = horizon.bucket(value, buckets)
                counts[label] = counts.get(label, 0) + 1
            setattr(
                out,
                name,
                [
                    {"label": label, "count": n, "share": n / len(values) if values else 0.0}
                    for label, n in counts.items()
                ],
            )
            out.median[name] = values[(len(values) - 1) // 2] if values else None
            out.maximum[name] = values[-1] if values else None
        return out


@dataclass
class Coverage:
    rows: list[CoverageRow]
    untagged: CoverageRow
    total_tasks: int
    total_valid: int
    sort: str
    descending: bool
    horizon: HorizonDistribution = field(default_factory=HorizonDistribution)

    @property
    def thin_count(self) -> int:
        return sum(1 for row in self.rows if row.thin)


def _sensitivities(report_ids) -> dict[tuple[int, str], float]:
    """(report id, task key) -> sensitivity, from the reports' per-task results."""
    found = {}
    for report_id, tasks in ValidationReport.objects.filter(pk__in=report_ids).values_list(
        "pk", "tasks"
    ):
        for entry in tasks or []:
            if not isinstance(entry, dict):
                continue
            value = entry.get("sensitivity")
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                found[(report_id, entry.get("key"))] = float(value)
    return found


def capability_coverage(*, project, sort: str = "name") -> Coverage:
    """Capabilities by (tasks, valid tasks, mean grader sensitivity, train, eval).

    Four queries whatever the size: capabilities, tasks, their capability links, and the
    latest validation report of each environment. Tasks of archived environments are left
    out; archived capabilities appear only while active tasks still use them.
    """
    descending = sort.startswith("-")
    key = sort.lstrip("-")
    if key not in COVERAGE_SORTS:
        key, descending = "name", False

    tasks = list(
        Task.objects.filter(
            environment__project=project, environment__status__in=ACTIVE_STATUSES
        ).values(
            "pk",
            "key",
            "split",
            "environment_id",
            "environment__status",
            "environment__latest_validation_id",
            "environment__clock",
            "turns",
            "reference_solution",
        )
    )
    links = TaskCapability.objects.filter(
        task__environment__project=project, task__environment__status__in=ACTIVE_STATUSES
    ).values_list("task_id", "capability_id")
    capability_ids_by_task: dict[int, set[int]] = {}
    for task_id, capability_id in links:
        capability_ids_by_task.setdefault(task_id, set()).add(capability_id)
    used = {cid for ids in capability_ids_by_task.values() for cid in ids}
    capabilities = Capability.objects.filter(project=project).filter(
        Q(archived_at__isnull=True) | Q(pk__in=used)
    )
    rows = {c.pk: CoverageRow(capability=c) for c in capabilities}
    untagged = CoverageRow(capability=None)
    sensitivities = _sensitivities({t["environment__latest_validation_id"] for t in tasks} - {None})

    total_valid = 0
    for task in tasks:
        sensitivity = sensitivities.get((task["environment__latest_validation_id"], task["key"]))
        total_valid += task["environment__status"] in VALID_STATUSES
        capability_ids = capability_ids_by_task.get(task["pk"])
        if not capability_ids:
            untagged.add(task, sensitivity)
            continue
        for capability_id in capability_ids:
            if capability_id in rows:
                rows[capability_id].add(task, sensitivity)

    ordered = sorted(rows.values(), key=lambda row: (row.name.lower(), row.capability.pk))
    ordered.sort(key=COVERAGE_SORTS[key], reverse=descending)
    return Coverage(
        rows=ordered,
        untagged=untagged,
        total_tasks=len(tasks),
        total_valid=total_valid,
        sort=key,
        descending=descending,
        horizon=HorizonDistribution.of(
            [
                {
                    **horizon.task_horizon(t["turns"], t["environment__clock"]),
                    "calls": horizon.reference_calls(t["reference_solution"]),
                }
                for t in tasks
            ]
        ),
    )
