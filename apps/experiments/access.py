"""One access helper for experiments: another project's experiment is the same 404 as a
missing one; too low a role is 403."""

from django.http import Http404

from apps.accounts.access import check_project_role
from apps.accounts.models import Role
from apps.core.safeinput import is_id
from apps.experiments.models import Experiment

MISSING = "No such experiment."


def experiment_get_for_user(user, pk, min_role: str = Role.VIEWER) -> Experiment:
    found = (
        Experiment.objects.select_related("project", "created_by", "previous").filter(pk=pk).first()
        if is_id(pk)
        else None
    )
    if found is None:
        raise Http404(MISSING)
    check_project_role(user, found.project, min_role, missing=MISSING)
    return found
