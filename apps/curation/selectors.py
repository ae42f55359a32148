"""Reads for curation: the queue, lists, and what the datasets app may export."""

from __future__ import annotations

from collections import Counter
from itertools import combinations

from django.db.models import QuerySet

from apps.curation.models import Demonstration, DemonstrationStatus, Review


def pairwise_agreement(decisions: list[str]) -> float | None:
    """Share of reviewer pairs that made the same decision (None with fewer than two)."""
    if len(decisions) < 2:
        return None
    pairs = list(combinations(decisions, 2))
    return sum(a == b for a, b in pairs) / len(pairs)


def demonstration_agreement(demonstration: Demonstration) -> float | None:
    """Agreement of the reviewers in the demonstration's latest round that had at least two
    (non-adjudication) reviews: the share of reviewer pairs that decided the same way. None
    when no round had two reviews."""
    by_round: dict[int, list[str]] = {}
    reviews = (
        Review.objects.filter(demonstration=demonstration, adjudication=False)
        .order_by("round", "id")
        .values_list("round", "decision")
    )
    for round_no, decision in reviews:
        by_round.setdefault(round_no, []).append(decision)
    for round_no in sorted(by_round, reverse=True):
        if len(by_round[round_no]) >= 2:
            return pairwise_agreement(by_round[round_no])
    return None


def demonstrations_for_dataset(
    *,
    project,
    capabilities: list[str] | None = None,
    environment_ids: list[int] | None = None,
    min_score: float | None = None,
    splits: list[str] | None = None,
    min_agreement: float | None = None,
) -> QuerySet[Demonstration]:
    """Approved demonstrations that a dataset version may contain, oldest first, with their
    current version joined.

    ``capabilities``: slugs, any of which the demonstration exercises. ``min_score``: the
    current version's score. ``splits``: the tasks' splits ("train", "eval").
    ``min_agreement``: keeps demonstrations whose reviewers' pairwise agreement is at least
    this; a demonstration reviewed by one person has no agreement and is left out when
    ``min_agreement`` is given.
    """
    qs = Demonstration.objects.filter(
        project=project,
        status=DemonstrationStatus.APPROVED,
        current_version__isnull=False,
    )
    if capabilities:
        matching = Demonstration.objects.filter(
            project=project, capabilities__slug__in=list(capabilities)
        ).values("pk")
        qs = qs.filter(pk__in=matching)
    if environment_ids:
        qs = qs.filter(environment_id__in=list(environment_ids))
    if min_score is not None:
        qs = qs.filter(current_version__score__gte=min_score)
    if splits:
        qs = qs.filter(split__in=list(splits))
    if min_agreement is not None:
        qs = qs.filter(agreement__gte=min_agreement)
    return qs.select_related("current_version", "environment", "task").order_by("id")


def status_counts(*, project) -> dict[str, int]:
    counts = Counter(Demonstration.objects.filter(project=project).values_list("status", flat=True))
    return {status: counts.get(status, 0) for status in DemonstrationStatus.values}


def pending_count(*, project) -> int:
    return Demonstration.objects.filter(project=project, status=DemonstrationStatus.PENDING).count()
