"""Reads for synthesis jobs, their slots and attempts."""

import difflib
import json
from decimal import Decimal

from django.db.models import Count, Max, Q, QuerySet, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from apps.capabilities.models import Capability
from apps.core.leases import stale_after
from apps.synthesis.models import (
    FINISHED_SLOT_STATUSES,
    SlotStatus,
    SynthesisAttempt,
    SynthesisJob,
    SynthesisSlot,
)

MAX_DIFF_LINES = 1500


def _status_counts(prefix: str = "") -> dict:
    return {
        f"count_{status}": Count(f"{prefix}pk", filter=Q(**{f"{prefix}status": status}))
        for status in SlotStatus.values
    }


def synthesis_list(*, project) -> QuerySet[SynthesisJob]:
    """The project's synthesis jobs, newest first, with slot counts per status (one query)."""
    return (
        SynthesisJob.objects.filter(project=project)
        .select_related("job", "created_by", "endpoint")
        .annotate(
            **_status_counts("slots__"),
            count_duplicates=Count("slots", filter=Q(slots__duplicate_of__isnull=False)),
        )
        .order_by("-created_at", "-id")
    )


def capability_labels(*, project, jobs) -> dict[str, str]:
    """slug → name for the capabilities the jobs name (one query; archived ones too, since a
    job keeps the slugs it was started with)."""
    slugs = {slug for job in jobs for slug in job.capability_slugs or []}
    if not slugs:
        return {}
    return dict(
        Capability.objects.filter(project=project, slug__in=slugs).values_list("slug", "name")
    )


def with_capabilities(*, project, jobs) -> list[SynthesisJob]:
    """The jobs, each with ``capability_names``: its (slug, name) pairs in the order it names them
    (the slug when no capability of the project has it any more)."""
    jobs = list(jobs)
    names = capability_labels(project=project, jobs=jobs)
    for job in jobs:
        job.capability_names = [
            (slug, names.get(slug, slug)) for slug in job.capability_slugs or []
        ]
    return jobs


def synthesis_summary(*, synthesis: SynthesisJob, now=None) -> dict:
    """Counts per slot status, repaired, duplicates, tokens, cost, a one-line message, and
    whether the job is ``stalled`` (active, yet nothing has moved for ``JOB_STALE_AFTER_S``:
    no worker or no sweeper is running, the only time Resume helps)."""
    totals = SynthesisSlot.objects.filter(synthesis=synthesis).aggregate(
        **_status_counts(),
        repaired=Count("pk", filter=Q(status=SlotStatus.VALID, repair_rounds__gt=0)),
        duplicates=Count("pk", filter=Q(duplicate_of__isnull=False)),
        tokens_in=Coalesce(Sum("tokens_in"), 0),
        tokens_out=Coalesce(Sum("tokens_out"), 0),
        cost=Coalesce(Sum("cost"), Decimal("0")),
        last_heartbeat=Max("heartbeat_at"),
    )
    counts = {status: totals[f"count_{status}"] for status in SlotStatus.values}
    job = synthesis.job
    moments = [m for m in (job.created_at, job.heartbeat_at, totals["last_heartbeat"]) if m]
    stalled = bool(
        job.is_active
        and not job.cancel_requested
        and (now or timezone.now()) - max(moments) > stale_after()
    )
    finished = sum(counts[status] for status in FINISHED_SLOT_STATUSES)
    parts = [
        f"{counts[SlotStatus.VALID]} valid",
        f"{counts[SlotStatus.INVALID]} invalid",
        f"{counts[SlotStatus.FAILED]} failed",
    ]
    if counts[SlotStatus.CANCELLED]:
        parts.append(f"{counts[SlotStatus.CANCELLED]} cancelled")
    message = f"{finished} of {synthesis.count} finished: " + ", ".join(parts)
    if totals["repaired"]:
        message += f"; {totals['repaired']} repaired"
    if totals["duplicates"]:
        noun = "near-duplicate" if totals["duplicates"] == 1 else "near-duplicates"
        message += f"; {totals['duplicates']} {noun}"
    return {
        "counts": counts,
        "finished": finished,
        "running": counts[SlotStatus.DRAFTING] + counts[SlotStatus.REPAIRING],
        "repaired": totals["repaired"],
        "duplicates": totals["duplicates"],
        "tokens_in": totals["tokens_in"],
        "tokens_out": totals["tokens_out"],
        "cost": totals["cost"],
        "message": message + ".",
        "stalled": stalled,
    }


def synthesis_slots(*, synthesis: SynthesisJob) -> QuerySet[SynthesisSlot]:
    return (
        SynthesisSlot.objects.filter(synthesis=synthesis)
        .select_related("environment", "duplicate_of")
        .order_by("index")
    )


def slot_attempts(*, slot: SynthesisSlot) -> QuerySet[SynthesisAttempt]:
    return SynthesisAttempt.objects.filter(slot=slot).order_by("round")


def attempt_text(attempt: SynthesisAttempt) -> str:
    """What a diff compares: the draft as JSON with sorted keys and 2-space indents, or the
    raw answer when it was not JSON."""
    if attempt.document is not None:
        return json.dumps(attempt.document, indent=2, sort_keys=True, ensure_ascii=False)
    return attempt.raw_text


def draft_diff(before: str, after: str, *, before_label: str, after_label: str) -> dict:
    """A unified diff as typed lines: [{"kind": "add"|"del"|"hunk"|"file"|"ctx", "text"}]."""
    lines = []
    added = removed = 0
    for line in difflib.unified_diff(
        before.splitlines(),
        after.splitlines(),
        fromfile=before_label,
        tofile=after_label,
        lineterm="",
        n=2,
    ):
        if line.startswith(("+++", "---")):
            kind = "file"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind, added = "add", added + 1
        elif line.startswith("-"):
            kind, removed = "del", removed + 1
        else:
            kind = "ctx"
        lines.append({"kind": kind, "text": line})
    truncated = max(0, len(lines) - MAX_DIFF_LINES)
    return {
        "lines": lines[:MAX_DIFF_LINES],
        "added": added,
        "removed": removed,
        "truncated": truncated,
    }


def attempt_timeline(*, slot: SynthesisSlot) -> list[dict]:
    """Each attempt with its problems and the diff from the previous answer."""
    timeline = []
    previous = None
    for attempt in slot_attempts(slot=slot):
        text = attempt_text(attempt)
        diff = None
        if previous is not None and (text or previous[1]):
            diff = draft_diff(
                previous[1],
                text,
                before_label=f"round {previous[0].round}",
                after_label=f"round {attempt.round}",
            )
        problems = (attempt.report or {}).get("problems", [])
        timeline.append(
            {
                "attempt": attempt,
                "problems": problems,
                "diff": diff,
                "text": text,
                "text_lines": len(text.splitlines()),
            }
        )
        previous = (attempt, text)
    return timeline
