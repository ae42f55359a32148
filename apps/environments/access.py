"""One access helper per entity: other projects' objects are 404, too-low roles 403."""

from django.http import Http404

from apps.accounts.access import check_project_role
from apps.accounts.models import Role
from apps.core.safeinput import is_id
from apps.environments.models import Environment, Grader, ServiceRecord, Task, ToolSchema


def _first_or_404(queryset, pk, what: str):
    obj = queryset.filter(pk=pk).first() if is_id(pk) else None
    if obj is None:
        raise Http404(f"No such {what}.")
    return obj


def environment_get_for_user(user, pk, min_role: str = Role.VIEWER) -> Environment:
    environment = _first_or_404(
        Environment.objects.select_related("project", "latest_validation", "created_by"),
        pk,
        "environment",
    )
    check_project_role(user, environment.project, min_role, missing="No such environment.")
    return environment


def task_get_for_user(user, pk, min_role: str = Role.VIEWER) -> Task:
    task = _first_or_404(Task.objects.select_related("environment__project"), pk, "task")
    check_project_role(user, task.environment.project, min_role, missing="No such task.")
    return task


def grader_get_for_user(user, pk, min_role: str = Role.VIEWER) -> Grader:
    grader = _first_or_404(
        Grader.objects.select_related("task__environment__project"), pk, "grader"
    )
    check_project_role(user, grader.task.environment.project, min_role, missing="No such grader.")
    return grader


def tool_get_for_user(user, pk, min_role: str = Role.VIEWER) -> ToolSchema:
    tool = _first_or_404(ToolSchema.objects.select_related("environment__project"), pk, "tool")
    check_project_role(user, tool.environment.project, min_role, missing="No such tool.")
    return tool


def record_get_for_user(user, pk, min_role: str = Role.VIEWER) -> ServiceRecord:
    record = _first_or_404(
        ServiceRecord.objects.select_related("environment__project", "task"), pk, "record"
    )
    check_project_role(user, record.environment.project, min_role, missing="No such record.")
    return record
