"""One access helper per entity: other projects' demonstrations are 404, too-low roles 403."""

from django.http import Http404

from apps.accounts.access import check_project_role
from apps.accounts.models import Role
from apps.core.safeinput import is_id
from apps.curation.models import Demonstration, ReviewReasonTag


def demonstration_get_for_user(user, pk, min_role: str = Role.VIEWER) -> Demonstration:
    demonstration = (
        Demonstration.objects.select_related(
            "project", "current_version", "task__environment", "environment", "run__batch"
        )
        .filter(pk=pk)
        .first()
        if is_id(pk)
        else None
    )
    if demonstration is None:
        raise Http404("No such demonstration.")
    check_project_role(user, demonstration.project, min_role, missing="No such demonstration.")
    return demonstration


def reason_tag_get_for_user(user, pk, min_role: str = Role.ADMIN) -> ReviewReasonTag:
    tag = (
        ReviewReasonTag.objects.select_related("project").filter(pk=pk).first()
        if is_id(pk)
        else None
    )
    if tag is None:
        raise Http404("No such reason tag.")
    check_project_role(user, tag.project, min_role, missing="No such reason tag.")
    return tag
