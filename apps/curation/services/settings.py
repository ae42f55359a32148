"""Per-project curation settings and the reviewers' reason tags."""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.core.exceptions import ApplicationError
from apps.curation.models import CurationSettings, ReviewReasonTag

DEFAULT_REASON_TAGS = (
    ("wrong tool", "Called a tool that does not fit the step, or the wrong record."),
    ("hallucinated fact", "States something the tools never returned."),
    ("policy violation", "Breaks a task constraint or the workplace's rules."),
    ("unnatural reply", "Stilted, verbose or unhelpful wording for a coworker."),
    ("missed clarification", "Acted on an ambiguous request instead of asking."),
    ("incomplete", "Stops before the request is fully handled."),
)


def curation_settings_get(*, project) -> CurationSettings:
    """The project's settings, created with defaults (and the default reason tags) on first
    use."""
    found = CurationSettings.objects.filter(project=project).first()
    if found is not None:
        return found
    try:
        with transaction.atomic():
            created = CurationSettings.objects.create(project=project)
    except IntegrityError:  # created concurrently
        return CurationSettings.objects.get(project=project)
    reason_tags_seed(project=project)
    return created


@transaction.atomic
def curation_settings_update(
    *, project, pass_threshold: float, strict_only: bool, reviews_required: int
) -> CurationSettings:
    """Change the rules. Demonstrations already created keep their ``reviews_required``;
    new ones take the new value."""
    settings = curation_settings_get(project=project)
    settings.pass_threshold = pass_threshold
    settings.strict_only = strict_only
    settings.reviews_required = reviews_required
    settings.full_clean()
    settings.save()
    return settings


def reason_tags_seed(*, project) -> int:
    """Give a project the default reason tags it does not have yet. Returns how many were
    added."""
    existing = set(ReviewReasonTag.objects.filter(project=project).values_list("name", flat=True))
    rows = [
        ReviewReasonTag(project=project, name=name, description=description, position=i)
        for i, (name, description) in enumerate(DEFAULT_REASON_TAGS)
        if name not in existing
    ]
    ReviewReasonTag.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)


def _clean_name(name: str) -> str:
    name = " ".join((name or "").split())
    if not name:
        raise ApplicationError("A reason tag needs a name.")
    if len(name) > 60:
        raise ApplicationError("A reason tag's name is at most 60 characters.")
    return name


@transaction.atomic
def reason_tag_create(*, project, name: str, description: str = "") -> ReviewReasonTag:
    name = _clean_name(name)
    if ReviewReasonTag.objects.filter(project=project, name__iexact=name).exists():
        raise ApplicationError(f"There is already a reason tag “{name}”.")
    last = ReviewReasonTag.objects.filter(project=project).order_by("-position").first()
    tag = ReviewReasonTag(
        project=project,
        name=name,
        description=description.strip(),
        position=(last.position + 1) if last else 0,
    )
    tag.full_clean()
    tag.save()
    return tag


@transaction.atomic
def reason_tag_update(*, tag: ReviewReasonTag, name: str, description: str = "") -> ReviewReasonTag:
    """Rename or re-describe a tag. Past reviews keep the name they were given."""
    name = _clean_name(name)
    clash = ReviewReasonTag.objects.filter(project=tag.project_id, name__iexact=name).exclude(
        pk=tag.pk
    )
    if clash.exists():
        raise ApplicationError(f"There is already a reason tag “{name}”.")
    tag.name = name
    tag.description = description.strip()
    tag.full_clean()
    tag.save()
    return tag


def reason_tag_archive(*, tag: ReviewReasonTag) -> ReviewReasonTag:
    """Hide a tag from reviewers (past reviews keep it); archiving twice is harmless."""
    if tag.archived_at is None:
        tag.archived_at = timezone.now()
        tag.save(update_fields=["archived_at"])
    return tag


def reason_tag_restore(*, tag: ReviewReasonTag) -> ReviewReasonTag:
    if tag.archived_at is not None:
        tag.archived_at = None
        tag.save(update_fields=["archived_at"])
    return tag
