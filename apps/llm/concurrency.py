"""A per-endpoint limit on requests in flight, shared by every worker on every machine.

Two places can hold the limit, chosen by ``LLM_SLOT_BACKEND``:

- ``redis`` (the default when the broker is Redis): one sorted set per endpoint, of lease
  holders scored by their expiry. Acquiring is one Lua script (drop expired leases; add ours
  if fewer than ``max_concurrency`` remain), releasing removes ours and pushes a wake-up
  token onto the endpoint's wake list, on which waiters block (``BLPOP``) instead of
  sleeping: a freed slot is taken within a round trip, by a worker on any host. Time is the
  Redis server's, so hosts with skewed clocks agree on expiry.
- ``file`` (the local mode, SQLite: one host): ``max_concurrency`` lock files per endpoint
  under ``COWORKENV_VAR_DIR/llm-slots/``; a request holds an exclusive ``flock`` on one of
  them. No database write at all, and the kernel frees the lock of a killed process. A
  process opens each file once and keeps it open (``_SlotFiles``), so the folder must not be
  deleted while workers run (they would lock files nobody else can see).
- ``database`` (PostgreSQL without Redis): ``max_concurrency`` ``EndpointSlot`` rows per endpoint. A
  request leases one slot for its duration: acquiring is a conditional UPDATE of a free (or
  expired) slot in a short transaction of its own, releasing is a conditional UPDATE by the
  holder's token. Waiters in the same process (a worker's threads) are woken by the release
  at once; a release in another process is seen at the next short poll (≤ 50 ms).

A database or Redis lease expires after the request timeout plus a margin, so a worker killed
mid-request frees its slot without anyone's help.
"""

import contextlib
import fcntl
import functools
import os
import random
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from apps.core.timings import timed
from apps.llm.models import EndpointSlot, ModelEndpoint

LEASE_MARGIN_S = 30.0
POLL_MIN_S = 0.005
POLL_MAX_S = 0.05
# A waiter looks again at least this often (a lease that expired, a lost wake-up token).
REDIS_WAKE_S = 0.5


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
    index: int  # the slot row's index (database backend); -1 for a Redis lease
    holder: str
    backend: str = "database"


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
    if lease.backend == "redis":
        return _redis_release(lease)
    if lease.backend == "file":
        return _file_release(lease)
    released = bool(
        EndpointSlot.objects.filter(
            endpoint_id=lease.endpoint_id, index=lease.index, holder=lease.holder
        ).update(holder="", lease_expires_at=None, acquired_at=None)
    )
    if released:
        _local_wake(lease.endpoint_id)
    return released


def slot_acquire(
    *, endpoint: ModelEndpoint, timeout: float | None = None, lease_s: float | None = None
) -> SlotLease:
    """Wait until a slot is ours; SlotTimeout after ``timeout`` seconds (default
    ``settings.LLM_SLOT_WAIT_S``). Where the limit lives: ``settings.LLM_SLOT_BACKEND``."""
    ensure_outside_transaction("Acquiring an endpoint slot")
    timeout = settings.LLM_SLOT_WAIT_S if timeout is None else timeout
    lease_s = lease_seconds(endpoint) if lease_s is None else lease_s
    if settings.LLM_SLOT_BACKEND == "redis":
        return _redis_acquire(endpoint, timeout, lease_s)
    if settings.LLM_SLOT_BACKEND == "file":
        return _file_acquire(endpoint, timeout)
    return _database_acquire(endpoint, timeout, lease_s)


class _SlotFiles:
    """This process's lock files of one endpoint (file backend), opened once and kept open.

    ``flock`` locks belong to an open file, which every thread of the process shares, so the
    process keeps its own count of what its threads hold: a thread tries only the files no
    other thread here holds — those this process freed last first (most likely still free),
    then all of them from a place of the process's own (so that processes do not all try the
    same files first) — and never opens, closes or builds a path again for a file it has
    opened once. The lock guards the count only, never a system call.
    """

    def __init__(self, folder: str):
        self.folder = folder
        self.fds: dict[int, int] = {}  # slot index -> open file
        self.held: set[int] = set()  # indexes a thread of this process holds or tries
        self.freed: list[int] = []  # indexes this process freed, the latest last
        self.start = random.randrange(1 << 16)
        self.lock = threading.Lock()

    def try_lock(self, limit: int) -> int | None:
        with self.lock:
            first = self.start % limit
            order = [*reversed(self.freed), *range(first, limit), *range(first)]
        for index in order:
            with self.lock:
                if index in self.held or index >= limit:
                    continue
                self.held.add(index)  # ours to try
                fd = self.fds.get(index)
            if fd is None:
                fd = os.open(f"{self.folder}/{index}.lock", os.O_RDWR | os.O_CREAT, 0o600)
                with self.lock:
                    self.fds[index] = fd
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:  # another process holds it
                with self.lock:
                    self.held.discard(index)
                continue
            with self.lock:
                if index in self.freed:
                    self.freed.remove(index)
            return index
        return None

    def unlock(self, index: int) -> None:
        with contextlib.suppress(OSError):
            fcntl.flock(self.fds[index], fcntl.LOCK_UN)
        with self.lock:
            self.held.discard(index)
            self.freed.append(index)


# By (COWORKENV_VAR_DIR, endpoint id); the folder is made on first use, then trusted.
_SLOT_FILES: dict[tuple[str, int], _SlotFiles] = {}
_SLOT_FILES_LOCK = threading.Lock()


def _slot_files(endpoint_id: int) -> _SlotFiles:
    key = (os.fspath(settings.VAR_DIR), endpoint_id)
    files = _SLOT_FILES.get(key)
    if files is None:
        with _SLOT_FILES_LOCK:
            files = _SLOT_FILES.get(key)
            if files is None:
                folder = settings.VAR_DIR / "llm-slots" / str(endpoint_id)
                folder.mkdir(parents=True, exist_ok=True)
                files = _SLOT_FILES[key] = _SlotFiles(os.fspath(folder))
    return files


def _file_try_acquire(endpoint: ModelEndpoint) -> SlotLease | None:
    files = _slot_files(endpoint.pk)
    index = files.try_lock(endpoint.max_concurrency)
    if index is None:
        return None
    holder = uuid.uuid4().hex
    with _FILE_LEASES_LOCK:
        _FILE_LEASES[holder] = (files, index)
    return SlotLease(endpoint_id=endpoint.pk, index=index, holder=holder, backend="file")


# The slot files and index of each lease this process holds (file backend), by holder token.
_FILE_LEASES: dict[str, tuple[_SlotFiles, int]] = {}
_FILE_LEASES_LOCK = threading.Lock()


def _forget_slot_files_after_fork() -> None:
    """A forked child shares its parent's open files, and with them their locks: it opens
    its own (closing its copies leaves the parent's locks alone)."""
    global _SLOT_FILES_LOCK, _FILE_LEASES_LOCK
    for files in _SLOT_FILES.values():
        for fd in files.fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)
    _SLOT_FILES.clear()
    _FILE_LEASES.clear()
    _SLOT_FILES_LOCK = threading.Lock()
    _FILE_LEASES_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_forget_slot_files_after_fork)


def _file_acquire(endpoint: ModelEndpoint, timeout: float) -> SlotLease:
    started = time.monotonic()
    delay = POLL_MIN_S
    wake = _local_condition(endpoint.pk)
    while True:
        lease = _file_try_acquire(endpoint)
        if lease is not None:
            return lease
        waited = time.monotonic() - started
        if waited >= timeout:
            raise SlotTimeout(endpoint, waited)
        with wake:
            wake.wait(min(random.uniform(POLL_MIN_S, delay), max(0.0, timeout - waited)))
        delay = min(POLL_MAX_S, delay * 1.5)


def _file_release(lease: SlotLease) -> bool:
    with _FILE_LEASES_LOCK:
        held = _FILE_LEASES.pop(lease.holder, None)
    if held is None:
        return False  # released already
    files, index = held
    files.unlock(index)
    _local_wake(lease.endpoint_id)
    return True


def _database_acquire(endpoint: ModelEndpoint, timeout: float, lease_s: float) -> SlotLease:
    started = time.monotonic()
    synced = False
    delay = POLL_MIN_S
    wake = _local_condition(endpoint.pk)
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
        # A release in this process wakes us at once; one in another process is seen at the
        # next poll (short, jittered, so waiting processes do not poll in step).
        with wake:
            wake.wait(min(random.uniform(POLL_MIN_S, delay), max(0.0, timeout - waited)))
        delay = min(POLL_MAX_S, delay * 1.5)


_CONDITIONS: dict[int, threading.Condition] = {}
_CONDITIONS_LOCK = threading.Lock()


def _local_condition(endpoint_id: int) -> threading.Condition:
    with _CONDITIONS_LOCK:
        condition = _CONDITIONS.get(endpoint_id)
        if condition is None:
            condition = _CONDITIONS[endpoint_id] = threading.Condition()
        return condition


def _local_wake(endpoint_id: int) -> None:
    condition = _CONDITIONS.get(endpoint_id)
    if condition is not None:
        with condition:
            condition.notify()


# --- Redis ------------------------------------------------------------------------------

# KEYS: the lease set. ARGV: holder, limit, lease seconds.
_ACQUIRE = """
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_ms)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[2]) then
  local lease_ms = math.floor(tonumber(ARGV[3]) * 1000)
  redis.call('ZADD', KEYS[1], now_ms + lease_ms, ARGV[1])
  redis.call('PEXPIRE', KEYS[1], lease_ms + 60000)
  return 1
end
return 0
"""

# KEYS: the lease set, the wake list, the waiters counter. ARGV: holder. A token is pushed
# only while someone waits, and never more tokens than waiters.
_RELEASE = """
local removed = redis.call('ZREM', KEYS[1], ARGV[1])
local waiters = tonumber(redis.call('GET', KEYS[3]) or '0')
if removed == 1 and waiters > 0 then
  redis.call('LPUSH', KEYS[2], '1')
  redis.call('LTRIM', KEYS[2], 0, waiters - 1)
  redis.call('EXPIRE', KEYS[2], 600)
end
return removed
"""


@functools.cache
def _redis_client(url: str):
    import redis

    return redis.Redis.from_url(url, socket_keepalive=True, health_check_interval=30)


@functools.cache
def _scripts(url: str):
    client = _redis_client(url)
    return client.register_script(_ACQUIRE), client.register_script(_RELEASE)


def _redis_keys(endpoint_id: int) -> list[str]:
    prefix = f"coworkenv:llm-slots:{endpoint_id}"
    return [prefix, f"{prefix}:wake", f"{prefix}:waiters"]


def redis_in_flight(endpoint_id: int) -> int:
    """Leases held now on an endpoint (expired ones included until the next acquire)."""
    return _redis_client(settings.LLM_SLOT_REDIS_URL).zcard(_redis_keys(endpoint_id)[0])


def _redis_acquire(endpoint: ModelEndpoint, timeout: float, lease_s: float) -> SlotLease:
    url = settings.LLM_SLOT_REDIS_URL
    acquire, _ = _scripts(url)
    client = _redis_client(url)
    keys = _redis_keys(endpoint.pk)
    holder = uuid.uuid4().hex
    args = [holder, endpoint.max_concurrency, lease_s]
    lease = SlotLease(endpoint_id=endpoint.pk, index=-1, holder=holder, backend="redis")
    started = time.monotonic()
    while True:
        if acquire(keys=keys[:1], args=args, client=client):
            return lease
        waited = time.monotonic() - started
        if waited >= timeout:
            raise SlotTimeout(endpoint, waited)
        # Count ourselves as a waiter, look once more (a release may have come in between),
        # then block until a release pushes a token, or look again after REDIS_WAKE_S (a
        # lease that expired frees its slot without any release).
        pipe = client.pipeline()
        pipe.incr(keys[2]).expire(keys[2], 600).execute()
        try:
            if acquire(keys=keys[:1], args=args, client=client):
                return lease
            wait = min(REDIS_WAKE_S, timeout - waited)
            client.blpop([keys[1]], timeout=max(wait, 0.01))
        finally:
            client.decr(keys[2])


def _redis_release(lease: SlotLease) -> bool:
    url = settings.LLM_SLOT_REDIS_URL
    _, release = _scripts(url)
    keys = _redis_keys(lease.endpoint_id)
    return bool(release(keys=keys, args=[lease.holder], client=_redis_client(url)))


@contextlib.contextmanager
def endpoint_slot(endpoint: ModelEndpoint, *, timeout: float | None = None):
    """Hold one of the endpoint's concurrency slots for the duration of the block."""
    with timed("slot_wait"):
        lease = slot_acquire(endpoint=endpoint, timeout=timeout)
    try:
        yield lease
    finally:
        with timed("slot_release"):
            slot_release(lease=lease)
