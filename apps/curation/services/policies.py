"""Approval by an explicit rule instead of the human queue (an experiment's review policy).

The rule is recorded on each demonstration it approves (``approved_by_policy``), and no
Review is written: a review is a person's decision, and a rule never pretends to be one.
Only pending, undisputed train-task demonstrations that no one has reviewed in the current
round are touched, so human review beside it works as before (reopening one clears the
rule's mark)."""

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from apps.core.exceptions import ApplicationError
from apps.curation.models import Demonstration, DemonstrationStatus

# policy -> the current version's grading field that must be true
APPROVAL_POLICIES = {"approve-strict-passes": "strict", "approve-passes": "passed"}


def policy_label(policy: str) -> str:
    return f"policy:{policy}"


def demonstrations_approve_by_policy(*, project, policy: str, batch=None) -> int:
    """Approve the pending demonstrations of ``project`` (of ``batch``'s runs if given) whose
    current version meets ``policy``; returns how many."""
    if policy not in APPROVAL_POLICIES:
        raise ApplicationError(
            f"Unknown approval policy “{policy}”; use one of {', '.join(APPROVAL_POLICIES)}."
        )
    candidates = Demonstration.objects.filter(
        project=project,
        status=DemonstrationStatus.PENDING,
        disputed=False,
        split="train",
        **{f"current_version__{APPROVAL_POLICIES[policy]}": True},
    ).exclude(reviews__round=F("review_round"))
    if batch is not None:
        candidates = candidates.filter(run__batch=batch)
    with transaction.atomic():
        return Demonstration.objects.filter(
            pk__in=list(candidates.values_list("pk", flat=True)),
            status=DemonstrationStatus.PENDING,
        ).update(
            status=DemonstrationStatus.APPROVED,
            decided_at=timezone.now(),
            approved_by_policy=policy_label(policy),
            claimed_by=None,
            claim_expires_at=None,
        )
