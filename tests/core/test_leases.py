"""The heartbeat: one beater thread per process renews every claim registered with it.

The schedule is tested on a beater of the test's own whose clock is fake: the test moves the
clock, wakes the beater and waits until the beater waits again, which it does only once it
has renewed everything due by the clock's time. Nothing depends on how fast the machine is.
"""

import os
import threading
import warnings
from datetime import timedelta

import pytest
from django.db import OperationalError, connection

from apps.core import leases
from apps.core.leases import Heartbeat, heartbeat_every
from apps.core.models import Job, JobStatus
from apps.core.services import job_claim, job_create

EVERY = 10.0  # heartbeat_every() at JOB_STALE_AFTER_S = 40
HANG = 10.0  # seconds, only against a hang: nothing waits that long when the code is right


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class CountedWaits(threading.Condition):
    """The beater's condition, counting the waits the beater starts: it starts one only when
    nothing is due by the clock's time (a wait that times out only looks again)."""

    def __init__(self):
        super().__init__(threading.Lock())
        self.waits = 0
        self.counted = threading.Condition()

    def wait(self, timeout=None):
        with self.counted:
            self.waits += 1
            self.counted.notify_all()
        return super().wait(timeout)


class Driven:
    """A beater of the test's own on a fake clock, and the means to move it on."""

    def __init__(self):
        self.clock = FakeClock()
        self.beater = leases._Beater(clock=self.clock)
        self.beater._changed = self.changed = CountedWaits()
        self.beater.IDLE_S = 6 * EVERY  # it leaves only when a test moves the clock that far

    def nudge(self, seconds: float = 0.0) -> int:
        """Move the clock on and wake the beater; the number of waits it had started."""
        with self.changed:
            self.clock.now += seconds
            self.changed.notify_all()
            return self.changed.waits

    def settle(self, waits: int) -> None:
        """Return once the beater has started a wait after the first ``waits``."""
        with self.changed.counted:
            assert self.changed.counted.wait_for(lambda: self.changed.waits > waits, HANG)

    def advance(self, seconds: float = 0.0) -> None:
        """Move the clock on and return once the beater has renewed all that is due."""
        self.settle(self.nudge(seconds))

    def leave(self) -> None:
        """Let the beater's thread leave, claims or none (after a test that failed)."""
        thread = self.beater._thread
        if thread is None:
            return
        with self.changed:
            self.beater._claims.clear()
        self.advance()  # idle from now
        self.nudge(self.beater.IDLE_S)
        thread.join(HANG)
        assert not thread.is_alive()


@pytest.fixture
def beats(settings, monkeypatch):
    settings.JOB_STALE_AFTER_S = 40
    assert heartbeat_every() == EVERY
    driven = Driven()
    monkeypatch.setattr(leases, "_the_beater", driven.beater)
    yield driven
    driven.leave()


class Renewals:
    """A ``renew`` that records the clock's time of each call and answers from a script;
    each call takes ``takes`` seconds of the clock."""

    def __init__(self, clock: FakeClock, *answers, takes: float = 0.0):
        self.clock = clock
        self.answers = list(answers)
        self.takes = takes
        self.at: list[float] = []
        self.threads: set[threading.Thread] = set()

    def __call__(self) -> bool:
        self.at.append(self.clock())
        self.threads.add(threading.current_thread())
        self.clock.now += self.takes
        answer = self.answers.pop(0) if self.answers else True
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_one_thread_renews_every_claim_and_only_the_lost_one_is_lost(beats):
    kept = Renewals(beats.clock, True, True, True)
    taken_over = Renewals(beats.clock, True, False)
    with Heartbeat(kept, name="kept") as a, Heartbeat(taken_over, name="taken over") as b:
        for _ in range(3):
            beats.advance(EVERY)
        assert b.lost and not a.lost
    assert len(kept.at) == 3
    assert len(taken_over.at) == 2  # not renewed after it was lost
    assert kept.threads == taken_over.threads == {beats.beater._thread}
    assert beats.beater._thread.name == "heartbeat"


def test_a_renewal_is_due_a_beat_after_the_registration_then_after_the_last_ended(beats):
    renew = Renewals(beats.clock, takes=3.0)
    registered = beats.clock.now
    with Heartbeat(renew) as beat:
        assert beat._due == registered + EVERY
        beats.advance(EVERY - 0.5)
        assert renew.at == []
        beats.advance(0.5)
        assert renew.at == [registered + EVERY]
        ended = registered + EVERY + 3.0
        assert beats.clock.now == ended
        assert beat._due == ended + EVERY
        beats.advance(EVERY - 0.5)
        assert len(renew.at) == 1
        beats.advance(0.5)
        assert renew.at == [registered + EVERY, ended + EVERY]


def test_a_database_error_is_retried_at_the_next_beat(beats):
    renew = Renewals(beats.clock, OperationalError("refused"), OperationalError("again"), True)
    registered = beats.clock.now
    with Heartbeat(renew) as beat:
        for _ in range(3):
            beats.advance(EVERY)
        assert renew.at == [registered + EVERY, registered + 2 * EVERY, registered + 3 * EVERY]
        assert not beat.lost


def test_an_unexpected_error_stops_the_renewals_of_that_claim_only(beats):
    broken, fine = Renewals(beats.clock, ValueError("bug")), Renewals(beats.clock)
    with Heartbeat(broken) as a, Heartbeat(fine) as b:
        for _ in range(3):
            beats.advance(EVERY)
    assert len(broken.at) == 1
    assert len(fine.at) == 3
    assert not a.lost and not b.lost  # it goes stale: the sweeper decides


def test_a_claim_registered_late_is_renewed_on_its_own_time(beats):
    early, late = Renewals(beats.clock), Renewals(beats.clock)
    registered = beats.clock.now
    with Heartbeat(early):
        beats.advance(EVERY / 2)
        with Heartbeat(late) as beat:
            assert beat._due == registered + 1.5 * EVERY
            beats.advance(EVERY / 2)
            assert early.at == [registered + EVERY]
            assert late.at == []  # not at the early claim's beat
            beats.advance(EVERY / 2)
            assert late.at == [registered + 1.5 * EVERY]
            assert early.at == [registered + EVERY]


def test_claims_due_within_a_tenth_of_a_beat_are_renewed_in_the_same_wake_up(beats):
    first, second, third = Renewals(beats.clock), Renewals(beats.clock), Renewals(beats.clock)
    registered = beats.clock.now
    with Heartbeat(first) as a:
        beats.advance(EVERY / 20)
        with Heartbeat(second) as b:  # due a twentieth of a beat after the first
            beats.advance(EVERY / 10)
            with Heartbeat(third) as c:  # due more than a tenth after the first
                third_due = c._due
                beats.advance(registered + EVERY - beats.clock.now)
                assert first.at == second.at == [registered + EVERY]  # the second early
                assert third.at == []
                assert a._due == b._due == registered + 2 * EVERY
                beats.advance(third_due - beats.clock.now)
                assert third.at == [third_due]
                assert len(first.at) == len(second.at) == 1


def test_a_claim_due_before_the_beaters_wait_ends_wakes_it(beats):
    with Heartbeat(Renewals(beats.clock)):
        pass
    beats.advance()
    assert beats.beater._wake_at == beats.clock.now + beats.beater.IDLE_S  # idle
    waits = beats.changed.waits
    with Heartbeat(Renewals(beats.clock)) as beat:
        beats.settle(waits)  # the registration woke it: the clock did not move
        assert beats.beater._wake_at == beat._due


class Renewing:
    """A claim's renewal lock that tells when an ``acquire`` finds it taken and waits."""

    def __init__(self):
        self._lock = threading.Lock()
        self.waited_for = threading.Event()

    def acquire(self, blocking=True, timeout=-1):
        if self._lock.acquire(blocking=False):
            return True
        self.waited_for.set()
        return self._lock.acquire(blocking, timeout)

    def release(self):
        self._lock.release()

    def __enter__(self):
        self.acquire()

    def __exit__(self, *exc):
        self.release()


def test_the_exit_waits_for_a_renewal_under_way_and_no_renewal_comes_after(beats):
    entered, release = threading.Event(), threading.Event()

    def slow_renew():
        entered.set()
        release.wait(HANG)
        return True

    beat = Heartbeat(slow_renew)
    beat._renewing = renewing = Renewing()
    beat.__enter__()
    beats.nudge(EVERY)
    assert entered.wait(HANG)
    exited = threading.Event()
    threading.Thread(target=lambda: (beat.__exit__(None, None, None), exited.set())).start()
    assert renewing.waited_for.wait(HANG)  # the exit waits for the renewal under way
    assert not exited.is_set()
    release.set()
    assert exited.wait(HANG)
    calls = Renewals(beats.clock)
    beat.renew = calls
    beats.advance(2 * EVERY)
    assert calls.at == []


def test_a_claim_that_exits_while_the_beater_renews_another_due_with_it_is_not_renewed(beats):
    entered, release = threading.Event(), threading.Event()

    def slow_renew():
        entered.set()
        release.wait(HANG)
        return True

    late = Renewals(beats.clock)
    first = Heartbeat(slow_renew)
    first.__enter__()
    beats.advance(EVERY / 20)
    with Heartbeat(late):  # due in the same wake-up, after the first
        beats.nudge(EVERY)
        assert entered.wait(HANG)
    release.set()
    beats.advance()
    first.__exit__(None, None, None)
    assert late.at == []


def test_the_thread_leaves_when_idle_and_comes_back(beats):
    with Heartbeat(Renewals(beats.clock)):
        thread = beats.beater._thread
        assert thread.is_alive()
    beats.advance()  # idle from now
    beats.advance(beats.beater.IDLE_S - 0.5)
    assert beats.beater._thread is thread
    beats.nudge(0.5)
    thread.join(HANG)
    assert not thread.is_alive()
    assert beats.beater._thread is None
    renew = Renewals(beats.clock)
    with Heartbeat(renew):
        again = beats.beater._thread
        assert again is not thread
        beats.advance(EVERY)
    assert renew.threads == {again}


@pytest.mark.django_db
def test_no_beater_inside_a_tests_wrapping_transaction(beats):
    assert connection.in_atomic_block
    with Heartbeat(Renewals(beats.clock)):
        assert beats.beater._claims == {}
        assert beats.beater._thread is None


@pytest.mark.django_db(transaction=True)
def test_the_beater_renews_on_its_own_connection(beats, project):
    job = job_create(project=project, kind="test", title="A test job", total=1)
    job = job_claim(job_id=job.pk)
    renewed_at = job.heartbeat_at + timedelta(minutes=1)
    threads = set()

    def renew() -> bool:
        threads.add(threading.current_thread())
        mine = Job.objects.filter(pk=job.pk, claim_token=job.claim_token)
        return bool(mine.update(heartbeat_at=renewed_at))

    with Heartbeat(renew) as beat:
        beats.advance(EVERY)
        assert Job.objects.get(pk=job.pk).heartbeat_at == renewed_at
        Job.objects.filter(pk=job.pk).update(claim_token="someone else's")
        beats.advance(EVERY)
        assert beat.lost
    assert threads == {beats.beater._thread}
    assert Job.objects.get(pk=job.pk).status == JobStatus.RUNNING


@pytest.fixture
def fast_beats(settings):
    settings.JOB_STALE_AFTER_S = 0.8  # a beat every 0.2 s
    assert heartbeat_every() == pytest.approx(0.2)


def test_a_forked_child_starts_a_beater_of_its_own(fast_beats):
    # in real time: the child's beater is a new one, on the real clock
    with Heartbeat(lambda: True):
        assert leases._beater()._thread.is_alive()
        read, write = os.pipe()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads
            pid = os.fork()
        if pid == 0:  # the child: none of its parent's threads, a beater of its own
            try:
                renewed = threading.Event()

                def renew() -> bool:
                    renewed.set()
                    return True

                with Heartbeat(renew):
                    renewed.wait(HANG)
                os.write(write, b"renewed" if renewed.is_set() else b"not renewed")
            finally:
                os._exit(0)
        os.close(write)
        answer = os.read(read, 100)
        os.waitpid(pid, 0)
    assert answer == b"renewed"
