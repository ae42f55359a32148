"""Decisions: a reviewer's approve / reject / needs-changes, and an admin's adjudication.

With ``reviews_required`` = N, the round closes when N reviewers have decided; they do not
see each other's decisions until then. A unanimous round sets the status; a split one is
``disputed`` and waits for an admin (``demonstration_adjudicate``).
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from apps.accounts.access import check_project_role
from apps.accounts.models import Role
from apps.core.exceptions import ApplicationError
from apps.curation.models import (
    Decision,
    Demonstration,
    DemonstrationStatus,
    Review,
    ReviewReasonTag,
)
from apps.curation.selectors import pairwise_agreement

MAX_COMMENT = 5000


def _clean_reasons(project, reason_tags, decision: str, comment: str) -> list[str]:
    tags = [" ".join(str(t).split()) for t in (reason_tags or []) if str(t).strip()]
    tags = list(dict.fromkeys(tags))
    if tags:
        known = set(
            ReviewReasonTag.objects.filter(
                project=project, archived_at__isnull=True, name__in=tags
            ).values_list("name", flat=True)
        )
        unknown = [t for t in tags if t not in known]
        if unknown:
            raise ApplicationError(
                f"Unknown reason tag “{unknown[0]}”: choose one of the project's tags.",
                {"reason_tags": unknown},
            )
    if decision != Decision.APPROVED and not tags and not comment:
        raise ApplicationError(
            "Give a reason tag or a comment when rejecting or asking for changes: the "
            "author of the next correction needs to know what is wrong."
        )
    if len(comment) > MAX_COMMENT:
        raise ApplicationError(f"The comment is at most {MAX_COMMENT} characters.")
    return tags


def _refuse_eval_approval(demo: Demonstration, decision: str) -> None:
    """An eval-task demonstration (made before the rule, or whose task moved to eval since)
    cannot be approved: no dataset would ever contain it. Rejecting it is allowed."""
    if decision != Decision.APPROVED:
        return
    task_split = demo.task.split if demo.task_id and demo.task else None
    if demo.split == "eval" or task_split == "eval":
        raise ApplicationError(
            "This demonstration is of an eval task: eval tasks never enter a dataset, so it "
            "cannot be approved. Reject it, or move the task to the train split first."
        )


def demonstration_review(
    *,
    demonstration: Demonstration,
    user,
    decision: str,
    reason_tags: list[str] | None = None,
    comment: str = "",
) -> Review:
    """Record ``user``'s decision on the demonstration's current version and close the
    round when it is complete. Releases ``user``'s claim."""
    if decision not in Decision.values:
        raise ApplicationError(f"Unknown decision “{decision}”.")
    comment = (comment or "").strip()
    with transaction.atomic():
        demo = Demonstration.objects.select_for_update().get(pk=demonstration.pk)
        if demo.status != DemonstrationStatus.PENDING:
            raise ApplicationError(
                f"This demonstration was already decided ({demo.get_status_display().lower()})."
            )
        if demo.disputed:
            raise ApplicationError(
                "This demonstration's reviewers disagree; an admin adjudicates it."
            )
        _refuse_eval_approval(demo, decision)
        now = timezone.now()
        if (
            demo.claimed_by_id not in (None, user.pk)
            and demo.claim_expires_at
            and demo.claim_expires_at >= now
        ):
            raise ApplicationError("Another reviewer holds this demonstration right now.")
        if Review.objects.filter(
            demonstration=demo, round=demo.review_round, reviewer=user, adjudication=False
        ).exists():
            raise ApplicationError("You already decided this demonstration in this round.")
        tags = _clean_reasons(demo.project, reason_tags, decision, comment)
        review = Review(
            demonstration=demo,
            version_id=demo.current_version_id,
            round=demo.review_round,
            reviewer=user,
            reviewer_name=user.get_username(),
            decision=decision,
            reason_tags=tags,
            comment=comment,
        )
        review.full_clean()
        review.save()
        decisions = list(
            Review.objects.filter(
                demonstration=demo, round=demo.review_round, adjudication=False
            ).values_list("decision", flat=True)
        )
        fields = {"claimed_by": None, "claim_expires_at": None}
        if len(decisions) >= demo.reviews_required:
            if len(decisions) >= 2:
                fields["agreement"] = pairwise_agreement(decisions)
            if len(set(decisions)) == 1:
                fields.update(status=decision, decided_at=now, regrade_flag="")
            else:
                fields["disputed"] = True
        Demonstration.objects.filter(pk=demo.pk).update(**fields)
    demonstration.refresh_from_db()
    return review


def demonstration_adjudicate(
    *,
    demonstration: Demonstration,
    user,
    decision: str,
    reason_tags: list[str] | None = None,
    comment: str = "",
) -> Review:
    """An admin's final decision on a disputed round (the reviewers disagreed)."""
    check_project_role(user, demonstration.project, Role.ADMIN)
    if decision not in Decision.values:
        raise ApplicationError(f"Unknown decision “{decision}”.")
    comment = (comment or "").strip()
    with transaction.atomic():
        demo = Demonstration.objects.select_for_update().get(pk=demonstration.pk)
        if not demo.disputed or demo.status != DemonstrationStatus.PENDING:
            raise ApplicationError("Only a demonstration whose reviewers disagree is adjudicated.")
        _refuse_eval_approval(demo, decision)
        tags = _clean_reasons(demo.project, reason_tags, decision, comment)
        review = Review(
            demonstration=demo,
            version_id=demo.current_version_id,
            round=demo.review_round,
            reviewer=user,
            reviewer_name=user.get_username(),
            decision=decision,
            reason_tags=tags,
            comment=comment,
            adjudication=True,
        )
        review.full_clean()
        review.save()
        Demonstration.objects.filter(pk=demo.pk).update(
            status=decision,
            disputed=False,
            decided_at=timezone.now(),
            regrade_flag="",
            claimed_by=None,
            claim_expires_at=None,
        )
    demonstration.refresh_from_db()
    return review


def demonstration_reopen(*, demonstration: Demonstration) -> Demonstration:
    """Put a decided demonstration back in the queue, in a fresh round (its earlier reviews
    stay in the history)."""
    with transaction.atomic():
        demo = Demonstration.objects.select_for_update().get(pk=demonstration.pk)
        if demo.status == DemonstrationStatus.PENDING and not demo.disputed:
            raise ApplicationError("This demonstration is already waiting for review.")
        _reopen(demo)
    demonstration.refresh_from_db()
    return demonstration


def _reopen(demo: Demonstration) -> None:
    """A new round: pending, no dispute, nobody has decided it yet (locked row)."""
    Demonstration.objects.filter(pk=demo.pk).update(
        status=DemonstrationStatus.PENDING,
        review_round=demo.review_round + 1,
        disputed=False,
        decided_at=None,
        approved_by_policy="",
    )
