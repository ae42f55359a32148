from django.conf import settings
from django.core.validators import MaxLengthValidator
from django.db import models
from django.db.models import Q


class Role(models.TextChoices):
    VIEWER = "viewer", "Viewer"
    AUTHOR = "author", "Author"
    REVIEWER = "reviewer", "Reviewer"
    ADMIN = "admin", "Admin"


ROLE_RANK = {Role.VIEWER: 0, Role.AUTHOR: 1, Role.REVIEWER: 2, Role.ADMIN: 3}


def role_at_least(role: str, minimum: str) -> bool:
    return ROLE_RANK[Role(role)] >= ROLE_RANK[Role(minimum)]


# Free text is bounded (model, forms and serializers): a description is a paragraph, not a file.
PROJECT_DESCRIPTION_MAX_LENGTH = 2000


class Project(models.Model):
    name = models.CharField(max_length=120)
    slug = models.SlugField(max_length=60, unique=True)
    description = models.TextField(
        blank=True,
        max_length=PROJECT_DESCRIPTION_MAX_LENGTH,
        validators=[MaxLengthValidator(PROJECT_DESCRIPTION_MAX_LENGTH)],
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "id"]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project_id", "user__username"]
        constraints = [
            models.UniqueConstraint(fields=["project", "user"], name="membership_unique_user"),
            models.CheckConstraint(
                condition=Q(role__in=[choice.value for choice in Role]),
                name="membership_role_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.project} ({self.role})"

    def has_role(self, minimum: str) -> bool:
        return role_at_least(self.role, minimum)


class ApiToken(models.Model):
    """A personal API token. Only a SHA-256 hash of the secret is stored; the secret is shown
    once, when the token is created."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=12, unique=True)
    key_hash = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None
