"""Writes to the capability catalogue of a project."""

import json
from functools import cache
from pathlib import Path

from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from apps.capabilities.models import Capability
from apps.core.exceptions import ApplicationError
from apps.core.text import count_of

CATALOGUE_PATH = Path(__file__).with_name("catalogue.json")
EDITABLE_FIELDS = ("slug", "name", "group", "description", "guidance", "examples")


@cache
def capability_catalogue() -> dict:
    """The standard catalogue shipped with the code (``catalogue.json``), read once."""
    with CATALOGUE_PATH.open(encoding="utf-8") as fh:
        return json.load(fh)


@transaction.atomic
def capability_catalogue_seed(*, project, user=None) -> int:
    """Add the standard capabilities the project lacks; return how many were added.

    Idempotent: a slug the project already has (edited, archived or auto-created by an
    import) is left exactly as it is.
    """
    existing = set(Capability.objects.filter(project=project).values_list("slug", flat=True))
    missing = []
    for entry in capability_catalogue()["capabilities"]:
        if entry["slug"] in existing:
            continue
        capability = Capability(
            project=project,
            slug=entry["slug"],
            name=entry["name"],
            group=entry["group"],
            description=entry["description"],
            guidance=entry["guidance"],
            examples=list(entry["examples"]),
            created_by=user,
        )
        capability.full_clean(validate_unique=False, validate_constraints=False)
        missing.append(capability)
    # A concurrent seed of the same project may have added some meanwhile: skip those.
    Capability.objects.bulk_create(missing, ignore_conflicts=True)
    return len(missing)


def _clean_examples(examples) -> list[str]:
    return [line.strip() for line in examples if line and line.strip()]


def _slug_taken_message(project, slug: str, exclude_pk=None) -> str | None:
    clash = Capability.objects.filter(project=project, slug=slug).exclude(pk=exclude_pk).first()
    if clash is None:
        return None
    if clash.is_archived:
        return (
            f"The slug “{slug}” belongs to the archived capability “{clash.name}”; "
            "restore that one or choose another slug."
        )
    return f"The slug “{slug}” is already used by “{clash.name}” in this project."


@transaction.atomic
def capability_create(
    *,
    project,
    user,
    name: str,
    slug: str = "",
    group: str = "",
    description: str = "",
    guidance: str = "",
    examples: list[str] | None = None,
) -> Capability:
    slug = slug or slugify(name)[:80]
    if not slug:
        raise ApplicationError("A capability needs a name with at least one letter or digit.")
    message = _slug_taken_message(project, slug)
    if message:
        raise ApplicationError(message, {"slug": [message]})
    capability = Capability(
        project=project,
        slug=slug,
        name=name.strip(),
        group=group.strip(),
        description=description,
        guidance=guidance,
        examples=_clean_examples(examples or []),
        created_by=user,
    )
    capability.full_clean()
    capability.save()
    return capability


@transaction.atomic
def capability_update(*, capability: Capability, **changes) -> Capability:
    """Change any of ``EDITABLE_FIELDS``.

    A slug is part of every spec that tags a task with it, so it can change only while no
    task uses the capability.
    """
    unknown = set(changes) - set(EDITABLE_FIELDS)
    if unknown:
        raise TypeError(f"Not editable: {', '.join(sorted(unknown))}")
    capability = Capability.objects.select_for_update().get(pk=capability.pk)
    slug = changes.get("slug")
    if slug is not None and slug != capability.slug:
        used = capability.task_links.count()
        if used:
            message = (
                f"The slug cannot change while {count_of(used, 'task')} "
                f"{'uses' if used == 1 else 'use'} this capability: it "
                "is part of their specs. Create a new capability and retag the tasks instead."
            )
            raise ApplicationError(message, {"slug": [message]})
        message = _slug_taken_message(capability.project, slug, exclude_pk=capability.pk)
        if message:
            raise ApplicationError(message, {"slug": [message]})
    for field, value in changes.items():
        if field == "examples":
            value = _clean_examples(value)
        elif field in ("name", "group"):
            value = value.strip()
        setattr(capability, field, value)
    capability.full_clean()
    capability.save()
    return capability


@transaction.atomic
def capability_archive(*, capability: Capability) -> Capability:
    """Hide a capability from pickers and lists; the tasks that use it keep their links."""
    capability = Capability.objects.select_for_update().get(pk=capability.pk)
    if capability.archived_at is None:
        capability.archived_at = timezone.now()
        capability.save(update_fields=["archived_at", "updated_at"])
    return capability


@transaction.atomic
def capability_restore(*, capability: Capability) -> Capability:
    capability = Capability.objects.select_for_update().get(pk=capability.pk)
    if capability.archived_at is not None:
        capability.archived_at = None
        capability.save(update_fields=["archived_at", "updated_at"])
    return capability


@transaction.atomic
def capability_delete(*, capability: Capability) -> None:
    """Delete an unused capability; one that tags tasks must be archived instead."""
    capability = Capability.objects.select_for_update().get(pk=capability.pk)
    used = capability.task_links.count()
    if used:
        raise ApplicationError(
            f"“{capability.name}” is used by {count_of(used, 'task')}; deleting it would "
            "change their specs. Archive it instead: it disappears from lists and pickers and "
            "the tasks keep their links.",
            {"tasks": used},
        )
    capability.delete()
