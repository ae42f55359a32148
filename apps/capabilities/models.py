from django.conf import settings
from django.core.validators import MaxLengthValidator
from django.db import models

# Free text is bounded (model, forms and serializers): what a capability is, in a paragraph,
# and what a synthesized task must do to exercise it, in a few.
DESCRIPTION_MAX_LENGTH = 2000
GUIDANCE_MAX_LENGTH = 5000
EXAMPLE_MAX_LENGTH = 2000
EXAMPLES_MAX = 50


class Capability(models.Model):
    """A workflow requirement an agent must master; it guides synthesis and tags tasks."""

    project = models.ForeignKey(
        "accounts.Project", on_delete=models.CASCADE, related_name="capabilities"
    )
    slug = models.SlugField(max_length=80)
    name = models.CharField(max_length=120)
    description = models.TextField(
        blank=True,
        max_length=DESCRIPTION_MAX_LENGTH,
        validators=[MaxLengthValidator(DESCRIPTION_MAX_LENGTH)],
    )
    group = models.CharField(max_length=60, blank=True)
    guidance = models.TextField(
        blank=True,
        max_length=GUIDANCE_MAX_LENGTH,
        validators=[MaxLengthValidator(GUIDANCE_MAX_LENGTH)],
        help_text="What a synthesized task must do to exercise this capability.",
    )
    examples = models.JSONField(
        default=list, blank=True, help_text="Example user requests, one string each."
    )
    archived_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["group", "name", "id"]
        verbose_name_plural = "capabilities"
        constraints = [
            models.UniqueConstraint(fields=["project", "slug"], name="capability_unique_slug"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def is_archived(self) -> bool:
        return self.archived_at is not None
