import hashlib
import secrets

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from apps.accounts.models import ApiToken, Membership, Project, Role
from apps.core.exceptions import ApplicationError

TOKEN_PREFIX = "cwe"


@transaction.atomic
def project_create(*, name: str, creator, description: str = "", slug: str = "") -> Project:
    """A new project with its creator as admin. What a new project is given besides (the
    capability catalogue) is added by ``apps.workspace.services.project_start``."""
    slug = slug or slugify(name)[:60]
    if not slug:
        raise ApplicationError("A project needs a name with at least one letter or digit.")
    if Project.objects.filter(slug=slug).exists():
        raise ApplicationError(f"The address “{slug}” is taken; choose another name or slug.")
    project = Project(name=name, slug=slug, description=description)
    project.full_clean()
    project.save()
    Membership.objects.create(project=project, user=creator, role=Role.ADMIN)
    return project


@transaction.atomic
def project_update(*, project: Project, name: str, description: str) -> Project:
    project.name = name
    project.description = description
    project.full_clean()
    project.save(update_fields=["name", "description"])
    return project


@transaction.atomic
def membership_add(*, project: Project, username: str, role: str) -> Membership:
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise ApplicationError(f"There is no user called “{username}”.")
    if Membership.objects.filter(project=project, user=user).exists():
        raise ApplicationError(f"{username} is already a member of {project.name}.")
    membership = Membership(project=project, user=user, role=role)
    membership.full_clean()
    membership.save()
    return membership


@transaction.atomic
def membership_change_role(*, membership: Membership, role: str) -> Membership:
    membership = _locked(membership)
    if membership.role == Role.ADMIN and role != Role.ADMIN:
        _ensure_another_admin(membership)
    membership.role = role
    membership.full_clean()
    membership.save(update_fields=["role"])
    return membership


@transaction.atomic
def membership_remove(*, membership: Membership) -> None:
    membership = _locked(membership)
    if membership.role == Role.ADMIN:
        _ensure_another_admin(membership)
    membership.delete()


def _locked(membership: Membership) -> Membership:
    """The membership, re-read under its project's row lock: every change of a project's
    memberships takes the project first, so two admins demoting each other wait in turn
    instead of each holding one row and waiting for the other's (a deadlock)."""
    Project.objects.select_for_update().filter(pk=membership.project_id).first()
    return Membership.objects.select_for_update().get(pk=membership.pk)


def _ensure_another_admin(membership: Membership) -> None:
    admins = Membership.objects.filter(project_id=membership.project_id, role=Role.ADMIN)
    if not admins.exclude(pk=membership.pk).exists():
        raise ApplicationError("A project needs at least one admin; make someone else admin first.")


def _hash_key(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@transaction.atomic
def api_token_create(*, user, name: str) -> tuple[ApiToken, str]:
    """Create a token and return it with its secret, which is never stored and never shown again."""
    name = name.strip()
    if not name:
        raise ApplicationError("Give the token a name, such as the machine that will use it.")
    prefix = secrets.token_hex(4)
    secret = secrets.token_urlsafe(32)
    raw = f"{TOKEN_PREFIX}_{prefix}_{secret}"
    token = ApiToken(user=user, name=name, prefix=prefix, key_hash=_hash_key(raw))
    token.full_clean()
    token.save()
    return token, raw


def api_token_revoke(*, token: ApiToken) -> ApiToken:
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
    return token


def api_token_authenticate(raw: str) -> ApiToken | None:
    """Return the active token matching ``raw``, or None for anything else."""
    parts = raw.split("_", 2)
    if len(parts) != 3 or parts[0] != TOKEN_PREFIX:
        return None
    token = (
        ApiToken.objects.select_related("user")
        .filter(prefix=parts[1], revoked_at__isnull=True)
        .first()
    )
    if token is None or not secrets.compare_digest(token.key_hash, _hash_key(raw)):
        return None
    if not token.user.is_active:
        return None
    now = timezone.now()
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token
