"""Reads for curation: the queue, lists, and what the datasets app may export."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, time
from itertools import combinations
from urllib.parse import urlencode

from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from apps.core.safeinput import parse_id
from apps.curation.models import Demonstration, DemonstrationStatus, Review, ReviewReasonTag


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
    """Pending demonstrations the review queue serves (train tasks only)."""
    return (
        Demonstration.objects.filter(project=project, status=DemonstrationStatus.PENDING)
        .exclude(Q(split="eval") | Q(task__split="eval"))
        .count()
    )


# --------------------------------------------------------------------------- queue and lists

FLAGS = ("flipped", "broken")


@dataclass
class DemonstrationFilters:
    """The queue's and the list's filters, read from a query string (bad values ignored)."""

    capability: str = ""
    environment: int | None = None
    model: str = ""
    score_min: float | None = None
    score_max: float | None = None
    split: str = ""
    flag: str = ""
    status: str = ""
    q: str = ""

    @classmethod
    def from_query(cls, params) -> DemonstrationFilters:
        def number(name):
            try:
                value = float(params.get(name, ""))
            except (TypeError, ValueError):
                return None
            return value if math.isfinite(value) else None

        environment = str(params.get("environment", ""))
        status = params.get("status", "")
        return cls(
            capability=str(params.get("capability", "")).strip()[:100],
            environment=parse_id(environment),
            model=str(params.get("model", "")).strip()[:200],
            score_min=number("score_min"),
            score_max=number("score_max"),
            split=params.get("split", "") if params.get("split") in ("train", "eval") else "",
            flag=params.get("flag", "") if params.get("flag") in FLAGS else "",
            status=status if status in DemonstrationStatus.values else "",
            q=str(params.get("q", "")).strip()[:100],
        )

    def to_query(self, *, with_status: bool = True) -> str:
        """The query string that reproduces these filters ("" when none)."""
        pairs = {
            "capability": self.capability,
            "environment": self.environment if self.environment is not None else "",
            "model": self.model,
            "score_min": _num(self.score_min),
            "score_max": _num(self.score_max),
            "split": self.split,
            "flag": self.flag,
            "q": self.q,
        }
        if with_status:
            pairs["status"] = self.status
        return urlencode({k: v for k, v in pairs.items() if v not in ("", None)})

    @property
    def active(self) -> bool:
        return bool(self.to_query(with_status=False))


def _num(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value:g}"


def demonstration_list(*, project, filters: DemonstrationFilters | None = None) -> QuerySet:
    """The project's demonstrations under ``filters``, newest last; the heavy JSON of
    versions is not loaded."""
    filters = filters or DemonstrationFilters()
    qs = Demonstration.objects.filter(project=project)
    if filters.capability:
        qs = qs.filter(
            pk__in=Demonstration.objects.filter(
                project=project, capabilities__slug=filters.capability
            ).values("pk")
        )
    if filters.environment is not None:
        qs = qs.filter(environment_id=filters.environment)
    if filters.model:
        qs = qs.filter(model_name=filters.model)
    if filters.score_min is not None:
        qs = qs.filter(score__gte=filters.score_min)
    if filters.score_max is not None:
        qs = qs.filter(score__lte=filters.score_max)
    if filters.split:
        qs = qs.filter(split=filters.split)
    if filters.flag == "flipped":
        qs = qs.exclude(regrade_flag="")
    elif filters.flag == "broken":
        qs = qs.filter(regrade_flag="passed→failed")
    if filters.status:
        qs = qs.filter(status=filters.status)
    if filters.q:
        qs = qs.filter(Q(task_key__icontains=filters.q) | Q(task_title__icontains=filters.q))
    return (
        qs.select_related("claimed_by")
        .annotate(version_count=Count("versions", distinct=True))
        .order_by("id")
    )


def queue_queryset(*, project, filters: DemonstrationFilters | None = None) -> QuerySet:
    """What the review queue walks: the filtered pending demonstrations of train tasks (an
    eval-task one — made before eval runs stopped becoming demonstrations, or whose task
    moved to eval since — could never be used, so it is not served)."""
    filters = filters or DemonstrationFilters()
    base = demonstration_list(
        project=project,
        filters=DemonstrationFilters(**{**filters.__dict__, "status": DemonstrationStatus.PENDING}),
    )
    return Demonstration.objects.filter(pk__in=base.values("pk")).exclude(
        Q(split="eval") | Q(task__split="eval")
    )


def filter_choices(*, project) -> dict:
    """The values the filters offer: capabilities, environments and models seen."""
    from apps.capabilities.models import Capability

    rows = Demonstration.objects.filter(project=project)
    return {
        "capabilities": list(
            Capability.objects.filter(project=project, demonstrations__isnull=False)
            .distinct()
            .order_by("name")
            .values("slug", "name")
        ),
        "environments": list(
            rows.exclude(environment__isnull=True)
            .values("environment_id", "environment_name")
            .distinct()
            .order_by("environment_name")
        ),
        "models": list(
            rows.exclude(model_name="")
            .values_list("model_name", flat=True)
            .distinct()
            .order_by("model_name")
        ),
    }


def reviewer_progress(*, project, user, filters: DemonstrationFilters | None = None) -> dict:
    """Decided by ``user`` today, pending in the project, and pending under the filters."""
    today = timezone.localdate()
    start = timezone.make_aware(datetime.combine(today, time.min))
    decided_today = Review.objects.filter(
        demonstration__project=project, reviewer=user, created_at__gte=start
    ).count()
    pending = pending_count(project=project)
    matching = (
        queue_queryset(project=project, filters=filters).count()
        if filters is not None and filters.active
        else pending
    )
    return {"decided_today": decided_today, "pending": pending, "matching": matching}


def project_agreement(*, project) -> dict:
    """Agreement across the project's multi-reviewed demonstrations: their mean pairwise
    agreement, how many there are, and how many are in dispute now."""
    rows = Demonstration.objects.filter(project=project, agreement__isnull=False)
    values = list(rows.values_list("agreement", flat=True))
    return {
        "mean": sum(values) / len(values) if values else None,
        "count": len(values),
        "disputed": Demonstration.objects.filter(project=project, disputed=True).count(),
    }


def disputed_list(*, project) -> QuerySet:
    return (
        Demonstration.objects.filter(project=project, disputed=True)
        .select_related("current_version")
        .prefetch_related("reviews")
        .order_by("id")
    )


def visible_reviews(demonstration: Demonstration) -> list[Review]:
    """The demonstration's reviews a person may see: every closed round, and the current
    round only once it is complete (reviewers stay blind to each other until then)."""
    reviews = list(demonstration.reviews.select_related("version").order_by("round", "id"))
    current = demonstration.review_round
    open_round = demonstration.status == DemonstrationStatus.PENDING and not demonstration.disputed
    return [r for r in reviews if not (open_round and r.round == current)]


def round_progress(demonstration: Demonstration) -> dict:
    done = demonstration.reviews.filter(
        round=demonstration.review_round, adjudication=False
    ).count()
    return {"done": done, "required": demonstration.reviews_required}


def version_diff(a, b) -> list[dict]:
    """Message-level diff of two versions' transcripts: rows of {index, status, a, b} where
    status is same | changed | removed | added (compared position by position, which is
    what corrections do: edit in place, re-weight in place, drop a tail)."""
    rows = []
    left, right = a.transcript or [], b.transcript or []
    for index in range(max(len(left), len(right))):
        x = left[index] if index < len(left) else None
        y = right[index] if index < len(right) else None
        if x is None:
            status = "added"
        elif y is None:
            status = "removed"
        elif x == y:
            status = "same"
        else:
            status = "changed"
        rows.append({"index": index, "status": status, "a": _describe(x), "b": _describe(y)})
    return rows


def _describe(message) -> dict | None:
    if not isinstance(message, dict):
        return None
    calls = []
    for call in message.get("tool_calls") or []:
        function = (call.get("function") or {}) if isinstance(call, dict) else {}
        calls.append(f"{function.get('name', '')}({function.get('arguments', '')})")
    return {
        "role": message.get("role", ""),
        "content": message.get("content") or "",
        "calls": calls,
        "weight": message.get("weight"),
    }


def active_reason_tags(*, project) -> list[ReviewReasonTag]:
    """The project's reason tags a reviewer may pick (not archived)."""
    return list(ReviewReasonTag.objects.filter(project=project, archived_at__isnull=True))
