"""Claiming: a reviewer holds one demonstration at a time, for ``CLAIM_MINUTES``.

A claim is taken with one conditional UPDATE (free, mine, or expired → mine), so two
reviewers racing for the same item cannot both win; a claim that expires (the reviewer left)
is free again. Deciding an item releases it.
"""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from apps.curation.models import CLAIM_MINUTES, Demonstration, DemonstrationStatus, Review


def claimable_q(user, now) -> Q:
    """Free, already mine, or held by a claim that has expired."""
    return Q(claimed_by__isnull=True) | Q(claimed_by=user) | Q(claim_expires_at__lt=now)


def reviewed_in_round(user):
    """An Exists() that is true when ``user`` already decided the row's current round."""
    return Exists(
        Review.objects.filter(
            demonstration=OuterRef("pk"),
            round=OuterRef("review_round"),
            reviewer=user,
            adjudication=False,
        )
    )


def reviewable(queryset, user, now=None):
    """Narrow ``queryset`` to the demonstrations ``user`` may take now: pending, not in
    dispute, not already decided by them this round, and not held by someone else."""
    now = now or timezone.now()
    return (
        queryset.filter(status=DemonstrationStatus.PENDING, disputed=False)
        .filter(claimable_q(user, now))
        .exclude(reviewed_in_round(user))
    )


def demonstration_claim(
    *, demonstration: Demonstration, user, minutes: int = CLAIM_MINUTES
) -> bool:
    """Take (or extend) the claim on one demonstration. True if ``user`` now holds it;
    False if another reviewer holds a live claim, it is no longer pending, or ``user``
    already decided it this round. Any other claim ``user`` held in the project is let go."""
    now = timezone.now()
    won = reviewable(Demonstration.objects.filter(pk=demonstration.pk), user, now).update(
        claimed_by=user, claim_expires_at=now + timedelta(minutes=minutes)
    )
    if won:
        Demonstration.objects.filter(project_id=demonstration.project_id, claimed_by=user).exclude(
            pk=demonstration.pk
        ).update(claimed_by=None, claim_expires_at=None)
        demonstration.claimed_by = user
        demonstration.claim_expires_at = now + timedelta(minutes=minutes)
    return bool(won)


def demonstration_release(*, demonstration: Demonstration, user) -> bool:
    """Let go of one's claim (a no-op if someone else holds it)."""
    released = Demonstration.objects.filter(pk=demonstration.pk, claimed_by=user).update(
        claimed_by=None, claim_expires_at=None
    )
    if released:
        demonstration.claimed_by = None
        demonstration.claim_expires_at = None
    return bool(released)


def demonstration_claim_next(
    *, queryset, user, after: int | None = None, backwards: bool = False
) -> Demonstration | None:
    """Claim the next reviewable demonstration of ``queryset`` (the filtered queue) after
    the one with id ``after`` (before it when ``backwards``), wrapping around; None when
    there is nothing left. Items another reviewer grabs in between are skipped."""
    candidates = reviewable(queryset, user)
    order = "-id" if backwards else "id"
    if after is not None:
        beyond = Q(pk__lt=after) if backwards else Q(pk__gt=after)
        ordered = list(candidates.filter(beyond).order_by(order).values_list("pk", flat=True)[:50])
        ordered += list(
            candidates.exclude(beyond)
            .exclude(pk=after)
            .order_by(order)
            .values_list("pk", flat=True)[:50]
        )
    else:
        ordered = list(candidates.order_by(order).values_list("pk", flat=True)[:100])
    for pk in ordered:
        demonstration = Demonstration.objects.get(pk=pk)
        if demonstration_claim(demonstration=demonstration, user=user):
            return demonstration
    return None


def claim_held(*, project, user) -> Demonstration | None:
    """The demonstration ``user`` holds a live claim on in ``project``, if any."""
    return (
        Demonstration.objects.filter(
            project=project,
            claimed_by=user,
            claim_expires_at__gte=timezone.now(),
            status=DemonstrationStatus.PENDING,
        )
        .order_by("-claim_expires_at")
        .first()
    )
