"""One claimable unit of background work: a job, a synthesis slot, a run.

A row is *claimable* when it waits (not started) or is held by a worker that stopped
heartbeating for ``stale_after`` (``apps.core.leases``). ``Claimable.claim`` takes it with
one conditional UPDATE that writes a fresh fencing token: of two workers racing for a row
only one changes it. Every later write of the holder (renew, finish, give back) is an UPDATE
fenced by that token, so a worker whose claim was taken over writes nothing more; it learns
so from the row count, at its next checkpoint or from its ``Heartbeat``. ``sweep`` sends
again the rows nobody works on, each taken by a conditional UPDATE of ``enqueued_at`` that
one sweeper wins, so a row is sent once per period however many sweepers run.

The model has ``claim_token``, ``heartbeat_at``, ``worker``, ``started_at`` and
``enqueued_at`` fields, and a counter of claims (its name is ``counter``): a row claimed
more than ``JOB_MAX_CLAIMS`` times had its workers die under it that often.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from django.db.models import F, Model, Q, QuerySet
from django.db.models.functions import Coalesce
from django.utils import timezone

from apps.core.leases import TRANSIENT_DB_ERRORS, Heartbeat, stale_after, worker_name

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Claimable:
    """A model whose rows are claimed: ``waiting`` rows are claimable at once, ``held`` ones
    (being worked on) once their heartbeat is stale. ``resend_unsent``: the sweeper also
    sends rows never sent (``enqueued_at`` empty); otherwise those belong to whoever works
    them in process or dispatches them."""

    model: type[Model]
    waiting: Q
    held: Q
    counter: str = "claims"
    resend_unsent: bool = False

    def lost(self, before: datetime) -> Q:
        """Rows nobody works on: waiting, or held with no heartbeat since ``before``."""
        silent = Q(heartbeat_at__lt=before) | Q(heartbeat_at__isnull=True)
        return self.waiting | (self.held & silent)

    def claim(
        self, pk: int, *, now=None, before=None, worker: str = "", when: Q | None = None, **values
    ) -> Claim | None:
        """Take row ``pk`` for this worker (writing ``values`` too), or None if it is held
        elsewhere or finished. ``before``: a held row whose heartbeat is older is taken over
        (``now - JOB_STALE_AFTER_S`` unless given); ``when``: a further condition on the
        row, checked by the same UPDATE."""
        now = now or timezone.now()
        before = before or now - stale_after()
        token = uuid.uuid4().hex
        rows = self.model.objects.filter(self.lost(before), when or Q(), pk=pk)
        won = rows.update(
            **{
                "claim_token": token,
                "heartbeat_at": now,
                "worker": (worker or worker_name())[:200],
                "started_at": Coalesce(F("started_at"), now),
                self.counter: F(self.counter) + 1,
                **values,
            }
        )
        return Claim(self, pk, token) if won else None

    def sweep(self, rows: QuerySet, *, send: Callable[[int], bool], now=None, before=None):
        """Send again (``send(pk)``, False when the broker is down) every one of ``rows``
        nobody works on although it was sent before ``before``; returns the ids sent. A send
        that fails puts the row's send time back, so the next sweep tries again."""
        now = now or timezone.now()
        before = before or now - stale_after()
        due = Q(enqueued_at__lt=before)
        if self.resend_unsent:
            due |= Q(enqueued_at__isnull=True)
        lost = self.lost(before) & due
        sent = []
        for pk, enqueued_at in rows.filter(lost).order_by("pk").values_list("pk", "enqueued_at"):
            if not self.model.objects.filter(lost, pk=pk).update(enqueued_at=now):
                continue  # another sweeper took it, or its worker came back
            if send(pk) is False:
                self.model.objects.filter(pk=pk, enqueued_at=now).update(enqueued_at=enqueued_at)
                continue
            logger.info("Sweeper: sent %s %s again.", self.model._meta.verbose_name, pk)
            sent.append(pk)
        return sent


@dataclass(frozen=True)
class Claim:
    """A row held by this worker, and the writes fenced by its token."""

    claimable: Claimable
    pk: int
    token: str

    def mine(self) -> QuerySet:
        """The row while this worker still holds it (empty once taken over or given back)."""
        model = self.claimable.model
        return model.objects.filter(self.claimable.held, pk=self.pk, claim_token=self.token)

    def renew(self, **values) -> bool:
        """Write the heartbeat (and ``values``); False if the claim was lost."""
        return bool(self.mine().update(heartbeat_at=timezone.now(), **values))

    def finish(self, **values) -> bool:
        """Write how the work ended (``values``, the status among them); False if lost."""
        return bool(self.mine().update(**values))

    def give_back(self, **values) -> bool:
        """Make the row claimable at once without counting a dead worker (the database went
        away under the work); quietly False if it is still away: the claim goes stale."""
        counter = self.claimable.counter
        try:
            return bool(
                self.mine().update(
                    claim_token="", heartbeat_at=None, **{counter: F(counter) - 1}, **values
                )
            )
        except TRANSIENT_DB_ERRORS:
            logger.warning("Could not give back the claim on %s; it will be swept.", self.pk)
            return False

    def heartbeat(self, name: str) -> Heartbeat:
        """The thread's renewals of this claim, while the work runs."""
        return Heartbeat(self.renew, name=name)
