from django.http import Http404

from apps.accounts.access import check_project_role
from apps.accounts.models import Role
from apps.capabilities.models import Capability
from apps.core.safeinput import is_id


def capability_get_for_user(user, pk, min_role: str = Role.VIEWER) -> Capability:
    capability = (
        Capability.objects.select_related("project").filter(pk=pk).first() if is_id(pk) else None
    )
    if capability is None:
        raise Http404("No such capability.")
    check_project_role(user, capability.project, min_role, missing="No such capability.")
    return capability
