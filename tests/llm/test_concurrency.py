"""The per-endpoint concurrency limit, shared by threads and processes: slot rows in the
database, lock files (one host) or a Redis semaphore (every host)."""

import os
import subprocess
import sys
import threading
import warnings
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from apps.llm import concurrency
from apps.llm.client import llm_chat
from apps.llm.concurrency import (
    SlotTimeout,
    _local_condition,
    _redis_client,
    _redis_keys,
    endpoint_slot,
    redis_in_flight,
    slot_acquire,
    slot_release,
    slot_try_acquire,
)
from apps.llm.models import EndpointSlot, LLMCall, LLMCallStatus
from apps.llm.services import endpoint_create, endpoint_update
from tests.llm.conftest import TEST_KEY_ENV
from tests.llm_server import Reply
from tests.workers import ROOT, wait_for, worker_environment

REDIS_URL = os.environ.get("CELERY_BROKER_URL", "")
BACKENDS = [
    "database",
    "file",
    pytest.param(
        "redis",
        marks=pytest.mark.skipif(
            not REDIS_URL.startswith("redis://"),
            reason="The Redis semaphore needs CELERY_BROKER_URL=redis://…",
        ),
    ),
]


@pytest.fixture(autouse=True)
def database_slots(settings):
    """The slot-row tests below exercise the database backend, whatever the default."""
    settings.LLM_SLOT_BACKEND = "database"


@pytest.fixture(params=BACKENDS)
def backend(request, settings, monkeypatch):
    """Each backend in turn, here and in the processes a test starts."""
    settings.LLM_SLOT_BACKEND = request.param
    monkeypatch.setenv("LLM_SLOT_BACKEND", request.param)
    if request.param == "redis":
        settings.LLM_SLOT_REDIS_URL = REDIS_URL
    return request.param


def _slots(endpoint):
    return list(
        EndpointSlot.objects.filter(endpoint=endpoint)
        .order_by("index")
        .values_list("index", "holder")
    )


@pytest.mark.django_db
def test_slots_follow_max_concurrency(endpoint):
    assert _slots(endpoint) == [(0, ""), (1, "")]
    endpoint = endpoint_update(endpoint=endpoint, max_concurrency=4)
    assert [i for i, _ in _slots(endpoint)] == [0, 1, 2, 3]
    endpoint = endpoint_update(endpoint=endpoint, max_concurrency=1)
    assert [i for i, _ in _slots(endpoint)] == [0]


@pytest.mark.django_db
def test_acquire_up_to_the_limit_then_none_and_release(endpoint):
    first = slot_try_acquire(endpoint=endpoint)
    second = slot_try_acquire(endpoint=endpoint)
    assert {first.index, second.index} == {0, 1}
    assert first.holder != second.holder
    assert slot_try_acquire(endpoint=endpoint) is None
    assert slot_release(lease=first) is True
    assert slot_release(lease=first) is False  # already free
    third = slot_try_acquire(endpoint=endpoint)
    assert third.index == first.index


@pytest.mark.django_db
def test_slot_acquire_times_out(endpoint):
    with (
        endpoint_slot(endpoint),
        endpoint_slot(endpoint),
        pytest.raises(SlotTimeout, match="All 2 concurrent-request slots"),
    ):
        slot_acquire(endpoint=endpoint, timeout=0.1)
    assert _slots(endpoint) == [(0, ""), (1, "")]


@pytest.mark.django_db
def test_expired_lease_is_reclaimed_and_the_old_holder_cannot_free_it(endpoint):
    stale = slot_try_acquire(endpoint=endpoint)
    other = slot_try_acquire(endpoint=endpoint)
    # The first holder's worker died: its lease runs out.
    EndpointSlot.objects.filter(holder=stale.holder).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    fresh = slot_try_acquire(endpoint=endpoint)
    assert fresh is not None
    assert fresh.index == stale.index
    assert slot_release(lease=stale) is False  # a late release does not free the new lease
    assert slot_try_acquire(endpoint=endpoint) is None
    slot_release(lease=fresh)
    slot_release(lease=other)


@pytest.mark.django_db
def test_lease_lasts_the_request_timeout_plus_a_margin(endpoint):
    before = timezone.now()
    lease = slot_try_acquire(endpoint=endpoint)
    slot = EndpointSlot.objects.get(holder=lease.holder)
    assert slot.lease_expires_at - before >= timedelta(seconds=30.5)
    assert slot.lease_expires_at - before < timedelta(seconds=32)


@pytest.mark.django_db
def test_lowering_the_limit_while_held_never_hands_out_the_extra_slot(endpoint):
    low = slot_try_acquire(endpoint=endpoint)
    high = slot_try_acquire(endpoint=endpoint)
    slot_release(lease=low)
    endpoint = endpoint_update(endpoint=endpoint, max_concurrency=1)
    # The held slot 1 stays until released; slot 0 is the only one handed out.
    assert [i for i, _ in _slots(endpoint)] == [0, 1]
    again = slot_try_acquire(endpoint=endpoint)
    assert again.index == 0
    assert slot_try_acquire(endpoint=endpoint) is None
    slot_release(lease=high)
    assert slot_try_acquire(endpoint=endpoint) is None


@pytest.mark.django_db
def test_missing_slot_rows_are_healed(endpoint):
    EndpointSlot.objects.filter(endpoint=endpoint).delete()
    with endpoint_slot(endpoint, timeout=1) as lease:
        assert lease.index in (0, 1)
    assert len(_slots(endpoint)) == 2


@pytest.fixture
def slow_endpoint(project, llm_server, api_key):
    """Limit 2; a timeout long enough for requests the test holds open."""
    return endpoint_create(
        project=project,
        name="gated",
        base_url=llm_server.base_url,
        model="m",
        api_key_env=TEST_KEY_ENV,
        request_timeout_s=20,
        max_concurrency=2,
    )


@pytest.mark.django_db
def test_each_backend_hands_out_exactly_the_limit_then_times_out(backend, endpoint):
    first = slot_acquire(endpoint=endpoint, timeout=1)
    second = slot_acquire(endpoint=endpoint, timeout=1)
    assert (first.backend, second.backend) == (backend, backend)
    assert first.holder != second.holder
    with pytest.raises(SlotTimeout, match="All 2 concurrent-request slots") as refused:
        slot_acquire(endpoint=endpoint, timeout=0.2)
    assert refused.value.waited_s >= 0.2  # it waited out its timeout before giving up
    assert slot_release(lease=first) is True
    assert slot_release(lease=first) is False  # a second release frees nothing
    third = slot_acquire(endpoint=endpoint, timeout=1)
    with pytest.raises(SlotTimeout):
        slot_acquire(endpoint=endpoint, timeout=0.05)
    slot_release(lease=second)
    slot_release(lease=third)


@pytest.mark.django_db
def test_lock_files_try_the_slot_this_process_freed_first(settings, endpoint, monkeypatch):
    """At a busy endpoint nearly every lock file is taken: an acquire tries first the slot
    this process released last, on the files it keeps open (none is opened again)."""
    settings.LLM_SLOT_BACKEND = "file"
    endpoint = endpoint_update(endpoint=endpoint, max_concurrency=6)
    leases = [slot_acquire(endpoint=endpoint, timeout=1) for _ in range(6)]
    assert sorted(lease.index for lease in leases) == [0, 1, 2, 3, 4, 5]
    slot_release(lease=leases[1])
    slot_release(lease=leases[4])
    opened = []
    real_open = os.open

    def counted_open(path, *args):
        opened.append(path)
        return real_open(path, *args)

    monkeypatch.setattr(os, "open", counted_open)
    again = slot_acquire(endpoint=endpoint, timeout=1)
    assert again.index == leases[4].index
    assert opened == []
    for lease in [*leases[:1], *leases[2:4], leases[5], again]:
        slot_release(lease=lease)


def _waiters(backend, endpoint_id):
    """How many acquires of this process are blocked until a release (or a poll) wakes them."""
    if backend == "redis":
        return int(_redis_client(REDIS_URL).get(_redis_keys(endpoint_id)[2]) or 0)
    return len(_local_condition(endpoint_id)._waiters)


@pytest.mark.django_db(transaction=True)  # the waiting thread has a connection of its own
def test_a_waiter_is_woken_by_the_release_itself(backend, endpoint, monkeypatch):
    """With its polls an hour apart, a waiter gets the freed slot only if the release wakes it."""
    monkeypatch.setattr(concurrency, "POLL_MIN_S", 3600.0)
    monkeypatch.setattr(concurrency, "POLL_MAX_S", 3600.0)
    monkeypatch.setattr(concurrency, "REDIS_WAKE_S", 3600.0)
    held = [slot_acquire(endpoint=endpoint, timeout=1) for _ in range(2)]
    got = []

    def waiter():
        try:
            lease = slot_acquire(endpoint=endpoint, timeout=3600)
            got.append(lease)
            slot_release(lease=lease)
        finally:
            connection.close()

    thread = threading.Thread(target=waiter, daemon=True)
    thread.start()
    wait_for(
        lambda: _waiters(backend, endpoint.pk) == 1, timeout=10, interval=0.01, message="a waiter"
    )
    slot_release(lease=held[0])
    thread.join(10)
    slot_release(lease=held[1])
    assert len(got) == 1, "the waiter slept through the release"


@pytest.mark.django_db
def test_redis_leases_expire_and_follow_a_lowered_limit(settings, endpoint):
    if not REDIS_URL.startswith("redis://"):
        pytest.skip("The Redis semaphore needs CELERY_BROKER_URL=redis://…")
    settings.LLM_SLOT_BACKEND = "redis"
    settings.LLM_SLOT_REDIS_URL = REDIS_URL
    dead = slot_acquire(endpoint=endpoint, timeout=1, lease_s=0.2)  # its worker was killed
    alive = slot_acquire(endpoint=endpoint, timeout=1)
    assert redis_in_flight(endpoint.pk) == 2
    taken_over = slot_acquire(endpoint=endpoint, timeout=2)  # once the dead lease expires
    assert slot_release(lease=dead) is False
    endpoint = endpoint_update(endpoint=endpoint, max_concurrency=1)
    slot_release(lease=alive)
    with pytest.raises(SlotTimeout):  # one still held, and the limit is one now
        slot_acquire(endpoint=endpoint, timeout=0.1)
    slot_release(lease=taken_over)
    slot_release(lease=slot_acquire(endpoint=endpoint, timeout=1))
    assert redis_in_flight(endpoint.pk) == 0


@pytest.mark.django_db(transaction=True)
def test_threads_never_exceed_the_limit(backend, slow_endpoint, llm_server):
    gate = threading.Event()

    def held_answer(request):
        gate.wait(15)  # keep the request in flight until the test lets go
        return Reply.text("done")

    llm_server.responder = held_answer
    results, errors = [], []

    def worker():
        try:
            results.append(
                llm_chat(
                    endpoint=slow_endpoint,
                    messages=[{"role": "user", "content": "hi"}],
                    purpose="test.concurrency",
                )
            )
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(5)]
    for thread in threads:
        thread.start()
    try:
        # Two requests get in (the limit is reachable) ...
        wait_for(lambda: llm_server.in_flight == 2, timeout=15, message="2 requests in flight")
        # ... and while they are held, the other three wait for a slot.
        wait_for(lambda: _waiters(backend, slow_endpoint.pk) == 3, timeout=15, message="3 waiters")
        assert llm_server.in_flight == 2
        assert len(llm_server.chat_requests()) == 2
    finally:
        gate.set()
        for thread in threads:
            thread.join(30)
    assert errors == []
    assert len(results) == 5
    assert llm_server.max_in_flight == 2
    assert LLMCall.objects.filter(status=LLMCallStatus.OK).count() == 5
    assert _slots(slow_endpoint) == [(0, ""), (1, "")]


CHILD = """
import sys, django
django.setup()
from apps.llm.client import llm_chat
from apps.llm.models import ModelEndpoint
endpoint = ModelEndpoint.objects.get(pk=int(sys.argv[1]))
print("ready", flush=True)
sys.stdin.readline()
for n in range(3):
    llm_chat(endpoint=endpoint, messages=[{"role": "user", "content": str(n)}], purpose="test.p")
print("done", flush=True)
"""


@pytest.mark.django_db(transaction=True)
def test_two_processes_share_the_limit(backend, slow_endpoint, llm_server):
    endpoint = endpoint_update(endpoint=slow_endpoint, max_concurrency=1)
    llm_server.latency = 0.2
    llm_server.responder = lambda request: Reply.text("ok")
    env = worker_environment()
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(endpoint.pk)],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        for child in children:
            assert child.stdout.readline().strip() == "ready", child.stderr.read()
        for child in children:  # both start contending at once
            child.stdin.write("go\n")
            child.stdin.flush()
        for child in children:
            out, err = child.communicate(timeout=60)
            assert child.returncode == 0, err
            assert out.strip() == "done"
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
    assert len(llm_server.chat_requests()) == 6
    assert llm_server.max_in_flight == 1
    assert LLMCall.objects.filter(purpose="test.p", status=LLMCallStatus.OK).count() == 6


@pytest.mark.django_db
def test_lock_files_follow_a_lowered_limit_and_a_second_release_frees_nothing(settings, endpoint):
    settings.LLM_SLOT_BACKEND = "file"
    first = slot_acquire(endpoint=endpoint, timeout=1)
    second = slot_acquire(endpoint=endpoint, timeout=1)
    assert {first.index, second.index} == {0, 1}
    slot_release(lease=first if first.index == 0 else second)
    held = second if first.index == 0 else first  # slot 1, above the lowered limit
    endpoint = endpoint_update(endpoint=endpoint, max_concurrency=1)
    again = slot_acquire(endpoint=endpoint, timeout=1)
    assert again.index == 0
    with pytest.raises(SlotTimeout):
        slot_acquire(endpoint=endpoint, timeout=0.05)
    slot_release(lease=held)
    with pytest.raises(SlotTimeout):  # slot 1 is free, but the limit is one now
        slot_acquire(endpoint=endpoint, timeout=0.05)
    assert slot_release(lease=again) is True
    assert slot_release(lease=again) is False


@pytest.mark.django_db
def test_a_forked_child_does_not_share_its_parents_lock_files(settings, endpoint):
    """A fork inherits the parent's open lock files, and a lock taken through one would be
    the parent's too: the child opens its own, so the limit holds between them."""
    settings.LLM_SLOT_BACKEND = "file"
    slot_release(lease=slot_acquire(endpoint=endpoint, timeout=1))  # files open, none held
    slot_release(lease=slot_acquire(endpoint=endpoint, timeout=1))
    to_parent, from_child = os.pipe()
    to_child, from_parent = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads
        pid = os.fork()
    if pid == 0:
        try:
            from apps.llm.concurrency import _file_try_acquire

            held = [_file_try_acquire(endpoint), _file_try_acquire(endpoint)]
            os.write(from_child, b"held" if all(held) else b"not held")
            os.read(to_child, 10)  # hold them until the parent has tried
        finally:
            os._exit(0)
    try:
        assert os.read(to_parent, 100) == b"held"
        with pytest.raises(SlotTimeout):
            slot_acquire(endpoint=endpoint, timeout=0.1)
    finally:
        os.write(from_parent, b"done")
        os.waitpid(pid, 0)
    slot_release(lease=slot_acquire(endpoint=endpoint, timeout=1))  # the child's are freed
