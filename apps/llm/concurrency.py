"""A per-endpoint limit on requests in flight, shared by every worker on every machine.

Each endpoint has ``max_concurrency`` ``EndpointSlot`` rows. A request leases one slot for
its duration: acquiring is a conditional UPDATE of a free (or expired) slot in a short
transaction of its own, releasing is a conditional UPDATE by the holder's token. A lease
expires after the request timeout plus a margin, so a worker killed mid-request frees its
slot without anyone's help. Only the database is needed (PostgreSQL or SQLite).
"""

import contextlib
import random
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from apps.llm.models import EndpointSlot, ModelEndpoint

LEASE_MARGIN_S = 30.0
POLL_MIN_S = 0.02
POLL_MAX_S = 0.25


class SlotTimeout(Exception):
    """No slot of the endpoint became free before the deadline."""

    def __init__(self, endpoint: ModelEndpoint, waited_s: float):
        super().__init__(
            f"All {endpoint.max_concurrency} concurrent-request slots of endpoint "
            f"“{endpoint.name}” stayed busy for {waited_s:.0f} s."
        )
        self.waited_s = waited_s


@dataclass(frozen=True)
class SlotLease:
    endpoint_id: int
    index: int
    holder: str


def ensure_outside_transaction(what: str) -> None:
    """Refuse to run inside the caller's transaction (a test case's own one is fine): slots
    and the call log must be committed while the request is in flight, for other workers."""
    blocks = connection.atomic_blocks
    if blocks and not getattr(blocks[-1], "_from_testcase", False):
        raise RuntimeError(
            f"{what} must not run inside a database transaction: the call log and the "
            "endpoint's concurrency slots must be committed while the request is in flight."
        )


def lease_seconds(endpoint: ModelEndpoint) -> float:
    return float(endpoint.request_timeout_s) + LEASE_MARGIN_S


def slots_sync(*, endpoint: ModelEndpoint) -> None:
    """Make the slot rows match ``max_concurrency``: add missing ones, drop free extra ones.

    A held slot above the limit stays until its holder releases it, but is never handed out
    again (acquiring only considers indexes below the endpoint's current limit).
    """
    existing = set(EndpointSlot.objects.filter(endpoint=endpoint).values_list("index", flat=True))
    missing = [
        EndpointSlot(endpoint=endpoint, index=i)
        for i in range(endpoint.max_concurrency)
        if i not in existing
    ]
    if missing:
        EndpointSlot.objects.bulk_create(missing, ignore_conflicts=True)
    EndpointSlot.objects.filter(
        endpoint=endpoint, index__gte=endpoint.max_concurrency, holder=""
    ).delete()


def _free_slots(endpoint_id: int, now):
    return EndpointSlot.objects.filter(
        Q(holder="") | Q(lease_expires_at__lt=now),
        endpoint_id=endpoint_id,
        index__lt=F("endpoint__max_concurrency"),
    ).order_by("index")


def slot_try_acquire(*, endpoint: ModelEndpoint, lease_s: float | None = None) -> SlotLease | None:
    """Claim one free or expired slot now, or return None if all are busy."""
    holder = uuid.uuid4().hex
    lease_s = lease_seconds(endpoint) if lease_s is None else lease_s
    if connection.features.has_select_for_update_skip_locked:
        # PostgreSQL: concurrent claimers skip each other's rows instead of queueing on them.
        with transaction.atomic(durable=True):
            now = timezone.now()
            candidates = _free_slots(endpoint.pk, now).select_for_update(
                skip_locked=True, of=("self",)
            )
            return _claim_first(list(candidates[:4]), holder, now, lease_s, endpoint)
    # SQLite: each compare-and-set UPDATE is atomic on its own; no transaction is held
    # between the read and the write, so there is no lock to upgrade.
    now = timezone.now()
    return _claim_first(list(_free_slots(endpoint.pk, now)[:4]), holder, now, lease_s, endpoint)


def _claim_first(candidates, holder: str, now, lease_s: float, endpoint) -> SlotLease | None:
    for slot in candidates:
        # Compare-and-set: wins only if nobody changed the slot since we read it.
        won = EndpointSlot.objects.filter(
            pk=slot.pk, holder=slot.holder, lease_expires_at=slot.lease_expires_at
        ).update(holder=holder, lease_expires_at=now + timedelta(seconds=lease_s), acquired_at=now)
        if won:
            return SlotLease(endpoint_id=endpoint.pk, index=slot.index, holder=holder)
    return None


def slot_release(*, lease: SlotLease) -> bool:
    """Free the slot if this lease still holds it (an expired, re-claimed one is left alone)."""
    return bool(
        EndpointSlot.objects.filter(
            endpoint_id=lease.endpoint_id, index=lease.index, holder=lease.holder
        ).update(holder="", lease_expires_at=None, acquired_at=None)
    )


def slot_acquire(
    *, endpoint: ModelEndpoint, timeout: float | None = None, lease_s: float | None = None
) -> SlotLease:
    """Wait (polling with small jittered sleeps) until a slot is ours; SlotTimeout after
    ``timeout`` seconds (default ``settings.LLM_SLOT_WAIT_S``)."""
    ensure_outside_transaction("Acquiring an endpoint slot")
    timeout = settings.LLM_SLOT_WAIT_S if timeout is None else timeout
    started = time.monotonic()
    synced = False
    delay = POLL_MIN_S
    while True:
        lease = slot_try_acquire(endpoint=endpoint, lease_s=lease_s)
        if lease is not None:
            return lease
        if not synced:
            # Slots are created with the endpoint; this heals rows lost to a manual edit.
            slots_sync(endpoint=endpoint)
            synced = True
            continue
        waited = time.monotonic() - started
        if waited >= timeout:
            raise SlotTimeout(endpoint, waited)
        time.sleep(min(random.uniform(POLL_MIN_S, delay), max(0.0, timeout - waited)))
        delay = min(POLL_MAX_S, delay * 1.5)


@contextlib.contextmanager
def endpoint_slot(endpoint: ModelEndpoint, *, timeout: float | None = None):
    """Hold one of the endpoint's concurrency slots for the duration of the block."""
    lease = slot_acquire(endpoint=endpoint, timeout=timeout)
    try:
        yield lease
    finally:
        slot_release(lease=lease)
