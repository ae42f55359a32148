"""The heartbeat: one beater thread per process renews every claim registered with it."""

import os
import threading
import time
import warnings

import pytest
from django.db import OperationalError, connection
from django.utils import timezone

from apps.core import leases
from apps.core.leases import Heartbeat, heartbeat_every
from apps.core.models import Job, JobStatus
from apps.core.services import job_claim, job_create


@pytest.fixture
def fast_beats(settings):
    settings.JOB_STALE_AFTER_S = 0.8  # a beat every 0.2 s
    assert heartbeat_every() == pytest.approx(0.2)


class Renewals:
    """A ``renew`` that records when it was called and answers from a script."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.at: list[float] = []
        self.threads: set[str] = set()

    def __call__(self) -> bool:
        self.at.append(time.monotonic())
        self.threads.add(threading.current_thread().name)
        answer = self.answers.pop(0) if self.answers else True
        if isinstance(answer, Exception):
            raise answer
        return answer


def heartbeat_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "heartbeat"]


def wait_until(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_one_thread_renews_every_claim_and_only_the_lost_one_is_lost(fast_beats):
    kept, taken_over = Renewals(True, True, True), Renewals(True, False)
    started = time.monotonic()
    with Heartbeat(kept, name="kept") as a, Heartbeat(taken_over, name="taken over") as b:
        wait_until(lambda: b.lost and len(kept.at) >= 3)
        assert len(heartbeat_threads()) == 1
        assert not a.lost
    assert kept.threads == taken_over.threads == {"heartbeat"}
    assert len(taken_over.at) == 2  # not renewed after it was lost
    # every heartbeat_every(), the first one heartbeat_every() after the start (the upper
    # bounds leave room for a loaded machine)
    assert 0.17 <= kept.at[0] - started < 0.2 + 0.15
    assert 0.17 <= kept.at[1] - kept.at[0] < 0.2 + 0.15


def test_a_database_error_is_retried_at_the_next_beat(fast_beats):
    renew = Renewals(OperationalError("connection refused"), OperationalError("again"), True)
    with Heartbeat(renew) as beat:
        wait_until(lambda: len(renew.at) >= 4)
    assert not beat.lost
    assert 0.17 <= renew.at[1] - renew.at[0] < 0.2 + 0.15


def test_an_unexpected_error_stops_the_renewals_of_that_claim_only(fast_beats):
    broken, fine = Renewals(ValueError("bug")), Renewals()
    with Heartbeat(broken) as a, Heartbeat(fine) as b:
        wait_until(lambda: len(fine.at) >= 3)
    assert len(broken.at) == 1
    assert not a.lost and not b.lost  # it goes stale: the sweeper decides


def test_a_claim_registered_late_is_renewed_on_its_own_time(fast_beats):
    early, late = Renewals(), Renewals()
    with Heartbeat(early):
        time.sleep(0.15)  # just before the early claim's beat
        started = time.monotonic()
        with Heartbeat(late):
            wait_until(lambda: len(late.at) >= 1)
    # on its own schedule, not at the early claim's next beat 0.2 s later
    assert 0.17 <= late.at[0] - started < 0.2 + 0.15


def test_no_renewal_after_the_exit_and_the_exit_waits_for_one_under_way(fast_beats):
    entered, release = threading.Event(), threading.Event()

    def slow_renew():
        entered.set()
        release.wait(5)
        return True

    beat = Heartbeat(slow_renew)
    beat.__enter__()
    assert entered.wait(2)
    exited = threading.Event()
    threading.Thread(target=lambda: (beat.__exit__(None, None, None), exited.set())).start()
    assert not exited.wait(0.3)  # the renewal under way ends first
    release.set()
    assert exited.wait(2)
    calls = Renewals()
    beat.renew = calls
    time.sleep(0.5)
    assert calls.at == []


def test_the_thread_leaves_when_idle_and_comes_back(fast_beats, monkeypatch):
    monkeypatch.setattr(leases._Beater, "IDLE_S", 0.2)
    with Heartbeat(Renewals()):
        assert len(heartbeat_threads()) == 1
    wait_until(lambda: not heartbeat_threads())
    renew = Renewals()
    with Heartbeat(renew):
        wait_until(lambda: renew.at)


@pytest.mark.django_db
def test_no_beater_inside_a_tests_wrapping_transaction(fast_beats):
    assert connection.in_atomic_block
    renew = Renewals()
    with Heartbeat(renew):
        time.sleep(0.5)
    assert renew.at == []


@pytest.mark.django_db(transaction=True)
def test_the_beater_renews_on_its_own_connection(fast_beats, project):
    job = job_create(project=project, kind="test", title="A test job", total=1)
    job = job_claim(job_id=job.pk)
    claimed_at = job.heartbeat_at
    threads = set()

    def renew() -> bool:
        threads.add(threading.current_thread().name)
        mine = Job.objects.filter(pk=job.pk, claim_token=job.claim_token)
        return bool(mine.update(heartbeat_at=timezone.now()))

    with Heartbeat(renew) as beat:
        wait_until(lambda: Job.objects.get(pk=job.pk).heartbeat_at > claimed_at)
        Job.objects.filter(pk=job.pk).update(claim_token="someone else's")
        wait_until(lambda: beat.lost)
    assert threads == {"heartbeat"}
    assert Job.objects.get(pk=job.pk).status == JobStatus.RUNNING


def test_a_forked_child_starts_a_beater_of_its_own(fast_beats):
    with Heartbeat(Renewals()):
        assert heartbeat_threads()
        read, write = os.pipe()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads
            pid = os.fork()
        if pid == 0:  # the child: none of its parent's threads, a beater of its own
            try:
                renew = Renewals()
                with Heartbeat(renew):
                    deadline = time.monotonic() + 3
                    while not renew.at and time.monotonic() < deadline:
                        time.sleep(0.02)
                os.write(write, b"renewed" if renew.at else b"not renewed")
            finally:
                os._exit(0)
        os.close(write)
        answer = os.read(read, 100)
        os.waitpid(pid, 0)
    assert answer == b"renewed"
