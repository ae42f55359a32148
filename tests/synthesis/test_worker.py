"""A real Celery worker — or one of its pool processes — is killed in the middle of a
synthesis job; the job still ends with exactly the requested number of environments, the
sweeper (Celery beat) sending the interrupted slots again on its own."""

import copy
import os
import signal
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.core.models import JobStatus
from apps.environments.models import Environment
from apps.llm.services import endpoint_create
from apps.synthesis.models import SlotStatus, SynthesisAttempt, SynthesisSlot
from apps.synthesis.services import synthesis_start
from tests.llm_server import LoopbackLLMServer, Reply
from tests.synthesis.conftest import TEST_KEY, TEST_KEY_ENV
from tests.synthesis.test_llm_synthesis import valid_spec
from tests.workers import BeatProcess, wait_for, worker_group

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

N = 6
LEASE_S = 3


@pytest.fixture
def short_lease(settings, monkeypatch):
    settings.JOB_STALE_AFTER_S = LEASE_S
    monkeypatch.setenv("JOB_STALE_AFTER_S", str(LEASE_S))  # the worker processes' settings
    monkeypatch.setenv("JOB_SWEEP_EVERY_S", "1")
    monkeypatch.setenv(TEST_KEY_ENV, TEST_KEY)


@pytest.fixture
def slow_server():
    spec = valid_spec()
    with LoopbackLLMServer(
        api_key=TEST_KEY, latency=1.0, responder=lambda request: Reply.json(copy.deepcopy(spec))
    ) as server:
        yield server


def test_killed_worker_mid_job_then_another_finishes_exactly_n(
    short_lease, slow_server, project, author, capabilities, tmp_path
):
    endpoint = endpoint_create(
        project=project,
        created_by=author,
        name="slow",
        base_url=slow_server.base_url,
        model="loop",
        api_key_env=TEST_KEY_ENV,
        request_timeout_s=10,
        max_concurrency=2,
    )
    with worker_group(tmp_path) as start:
        start("beat", kind=BeatProcess)
        first = start("worker1", concurrency=2)
        synthesis = synthesis_start(
            project=project,
            user=author,
            capabilities=capabilities,
            count=N,
            generator="llm",
            endpoint=endpoint,
            tasks_per_environment=2,
            seed=1,
        )
        slots = SynthesisSlot.objects.filter(synthesis=synthesis)

        def mid_job():
            # A slot finished, and another was claimed a moment ago (its model request has
            # about a second left when the worker is killed).
            just_claimed = timezone.now() - timedelta(seconds=0.3)
            return (
                slots.filter(status=SlotStatus.VALID).exists()
                and slots.filter(status=SlotStatus.DRAFTING, started_at__gte=just_claimed).exists()
            )

        wait_for(mid_job, timeout=90, interval=0.05, message="a finished and a drafting slot")
        first.kill()
        interrupted = set(slots.filter(status=SlotStatus.DRAFTING).values_list("pk", flat=True))
        assert interrupted
        assert slots.exclude(status__in=[SlotStatus.VALID]).exists()

        start("worker2", concurrency=2)

        def finished():
            synthesis.job.refresh_from_db()
            return synthesis.job.status not in (JobStatus.PENDING, JobStatus.RUNNING)

        wait_for(finished, timeout=120, interval=0.3, message="the resumed job to finish")

    job = synthesis.job
    assert job.status == JobStatus.SUCCEEDED, job.message
    assert (job.progress_done, job.progress_total) == (N, N)
    assert list(slots.values_list("status", flat=True)) == [SlotStatus.VALID] * N
    environment_ids = list(slots.values_list("environment_id", flat=True))
    assert None not in environment_ids and len(set(environment_ids)) == N
    assert Environment.objects.filter(project=project).count() == N
    # Every slot has exactly one stored draft, and the interrupted ones were taken over.
    assert SynthesisAttempt.objects.filter(slot__synthesis=synthesis).count() == N
    assert all(
        claims >= 2 for claims in slots.filter(pk__in=interrupted).values_list("claims", flat=True)
    )


def test_a_killed_pool_process_does_not_leave_its_slot_drafting(
    short_lease, slow_server, project, author, capabilities, tmp_path
):
    endpoint = endpoint_create(
        project=project,
        created_by=author,
        name="slow",
        base_url=slow_server.base_url,
        model="loop",
        api_key_env=TEST_KEY_ENV,
        request_timeout_s=10,
        max_concurrency=2,
    )
    with worker_group(tmp_path) as start:
        start("beat", kind=BeatProcess)
        # Three pool processes for two LLM slots at a time: one stays free for the sweeps.
        worker = start("worker", concurrency=3)
        synthesis = synthesis_start(
            project=project,
            user=author,
            capabilities=capabilities,
            count=3,
            generator="llm",
            endpoint=endpoint,
            tasks_per_environment=2,
            seed=2,
        )
        slots = SynthesisSlot.objects.filter(synthesis=synthesis)
        slot = wait_for(
            lambda: slots.filter(status=SlotStatus.DRAFTING).first(),
            timeout=60,
            interval=0.05,
            message="a drafting slot",
        )
        pid = int(slot.worker.rsplit(":", 1)[1])
        assert pid in worker.pool_children()
        os.kill(pid, signal.SIGKILL)

        def finished():
            synthesis.job.refresh_from_db()
            return synthesis.job.status not in (JobStatus.PENDING, JobStatus.RUNNING)

        wait_for(finished, timeout=60, interval=0.3, message="the job to finish")
        assert worker.process.poll() is None  # the worker itself lived on

    job = synthesis.job
    assert job.status == JobStatus.SUCCEEDED, job.message
    assert list(slots.values_list("status", flat=True)) == [SlotStatus.VALID] * 3
    assert slots.filter(environment__isnull=False).count() == 3
    assert Environment.objects.filter(project=project).count() == 3
    assert SynthesisAttempt.objects.filter(slot__synthesis=synthesis).count() == 3
    taken_over = SynthesisSlot.objects.get(pk=slot.pk)
    assert taken_over.claims == 2
    assert taken_over.worker != slot.worker
