"""Writes for curation. Import from here: ``from apps.curation.services import …``."""

from apps.curation.services.claims import (
    claim_held,
    demonstration_claim,
    demonstration_claim_next,
    demonstration_release,
)
from apps.curation.services.corrections import apply_edits, demonstration_correct
from apps.curation.services.demonstrations import (
    demonstration_from_run,
    demonstrations_from_batch,
    grading_from_run,
)
from apps.curation.services.grading import NotGradable, regrade_transcript
from apps.curation.services.policies import (
    APPROVAL_POLICIES,
    demonstrations_approve_by_policy,
    policy_label,
)
from apps.curation.services.regrade import (
    demonstration_regrade,
    regrade_job_start,
    regrade_start_if_stale,
)
from apps.curation.services.reviews import (
    demonstration_adjudicate,
    demonstration_reopen,
    demonstration_review,
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
    "APPROVAL_POLICIES",
    "DEFAULT_REASON_TAGS",
    "NotGradable",
    "apply_edits",
    "claim_held",
    "curation_settings_get",
    "curation_settings_update",
    "demonstration_adjudicate",
    "demonstration_claim",
    "demonstration_claim_next",
    "demonstration_correct",
    "demonstration_from_run",
    "demonstration_regrade",
    "demonstration_release",
    "demonstration_reopen",
    "demonstration_review",
    "demonstrations_approve_by_policy",
    "demonstrations_from_batch",
    "grading_from_run",
    "policy_label",
    "reason_tag_archive",
    "reason_tag_create",
    "reason_tag_restore",
    "reason_tag_update",
    "reason_tags_seed",
    "regrade_job_start",
    "regrade_start_if_stale",
    "regrade_transcript",
]
