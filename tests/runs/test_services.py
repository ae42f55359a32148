"""Run batches through the services: oracle execution, progress, idempotency, retries."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.core.exceptions import ApplicationError
from apps.core.models import Job, JobStatus
from apps.runs.models import Executor, Run, RunBatch, RunStatus
from apps.runs.services import (
    BatchSettings,
    TaskSelection,
    batch_refresh,
    run_batch_cancel,
    run_batch_create,
    run_batch_execute_inline,
    run_execute,
)

pytestmark = pytest.mark.django_db


def oracle_batch(project, user, *, trials=1, executor=Executor.INLINE, **settings):
    return run_batch_create(
        project=project,
        user=user,
        settings=BatchSettings(trials=trials, **settings),
        executor=executor,
    )


def test_oracle_batch_passes_every_sample_task_strictly(project, author, sample_task_count):
    batch = oracle_batch(project, author, trials=2)
    assert batch.slot_count == sample_task_count * 2
    assert Run.objects.filter(batch=batch, status=RunStatus.PENDING).count() == batch.slot_count

    run_batch_execute_inline(batch=batch)

    runs = list(Run.objects.filter(batch=batch))
    assert len(runs) == batch.slot_count
    assert {r.status for r in runs} == {RunStatus.SUCCEEDED}
    assert {(r.score, r.passed, r.strict) for r in runs} == {(1.0, True, True)}
    assert {r.policy_name for r in runs} == {"oracle"}
    assert all(r.transcript[0]["role"] == "system" for r in runs)
    assert all(r.environment_revision == 1 and len(r.spec_hash) == 64 for r in runs)
    assert all(r.verdicts and all(v["status"] == "passed" for v in r.verdicts) for r in runs)
    # Trials differ only by seed: trial i runs with seed + i.
    assert sorted({r.seed for r in runs}) == [0, 1]
    job = Job.objects.get(pk=batch.job_id)
    assert (job.status, job.progress_done, job.progress_total) == (
        JobStatus.SUCCEEDED,
        batch.slot_count,
        batch.slot_count,
    )
    assert job.message == f"{batch.slot_count} of {batch.slot_count} trials graded, " + (
        f"{batch.slot_count} passed."
    )
    assert job.result["links"][0]["url"] == f"/runs/batches/{batch.pk}/"


def test_selection_filters_tasks(project, author, sample_environments):
    first = sample_environments[0]
    batch = run_batch_create(
        project=project,
        user=author,
        selection=TaskSelection(environments=(first.pk,), split="train"),
        executor=Executor.INLINE,
    )
    expected = list(
        first.tasks.filter(split="train").order_by("position", "id").values_list("pk", flat=True)
    )
    assert batch.task_ids == expected
    assert batch.selection == {
        "environments": [first.pk],
        "capabilities": [],
        "split": "train",
        "statuses": ["valid", "approved"],
    }


def test_no_matching_task_is_refused(project, author, sample_environments):
    with pytest.raises(ApplicationError, match="No task matches this selection"):
        run_batch_create(
            project=project,
            user=author,
            selection=TaskSelection(capabilities=("no-such-capability",)),
        )
    assert RunBatch.objects.count() == 0
    assert Job.objects.count() == 0


def test_other_projects_environment_is_refused(project, author, other_project, outsider):
    from tests.runs.conftest import SAMPLES, import_valid

    foreign = import_valid(other_project, outsider, json.loads(SAMPLES[0].read_text()))
    with pytest.raises(ApplicationError, match=f"No environment {foreign.pk} in this project"):
        run_batch_create(
            project=project, user=author, selection=TaskSelection(environments=(foreign.pk,))
        )


def test_executing_the_same_run_twice_does_not_duplicate(project, author, sample_environments):
    batch = oracle_batch(project, author)
    run = Run.objects.filter(batch=batch).first()
    first = run_execute(run_id=run.pk)
    assert first.status == RunStatus.SUCCEEDED
    finished_at = first.finished_at

    assert run_execute(run_id=run.pk) is None  # a redelivered message: nothing to do

    run.refresh_from_db()
    assert run.finished_at == finished_at
    assert Run.objects.filter(batch=batch, task_ref=run.task_ref, trial=run.trial).count() == 1


def test_a_running_run_is_left_alone_but_a_stale_one_is_taken_over(
    project, author, sample_environments
):
    batch = oracle_batch(project, author)
    run = Run.objects.filter(batch=batch).first()
    Run.objects.filter(pk=run.pk).update(
        status=RunStatus.RUNNING, claim_token="dead-worker", heartbeat_at=timezone.now()
    )
    assert run_execute(run_id=run.pk) is None
    run.refresh_from_db()
    assert (run.status, run.claim_token) == (RunStatus.RUNNING, "dead-worker")

    Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(minutes=11))
    taken = run_execute(run_id=run.pk)
    assert taken.status == RunStatus.SUCCEEDED
    assert taken.claim_token != "dead-worker"
    assert taken.passed is True


def test_cancel_stops_pending_runs(project, author, sample_task_count):
    batch = oracle_batch(project, author, trials=2)
    first = Run.objects.filter(batch=batch).order_by("id").first()
    run_execute(run_id=first.pk)

    run_batch_cancel(batch=batch)

    counts = {
        status: Run.objects.filter(batch=batch, status=status).count()
        for status in RunStatus.values
    }
    assert counts == {
        "pending": 0,
        "running": 0,
        "succeeded": 1,
        "errored": 0,
        "cancelled": batch.slot_count - 1,
    }
    job = Job.objects.get(pk=batch.job_id)
    assert job.status == JobStatus.CANCELLED
    assert job.progress_done == batch.slot_count
    with pytest.raises(ApplicationError, match="already cancelled"):
        run_batch_cancel(batch=batch)


def test_progress_never_goes_backwards(project, author, sample_environments):
    batch = oracle_batch(project, author)
    Job.objects.filter(pk=batch.job_id).update(progress_done=2, progress_total=batch.slot_count)
    job = batch_refresh(batch=batch)  # recount says 0 finished: the stored 2 stays
    assert job.progress_done == 2


def test_celery_executor_enqueues_up_to_the_concurrency(
    project, author, sample_task_count, django_capture_on_commit_callbacks, monkeypatch
):
    sent = []
    monkeypatch.setattr("apps.runs.tasks.execute_run_task.delay", sent.append)
    with django_capture_on_commit_callbacks(execute=True):
        batch = oracle_batch(project, author, trials=2, concurrency=3, executor=Executor.CELERY)
    first_three = list(Run.objects.filter(batch=batch).order_by("id").values_list("pk", flat=True))
    assert sent == first_three[:3]

    with django_capture_on_commit_callbacks(execute=True):
        run_execute(run_id=sent[0])
    assert sent == first_three[:4]  # one finished, one more started
    assert Run.objects.filter(batch=batch, enqueued_at__isnull=False).count() == 4


def _two_trials(project, author, environment) -> tuple[Run, Run]:
    """An inline batch of two trials of the environment's tasks: its first two runs."""
    batch = run_batch_create(
        project=project,
        user=author,
        selection=TaskSelection(environments=(environment.pk,)),
        settings=BatchSettings(trials=2),
        executor=Executor.INLINE,
    )
    return tuple(Run.objects.filter(batch=batch).order_by("id")[:2])


def test_a_run_records_the_revision_it_ran_against(
    project, author, sample_environments, claims_age
):
    from apps.environments.services import environment_update
    from apps.runs.services import claims

    env = sample_environments[0]
    first, second = _two_trials(project, author, env)
    run_execute(run_id=first.pk)
    edited = environment_update(
        environment=env, name=env.name, domain=env.domain, description="Edited mid-batch."
    )
    claims_age(claims.MAX_AGE_S)  # a worker sees the edit a second later at the latest
    run_execute(run_id=second.pk)
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.environment_revision, second.environment_revision) == (1, 2)
    assert second.spec_hash == edited.spec_hash != first.spec_hash


def test_a_spec_is_built_from_the_environment_as_it_is_when_loaded(
    project, author, sample_environments, monkeypatch
):
    """The environment a run gets may be up to a second old (the worker's cache); a spec the
    worker has not loaded yet is built from the rows as they are now, and the run records
    that revision and hash, not the instance's."""
    from apps.environments.services import environment_update
    from apps.runs.services import playing
    from apps.runs.services.loaded_specs import LoadedSpecs

    env = sample_environments[0]
    first, second = _two_trials(project, author, env)
    run_execute(run_id=first.pk)  # the environment (revision 1) now in the worker's cache
    edited = environment_update(
        environment=env, name=env.name, domain=env.domain, description="Edited mid-batch."
    )
    monkeypatch.setattr(playing, "LOADED_SPECS", LoadedSpecs())  # none loaded yet
    run_execute(run_id=second.pk)
    second.refresh_from_db()
    assert (second.environment_revision, second.spec_hash) == (2, edited.spec_hash)


def test_a_deleted_task_errors_its_run_without_retrying(project, author, sample_environments):
    from apps.environments.services import task_delete

    env = sample_environments[0]
    batch = run_batch_create(
        project=project,
        user=author,
        selection=TaskSelection(environments=(env.pk,)),
        executor=Executor.INLINE,
    )
    run = Run.objects.filter(batch=batch).order_by("id").first()
    task_delete(task=run.task)
    run_batch_execute_inline(batch=batch)
    run.refresh_from_db()
    assert (run.status, run.retryable, run.task_id) == (RunStatus.ERRORED, False, None)
    assert run.error.startswith("The task was deleted")
    assert Run.objects.filter(batch=batch, task_ref=run.task_ref).count() == 1
    assert Job.objects.get(pk=batch.job_id).status == JobStatus.SUCCEEDED


def test_resume_re_enqueues_pending_and_stale_runs(
    project, author, sample_environments, django_capture_on_commit_callbacks, monkeypatch
):
    from apps.runs.services import run_batch_resume

    sent = []
    monkeypatch.setattr("apps.runs.tasks.execute_run_task.delay", sent.append)
    batch = oracle_batch(project, author, concurrency=2)  # inline: nothing enqueued
    ids = list(Run.objects.filter(batch=batch).order_by("id").values_list("pk", flat=True))
    Run.objects.filter(pk=ids[0]).update(
        status=RunStatus.RUNNING, heartbeat_at=timezone.now() - timedelta(minutes=11)
    )
    with django_capture_on_commit_callbacks(execute=True):
        enqueued = run_batch_resume(batch=batch)
    # The stale run, plus one pending run (the stale one already takes a place of two).
    assert (enqueued, sent) == (2, [ids[0], ids[1]])
    batch.refresh_from_db()
    assert batch.executor == Executor.CELERY
    run_batch_cancel(batch=batch)
    with pytest.raises(ApplicationError, match="already cancelled"):
        run_batch_resume(batch=batch)
