from django.http import Http404

from apps.accounts.access import check_project_role
from apps.accounts.models import Role
from apps.core.safeinput import is_id
from apps.llm.models import ModelEndpoint


def endpoint_get_for_user(user, pk, min_role: str = Role.VIEWER) -> ModelEndpoint:
    """The endpoint, if the user's role in its project is at least ``min_role``.

    Another project's endpoint is indistinguishable from a missing one (404).
    """
    endpoint = (
        ModelEndpoint.objects.select_related("project", "created_by").filter(pk=pk).first()
        if is_id(pk)
        else None
    )
    if endpoint is None:
        raise Http404("No such model endpoint.")
    check_project_role(user, endpoint.project, min_role, missing="No such model endpoint.")
    return endpoint


def error_bodies_visible(membership) -> bool:
    """Whether a member sees the bodies endpoints sent with their errors in the call log.

    What the server at a base URL answers is for those who may edit the endpoint (authors
    and above), not for every viewer of the project.
    """
    return membership is not None and membership.has_role(Role.AUTHOR)
