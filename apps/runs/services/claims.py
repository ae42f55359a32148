"""Claim a run (``RUNS``, the core ``Claimable``) and load what playing it needs.

A claimed run is read back with its batch, the batch's job and endpoints, its task and the
task's environment in one SELECT, right after the claim: the job's cancellation and status
are as they are at that moment, and every run gets model instances of its own (threads of
one worker play runs of one batch at once).
"""

from __future__ import annotations

from datetime import datetime

from django.db import connection, transaction
from django.db.models import Q

from apps.core.claims import Claim, Claimable
from apps.runs.models import Run, RunStatus

RUNS = Claimable(Run, waiting=Q(status=RunStatus.PENDING), held=Q(status=RunStatus.RUNNING))

_LOADED = (
    "batch__job",
    "batch__endpoint",
    "batch__simulator_endpoint",
    "batch__judge_endpoint",
    "task__environment",
)


def claim_of(run: Run) -> Claim:
    """The claim this worker holds on ``run`` (its writes are fenced by the token)."""
    return Claim(RUNS, run.pk, run.claim_token)


def _claimed(pk: int, *, now: datetime, before=None, when: Q | None = None, **values):
    # A run taken over plays again from its start: a dead holder's checkpoint is dropped.
    claim = RUNS.claim(
        pk,
        now=now,
        before=before,
        when=when,
        status=RunStatus.RUNNING,
        started_at=now,
        transcript=[],
        **values,
    )
    return None if claim is None else Run.objects.select_related(*_LOADED).get(pk=pk)


def claim_run(run_id: int, *, now: datetime, before: datetime) -> Run | None:
    """Claim run ``run_id`` (pending, or running with no heartbeat since ``before``) and
    return it loaded; None if it is finished or alive elsewhere."""
    return _claimed(run_id, now=now, before=before)


def take_next(batch_id: int, *, now: datetime) -> Run | None:
    """Take and claim the batch's first unsent pending run (marked sent), unless the batch's
    job was asked to cancel; None if another lane won that run or none is left. The claim
    checks again that the run is unsent, so two lanes never take one run; on PostgreSQL
    lanes asking at once each skip the runs the others are taking (``SKIP LOCKED``) instead
    of all waiting on the first one's row lock and finding it taken."""
    unsent = Run.objects.filter(
        batch_id=batch_id,
        status=RunStatus.PENDING,
        enqueued_at__isnull=True,
        batch__job__cancel_requested=False,
    ).order_by("pk")
    if connection.features.has_select_for_update_skip_locked:
        unsent = unsent.select_for_update(skip_locked=True, of=("self",))
    with transaction.atomic(savepoint=False):
        pk = unsent.values_list("pk", flat=True).first()
        if pk is None:
            return None
        return _claimed(pk, now=now, when=Q(enqueued_at__isnull=True), enqueued_at=now)
