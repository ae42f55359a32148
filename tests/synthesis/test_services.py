"""Synthesis services with the template generator (no LLM): slots, attempts, results."""

import pytest

from apps.core.models import Job, JobStatus
from apps.environments.models import Environment, EnvironmentSource, EnvironmentStatus
from apps.synthesis.models import SlotStatus, SynthesisAttempt, SynthesisSlot
from apps.synthesis.services import synthesis_run_inline, synthesis_slot_run

pytestmark = pytest.mark.django_db


def test_template_job_inline_makes_valid_environments(start_template, project):
    synthesis = start_template(count=2, seed=11)
    job = synthesis_run_inline(synthesis=synthesis)
    assert job.status == JobStatus.SUCCEEDED
    assert (job.progress_done, job.progress_total) == (2, 2)
    slots = list(synthesis.slots.order_by("index"))
    assert [s.status for s in slots] == [SlotStatus.VALID, SlotStatus.VALID]
    assert [s.seed for s in slots] == [11, 12]
    assert [s.attempts_count for s in slots] == [1, 1]
    envs = Environment.objects.filter(project=project)
    assert envs.count() == 2
    assert {e.source for e in envs} == {EnvironmentSource.SYNTHESIZED}
    assert {e.status for e in envs} == {EnvironmentStatus.VALID}
    attempt = SynthesisAttempt.objects.get(slot=slots[0])
    assert (attempt.round, attempt.kind, attempt.valid, attempt.error_count) == (
        0,
        "draft",
        True,
        0,
    )
    assert slots[0].environment.latest_validation.valid is True
    assert job.message == "2 of 2 finished: 2 valid, 0 invalid, 0 failed."
    assert job.result["counts"]["valid"] == 2


def test_rerunning_a_finished_slot_creates_nothing(start_template):
    synthesis = start_template(count=1)
    slot = synthesis.slots.get()
    assert synthesis_slot_run(slot_id=slot.pk) == "valid"
    assert synthesis_slot_run(slot_id=slot.pk) == "skipped"
    assert Environment.objects.count() == 1
    assert SynthesisAttempt.objects.count() == 1


def test_same_seed_again_is_flagged_near_duplicate(start_template):
    first = start_template(count=1, seed=5)
    synthesis_run_inline(synthesis=first)
    second = start_template(count=1, seed=5)
    job = synthesis_run_inline(synthesis=second)
    original = first.slots.get().environment
    slot = second.slots.get()
    assert slot.duplicate_of == original
    assert slot.similarity == 1.0
    assert job.result["duplicates"] == 1
    assert job.message.endswith("; 1 near-duplicate.")


def test_different_seeds_are_not_duplicates(start_template):
    job = synthesis_run_inline(synthesis=start_template(count=3, seed=100))
    assert job.result["duplicates"] == 0
    assert SynthesisSlot.objects.filter(duplicate_of__isnull=False).count() == 0
    assert Job.objects.get(pk=job.pk).status == JobStatus.SUCCEEDED
