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


def test_cancel_stops_pending_slots_and_finishes_the_job(start_template):
    from apps.synthesis.services import synthesis_cancel

    synthesis = start_template(count=3)
    first = synthesis.slots.get(index=0)
    assert synthesis_slot_run(slot_id=first.pk) == "valid"
    synthesis_cancel(synthesis=synthesis)
    statuses = list(synthesis.slots.order_by("index").values_list("status", flat=True))
    assert statuses == [SlotStatus.VALID, SlotStatus.CANCELLED, SlotStatus.CANCELLED]
    job = Job.objects.get(pk=synthesis.job_id)
    assert job.status == JobStatus.CANCELLED
    assert job.message == "3 of 3 finished: 1 valid, 0 invalid, 0 failed, 2 cancelled."
    # A message delivered after the cancel does nothing.
    assert synthesis_slot_run(slot_id=synthesis.slots.get(index=1).pk) == "skipped"
    assert Environment.objects.count() == 1


def test_running_slot_stops_at_its_next_checkpoint_when_cancelled(start_template):
    from apps.synthesis.services.slots import SlotCancelled, SlotLease, slot_claim

    synthesis = start_template(count=1)
    slot, claim = slot_claim(slot_id=synthesis.slots.get().pk)
    lease = SlotLease(slot, claim)
    lease.checkpoint()
    Job.objects.filter(pk=synthesis.job_id).update(cancel_requested=True)
    with pytest.raises(SlotCancelled):
        lease.checkpoint()


def test_claim_is_exclusive_until_the_lease_expires(start_template, settings):
    from datetime import timedelta

    from django.utils import timezone

    from apps.synthesis.services.slots import SlotLease, SlotLost, slot_claim

    settings.JOB_STALE_AFTER_S = 60
    synthesis = start_template(count=1)
    slot_id = synthesis.slots.get().pk
    slot, claim = slot_claim(slot_id=slot_id, worker="w1")
    assert slot_claim(slot_id=slot_id, worker="w2") is None
    SynthesisSlot.objects.filter(pk=slot_id).update(
        heartbeat_at=timezone.now() - timedelta(seconds=61)
    )
    taken, _ = slot_claim(slot_id=slot_id, worker="w2")
    assert (taken.worker, taken.claims, taken.status) == ("w2", 2, SlotStatus.DRAFTING)
    with pytest.raises(SlotLost):
        SlotLease(slot, claim).checkpoint()  # the first holder is fenced off
    assert synthesis_slot_run(slot_id=slot_id) == "skipped"  # still leased by w2


def test_resume_requeues_unstarted_and_stale_slots_only(start_template, settings):
    from datetime import timedelta

    from django.utils import timezone

    from apps.synthesis.services import synthesis_resume

    settings.JOB_STALE_AFTER_S = 60
    synthesis = start_template(count=3)
    _, b, c = synthesis.slots.order_by("index")
    now = timezone.now()
    SynthesisSlot.objects.filter(pk=b.pk).update(
        status=SlotStatus.DRAFTING, heartbeat_at=now - timedelta(seconds=120)
    )
    SynthesisSlot.objects.filter(pk=c.pk).update(status=SlotStatus.DRAFTING, heartbeat_at=now)
    outcome = synthesis_resume(synthesis=synthesis)
    assert (outcome["enqueued"], outcome["leased"]) == (2, 1)
    assert 59 <= outcome["recheck_in"] <= 61


def test_start_refuses_llm_without_endpoint_and_saves_nothing(project, author, capabilities):
    from apps.core.exceptions import ApplicationError
    from apps.synthesis.models import SynthesisJob
    from apps.synthesis.services import synthesis_start

    with pytest.raises(ApplicationError) as excinfo:
        synthesis_start(
            project=project, user=author, capabilities=capabilities, count=1, generator="llm"
        )
    assert excinfo.value.extra == {
        "fields": {"endpoint": ["The LLM generator needs a model endpoint."]}
    }
    assert (SynthesisJob.objects.count(), Job.objects.count()) == (0, 0)


def test_long_horizon_job_makes_valid_multi_day_projects(start_template, project):
    synthesis = start_template(count=1, seed=5, tasks_per_environment=1, horizon="long")
    assert synthesis.horizon == "long"
    job = synthesis_run_inline(synthesis=synthesis)
    assert job.status == JobStatus.SUCCEEDED
    slot = synthesis.slots.get()
    assert slot.status == SlotStatus.VALID
    env = Environment.objects.get(project=project)
    assert env.status == EnvironmentStatus.VALID
    (task,) = env.tasks.all()
    assert 5 <= len(task.turns) <= 12
    assert 20 <= sum(len(step["calls"]) for step in task.reference_solution) <= 60
    days = {turn["time"][:10] for turn in task.turns if turn.get("time")}
    assert len(days) >= 4


def test_start_refuses_an_unknown_horizon_and_saves_nothing(project, author, capabilities):
    from apps.core.exceptions import ApplicationError
    from apps.synthesis.models import SynthesisJob
    from apps.synthesis.services import synthesis_start

    with pytest.raises(ApplicationError) as excinfo:
        synthesis_start(
            project=project,
            user=author,
            capabilities=capabilities,
            count=1,
            generator="template",
            horizon="weeks",
        )
    assert excinfo.value.extra == {
        "fields": {"horizon": ["Choose a horizon: short, medium, long."]}
    }
    assert (SynthesisJob.objects.count(), Job.objects.count()) == (0, 0)


def test_signatures_refresh_reads_only_stale_environments(
    project, author, django_assert_num_queries
):
    from apps.environments.services import environment_import
    from apps.synthesis.generators import generate_environment
    from apps.synthesis.models import EnvironmentSignature
    from apps.synthesis.services.duplicates import signatures_refresh

    docs = [generate_environment(seed=s, capabilities=["resolve-conflicts"]) for s in (1, 2)]
    first, second = (environment_import(project=project, spec=doc, user=author) for doc in docs)
    assert signatures_refresh(project=project) == 2
    with django_assert_num_queries(1):  # everything current: one query, nothing sketched
        assert signatures_refresh(project=project) == 0
    EnvironmentSignature.objects.filter(environment=second).update(spec_hash="stale")
    assert signatures_refresh(project=project) == 1
    assert set(EnvironmentSignature.objects.values_list("environment_id", "spec_hash")) == {
        (first.pk, first.spec_hash),
        (second.pk, second.spec_hash),
    }


def test_a_valid_draft_passes_the_schema_once_from_draft_to_environment(
    start_template, project, monkeypatch
):
    """Validation builds the typed spec once; the import stores it without a second schema
    pass, and its hash is the one validation reported (issue 15: one schema pass a draft)."""
    from coworkenv_engine import spec as engine_spec
    from coworkenv_engine import validation

    passes = []

    def counted(doc):
        passes.append(1)
        return schema_problems(doc)

    schema_problems = engine_spec.schema_problems
    monkeypatch.setattr(engine_spec, "schema_problems", counted)
    monkeypatch.setattr(validation, "schema_problems", counted)
    synthesis = start_template(count=1, seed=5)
    slot = synthesis.slots.get()
    assert synthesis_slot_run(slot_id=slot.pk) == "valid"
    assert len(passes) == 1
    slot.refresh_from_db()
    attempt = SynthesisAttempt.objects.get(slot=slot)
    environment = slot.environment
    assert environment.spec_hash == attempt.report["spec_hash"]
    assert environment.latest_validation.spec_hash == attempt.report["spec_hash"]
    monkeypatch.undo()
    from apps.environments.specs import environment_spec

    assert engine_spec.spec_hash(environment_spec(environment)) == environment.spec_hash
