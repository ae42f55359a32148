"""The synthesis sweeper: slots sent to the workers that nobody works on are sent again, once
per period; slots worked in process are left alone; a job whose last refresh was lost ends."""

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.core.models import Job, JobStatus
from apps.synthesis.models import SlotStatus, SynthesisSlot
from apps.synthesis.services import synthesis_run_inline, synthesis_sweep
from apps.synthesis.services.slots import slot_claim
from tests.workers import purge_queues, queued_messages

pytestmark = pytest.mark.django_db

TASK = "apps.synthesis.tasks.synthesize_slot_task"


@pytest.fixture(autouse=True)
def stale_after_30s(settings):
    settings.JOB_STALE_AFTER_S = 30
    purge_queues()
    yield
    purge_queues()


def ago(seconds: float):
    return timezone.now() - timedelta(seconds=seconds)


def test_slots_nobody_works_on_are_sent_again_once(start_template):
    synthesis = start_template(count=4, enqueue=True)
    dead, alive, lost, fresh = synthesis.slots.order_by("index").values_list("pk", flat=True)
    assert synthesis.slots.filter(enqueued_at__isnull=True).count() == 0
    slot_claim(slot_id=dead, worker="w1")
    slot_claim(slot_id=alive, worker="w2")
    SynthesisSlot.objects.filter(pk__in=[dead, alive, lost]).update(enqueued_at=ago(31))
    SynthesisSlot.objects.filter(pk=dead).update(heartbeat_at=ago(31))

    assert synthesis_sweep() == {"sent": [dead, lost], "jobs": [synthesis.pk]}
    assert synthesis_sweep() == {"sent": [], "jobs": [synthesis.pk]}  # once per period
    assert queued_messages("llm") == [(TASK, [dead]), (TASK, [lost])]
    assert SynthesisSlot.objects.get(pk=fresh).status == SlotStatus.REQUESTED  # sent just now
    taken, _ = slot_claim(slot_id=dead, worker="w3")
    assert (taken.claims, taken.worker, taken.status) == (2, "w3", SlotStatus.DRAFTING)
    assert slot_claim(slot_id=alive, worker="w3") is None


def test_slots_worked_in_process_are_left_to_their_process(start_template):
    synthesis = start_template(count=2, enqueue=False)
    first = synthesis.slots.order_by("index").first()
    slot_claim(slot_id=first.pk, worker="inline")
    SynthesisSlot.objects.filter(synthesis=synthesis).update(heartbeat_at=ago(99))
    assert synthesis_sweep() == {"sent": [], "jobs": [synthesis.pk]}
    assert queued_messages("llm") == []


def test_a_job_whose_last_refresh_was_lost_is_finished_by_the_sweeper(start_template):
    synthesis = start_template(count=2, enqueue=False)
    synthesis_run_inline(synthesis=synthesis)
    Job.objects.filter(pk=synthesis.job_id).update(status=JobStatus.RUNNING, progress_done=1)
    assert synthesis_sweep() == {"sent": [], "jobs": [synthesis.pk]}
    job = Job.objects.get(pk=synthesis.job_id)
    assert (job.status, job.progress_done, job.progress_total) == (JobStatus.SUCCEEDED, 2, 2)
    assert synthesis_sweep() == {"sent": [], "jobs": []}


def test_a_slot_that_killed_its_worker_too_often_is_failed_not_retried(start_template, settings):
    from apps.synthesis.services import synthesis_slot_run

    settings.JOB_MAX_CLAIMS = 3
    synthesis = start_template(count=1, enqueue=True)
    slot = synthesis.slots.get()
    SynthesisSlot.objects.filter(pk=slot.pk).update(
        status=SlotStatus.DRAFTING, claims=3, heartbeat_at=ago(31)
    )
    assert synthesis_slot_run(slot_id=slot.pk, worker="w4") == SlotStatus.FAILED
    slot.refresh_from_db()
    assert (slot.status, slot.claims, slot.environment_id) == (SlotStatus.FAILED, 4, None)
    assert slot.error == (
        "Its worker stopped 3 times while working on it (killed, perhaps for lack of memory); "
        "it was not started again."
    )
    assert Job.objects.get(pk=synthesis.job_id).status == JobStatus.FAILED
