"""Access helpers: the one way views and APIs resolve a project-scoped object.

Other projects' objects are indistinguishable from missing ones: the same 404 with the same
message ("No such capability."), so an outsider cannot learn that an id exists. A member
whose role is too low gets 403.
"""

from django.core.exceptions import PermissionDenied
from django.http import Http404

from apps.accounts.models import Membership, Project, Role
from apps.core.safeinput import is_id


def membership_for(user, project: Project) -> Membership | None:
    if not user.is_authenticated:
        return None
    cache = getattr(user, "_membership_cache", None)
    if cache is None:
        cache = user._membership_cache = {}
    if project.pk not in cache:
        cache[project.pk] = Membership.objects.filter(project=project, user=user).first()
    return cache[project.pk]


def check_project_role(
    user, project: Project, min_role: str = Role.VIEWER, *, missing: str = "No such project."
) -> Membership:
    """The user's membership of ``project`` with at least ``min_role``.

    A non-member gets 404 with ``missing``: an entity's helper passes its own "No such …"
    message, the one a missing id gets, so another project's object reads exactly the same.
    """
    membership = membership_for(user, project)
    if membership is None:
        raise Http404(missing)
    if not membership.has_role(min_role):
        raise PermissionDenied(f"This needs the {Role(min_role).label.lower()} role or higher.")
    return membership


def project_get_for_user(user, slug: str, min_role: str = Role.VIEWER) -> Project:
    project = Project.objects.filter(slug=slug).first()
    if project is None:
        raise Http404("No such project.")
    check_project_role(user, project, min_role)
    return project


def project_get_for_user_by_pk(user, pk, min_role: str = Role.VIEWER) -> Project:
    project = Project.objects.filter(pk=pk).first() if is_id(pk) else None
    if project is None:
        raise Http404("No such project.")
    check_project_role(user, project, min_role)
    return project


def membership_get_for_user(user, pk, min_role: str = Role.VIEWER) -> Membership:
    membership = (
        Membership.objects.select_related("project", "user").filter(pk=pk).first()
        if is_id(pk)
        else None
    )
    if membership is None:
        raise Http404("No such membership.")
    check_project_role(user, membership.project, min_role, missing="No such membership.")
    return membership
