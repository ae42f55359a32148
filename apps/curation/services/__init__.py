"""Writes for curation. Import from here: ``from apps.curation.services import …``."""

from apps.curation.services.demonstrations import (
    demonstration_from_run,
    demonstrations_from_batch,
    grading_from_run,
)
from apps.curation.services.settings import (
    DEFAULT_REASON_TAGS,
    curation_settings_get,
    curation_settings_update,
    reason_tag_archive,
    reason_tag_create,
    reason_tag_restore,
    reason_tag_update,
    reason_tags_seed,
)

__all__ = [
    "DEFAULT_REASON_TAGS",
    "curation_settings_get",
    "curation_settings_update",
    "demonstration_from_run",
    "demonstrations_from_batch",
    "grading_from_run",
    "reason_tag_archive",
    "reason_tag_create",
    "reason_tag_restore",
    "reason_tag_update",
    "reason_tags_seed",
]
