"""One claimable unit (``apps.core.claims``): a claim one worker wins, writes fenced by its
token, a give-back that counts no dead worker, and a sweep that sends a lost row once."""

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.core.models import Job, JobStatus
from apps.core.services import JOBS, job_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def job(project, author):
    return job_create(project=project, kind="test", title="claimed", started_by=author)


def test_one_claim_wins_and_a_stale_one_is_taken_over(job):
    now = timezone.now()
    first = JOBS.claim(job.pk, now=now, worker="w1", status=JobStatus.RUNNING)
    assert first is not None
    assert JOBS.claim(job.pk, now=now, worker="w2", status=JobStatus.RUNNING) is None
    row = Job.objects.get(pk=job.pk)
    assert (row.status, row.attempts, row.worker, row.claim_token) == (
        JobStatus.RUNNING,
        1,
        "w1",
        first.token,
    )
    assert row.started_at == row.heartbeat_at == now

    later = now + timedelta(seconds=60)
    second = JOBS.claim(job.pk, now=later, before=later - timedelta(seconds=30), worker="w2")
    assert second is not None and second.token != first.token
    row.refresh_from_db()
    assert (row.attempts, row.worker, row.started_at) == (2, "w2", now)  # start kept
    # the first holder is fenced off every write
    assert not first.renew(message="late")
    assert not first.finish(status=JobStatus.SUCCEEDED)
    assert not first.give_back(status=JobStatus.PENDING)
    assert second.renew(message="mine")
    assert Job.objects.get(pk=job.pk).message == "mine"


def test_a_claim_given_back_is_claimable_at_once_and_not_counted(job):
    claim = JOBS.claim(job.pk, status=JobStatus.RUNNING)
    assert claim.give_back(status=JobStatus.PENDING)
    row = Job.objects.get(pk=job.pk)
    assert (row.status, row.attempts, row.claim_token, row.heartbeat_at) == (
        JobStatus.PENDING,
        0,
        "",
        None,
    )
    assert not claim.renew()
    assert JOBS.claim(job.pk, status=JobStatus.RUNNING) is not None


def test_a_finished_row_is_never_claimed(job):
    claim = JOBS.claim(job.pk, status=JobStatus.RUNNING)
    assert claim.finish(status=JobStatus.SUCCEEDED)
    far = timezone.now() + timedelta(days=1)
    assert JOBS.claim(job.pk, now=far, status=JobStatus.RUNNING) is None


def test_the_sweep_sends_a_lost_row_once_and_again_after_a_failed_send(job):
    now = timezone.now()
    long_ago = now - timedelta(hours=1)
    Job.objects.filter(pk=job.pk).update(enqueued_at=long_ago)
    rows = Job.objects.filter(pk=job.pk)
    answers = [False, True]
    sent = []

    def send(pk):
        sent.append(pk)
        return answers.pop(0)

    assert JOBS.sweep(rows, send=send, now=now) == []  # the broker was down
    assert Job.objects.get(pk=job.pk).enqueued_at == long_ago  # so the next sweep tries
    assert JOBS.sweep(rows, send=send, now=now) == [job.pk]
    assert JOBS.sweep(rows, send=send, now=now) == []  # sent in this period
    assert sent == [job.pk, job.pk]
    assert Job.objects.get(pk=job.pk).enqueued_at == now

    JOBS.claim(job.pk, now=now, status=JobStatus.RUNNING)
    Job.objects.filter(pk=job.pk).update(enqueued_at=long_ago)
    later = now + timedelta(hours=2)
    just_before = now - timedelta(seconds=1)
    assert JOBS.sweep(rows, send=lambda pk: True, now=later, before=just_before) == []  # alive
    assert JOBS.sweep(rows, send=lambda pk: True, now=later) == [job.pk]  # silent since
