"""One access helper: another project's server is a 404, a too-low role a 403."""

from django.http import Http404

from apps.accounts.access import check_project_role
from apps.accounts.models import Role
from apps.core.safeinput import is_id
from apps.serving.models import ModelServer


def model_server_get_for_user(user, pk, min_role: str = Role.VIEWER) -> ModelServer:
    found = (
        ModelServer.objects.select_related("project", "job", "endpoint", "trained_model")
        .filter(pk=pk)
        .first()
        if is_id(pk)
        else None
    )
    if found is None:
        raise Http404("No such model server.")
    check_project_role(user, found.project, min_role, missing="No such model server.")
    return found
