from django.http import Http404

from apps.accounts.access import check_project_role
from apps.accounts.models import Role
from apps.core.safeinput import is_id
from apps.synthesis.models import SynthesisJob, SynthesisSlot


def synthesis_get_for_user(user, pk, min_role: str = Role.VIEWER) -> SynthesisJob:
    """The synthesis job, if the user's role in its project is at least ``min_role``;
    another project's job is indistinguishable from a missing one (404)."""
    synthesis = (
        SynthesisJob.objects.select_related("project", "job", "endpoint", "created_by")
        .filter(pk=pk)
        .first()
        if is_id(pk)
        else None
    )
    if synthesis is None:
        raise Http404("No such synthesis job.")
    check_project_role(user, synthesis.project, min_role, missing="No such synthesis job.")
    return synthesis


def slot_get_for_user(user, pk, min_role: str = Role.VIEWER) -> SynthesisSlot:
    slot = (
        SynthesisSlot.objects.select_related(
            "synthesis__project", "synthesis__job", "environment", "duplicate_of"
        )
        .filter(pk=pk)
        .first()
        if is_id(pk)
        else None
    )
    if slot is None:
        raise Http404("No such synthesis slot.")
    check_project_role(user, slot.synthesis.project, min_role, missing="No such synthesis slot.")
    return slot
