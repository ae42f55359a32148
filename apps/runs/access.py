"""One access helper per entity: other projects' batches and runs are 404, too-low roles 403."""

from django.http import Http404

from apps.accounts.access import check_project_role
from apps.accounts.models import Role
from apps.core.safeinput import is_id
from apps.runs.models import Run, RunBatch


def batch_get_for_user(user, pk, min_role: str = Role.VIEWER) -> RunBatch:
    batch = (
        RunBatch.objects.select_related(
            "project", "job", "endpoint", "simulator_endpoint", "judge_endpoint", "created_by"
        )
        .filter(pk=pk)
        .first()
        if is_id(pk)
        else None
    )
    if batch is None:
        raise Http404("No such run batch.")
    check_project_role(user, batch.project, min_role, missing="No such run batch.")
    return batch


def run_get_for_user(user, pk, min_role: str = Role.VIEWER) -> Run:
    run = (
        Run.objects.select_related("batch__job", "project", "task", "environment")
        .filter(pk=pk)
        .first()
        if is_id(pk)
        else None
    )
    if run is None:
        raise Http404("No such run.")
    check_project_role(user, run.project, min_role, missing="No such run.")
    return run
