"""Workers die in the middle of a run batch — one pool process killed with SIGKILL, as the
out-of-memory killer does, or the whole worker — and the batch still ends with exactly the
requested runs, nobody pressing Resume: the killed pool process's message goes back to the
queue (``reject_on_worker_lost``) and the sweeper (Celery beat) sends the runs whose worker
stopped heartbeating again."""

import os
import signal
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.core.models import Job, JobStatus
from apps.llm.services import endpoint_create
from apps.runs.models import PolicyKind, Run, RunRole, RunStatus
from apps.runs.services import BatchSettings, TaskSelection, run_batch_create
from tests.llm_server import LoopbackLLMServer, Reply
from tests.runs.conftest import import_valid
from tests.runs.test_llm_runs import clarify_spec
from tests.workers import BeatProcess, wait_for, worker_group

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

KEY_ENV = "COWORKENV_TEST_RELIABILITY_API_KEY"
KEY = "sk-loopback-reliability"
STALE_S = 3
TRIALS = 6


@pytest.fixture
def fast_sweeps(settings, monkeypatch):
    """A claim goes stale after 3 s and beat sweeps every second (workers and beat read
    these from the environment)."""
    settings.JOB_STALE_AFTER_S = STALE_S
    monkeypatch.setenv("JOB_STALE_AFTER_S", str(STALE_S))
    monkeypatch.setenv("JOB_SWEEP_EVERY_S", "1")
    monkeypatch.setenv(KEY_ENV, KEY)


@pytest.fixture
def start_batch(fast_sweeps, project, author):
    """A batch of an LLM policy against a slow model on loopback: every run takes two model
    requests of 1 s each, so there is time to kill a worker in the middle of one."""
    server = LoopbackLLMServer(api_key=KEY, latency=1.0, responder=lambda r: Reply.text("Done."))
    server.start()
    environment = import_valid(project, author, clarify_spec())
    endpoint = endpoint_create(
        project=project,
        created_by=author,
        name="slow",
        base_url=server.base_url,
        model="loop",
        api_key_env=KEY_ENV,
        request_timeout_s=10,
        max_concurrency=4,
    )

    def start():
        return run_batch_create(
            project=project,
            user=author,
            policy_kind=PolicyKind.ENDPOINT,
            endpoint=endpoint,
            role=RunRole.EVAL,
            selection=TaskSelection(environments=(environment.pk,)),
            settings=BatchSettings(trials=TRIALS, concurrency=2),
        )

    yield start
    server.stop()


@pytest.fixture
def processes(tmp_path):
    with worker_group(tmp_path) as start:
        yield start


def finished(batch):
    job = Job.objects.get(pk=batch.job_id)
    return job if not job.is_active else None


def assert_exactly_the_requested_runs(batch):
    job = Job.objects.get(pk=batch.job_id)
    assert job.status == JobStatus.SUCCEEDED, job.message
    assert (job.progress_done, job.progress_total) == (TRIALS, TRIALS)
    runs = Run.objects.filter(batch=batch)
    # One row per (task, trial), each graded once: nothing lost, nothing duplicated.
    assert sorted(runs.values_list("trial", "attempt", "status")) == [
        (trial, 1, RunStatus.SUCCEEDED) for trial in range(TRIALS)
    ]


def test_a_killed_pool_process_does_not_leave_its_run_running(start_batch, processes):
    processes("beat", kind=BeatProcess)
    # Three pool processes for a batch that keeps two runs in flight: one is free for the
    # sweeps, which run on the default queue.
    worker = processes("worker", queues="default,llm", concurrency=3)
    batch = start_batch()

    def a_running_run():
        return Run.objects.filter(batch=batch, status=RunStatus.RUNNING).exclude(worker="").first()

    run = wait_for(a_running_run, timeout=60, interval=0.05, message="a run in a pool process")
    pid = int(run.worker.rsplit(":", 1)[1])
    assert pid in worker.pool_children()
    os.kill(pid, signal.SIGKILL)

    wait_for(lambda: finished(batch), timeout=60, interval=0.3, message="the batch to finish")
    assert worker.process.poll() is None  # the worker itself lived on
    assert_exactly_the_requested_runs(batch)
    taken_over = Run.objects.get(pk=run.pk)
    assert taken_over.claims == 2  # the killed process's claim, then the one that finished it
    assert taken_over.worker != run.worker


@pytest.mark.parametrize("pool", ["prefork", "threads"])
def test_a_killed_worker_mid_batch_is_finished_by_the_next_one(start_batch, processes, pool):
    processes("beat", kind=BeatProcess)
    first = processes("worker1", queues="default,llm", concurrency=3, pool=pool)
    batch = start_batch()
    runs = Run.objects.filter(batch=batch)

    def mid_batch():
        # A run finished, and another one was claimed a moment ago: it has about two seconds
        # of model requests left when the worker is killed.
        just_claimed = timezone.now() - timedelta(seconds=0.5)
        return (
            runs.filter(status=RunStatus.SUCCEEDED).exists()
            and runs.filter(status=RunStatus.RUNNING, started_at__gte=just_claimed).exists()
        )

    wait_for(mid_batch, timeout=60, interval=0.05, message="a finished and a starting run")
    first.kill()
    interrupted = set(runs.filter(status=RunStatus.RUNNING).values_list("pk", flat=True))
    assert interrupted
    assert runs.filter(status=RunStatus.PENDING).exists()

    processes("worker2", queues="default,llm", concurrency=3, pool=pool)
    wait_for(lambda: finished(batch), timeout=60, interval=0.3, message="the batch to finish")
    assert_exactly_the_requested_runs(batch)
    assert set(runs.filter(pk__in=interrupted).values_list("claims", flat=True)) == {2}


def test_a_run_killed_after_a_turn_checkpoint_plays_again_from_its_start(
    start_batch, processes, monkeypatch
):
    """Every turn's end is checkpointed (RUN_CHECKPOINT_EVERY_S=0): the worker is killed in
    a run's second turn, after its first turn was stored; the next worker plays the run
    again from its start (the checkpoint is for the run page, see ``_TurnCheckpoints``), and
    the stored trajectory is one whole episode, not the checkpoint with a replay after it."""
    monkeypatch.setenv("RUN_CHECKPOINT_EVERY_S", "0")
    processes("beat", kind=BeatProcess)
    first = processes("worker1", queues="default,llm", concurrency=3, pool="threads")
    batch = start_batch()
    runs = Run.objects.filter(batch=batch)

    def checkpointed():
        running = runs.filter(status=RunStatus.RUNNING).values_list("pk", "transcript")
        return next(((pk, list(t)) for pk, t in running if t), None)

    run_id, _ = wait_for(checkpointed, timeout=60, interval=0.05, message="a checkpoint")
    first.kill()
    killed = Run.objects.get(pk=run_id)
    # killed in its second turn (a model request of 1 s), its first turn stored whole: the
    # system prompt, the user's message, the agent's reply
    assert killed.status == RunStatus.RUNNING
    checkpoint = killed.transcript
    assert [m["role"] for m in checkpoint] == ["system", "user", "assistant"]

    processes("worker2", queues="default,llm", concurrency=3, pool="threads")
    wait_for(lambda: finished(batch), timeout=60, interval=0.3, message="the batch to finish")
    assert_exactly_the_requested_runs(batch)
    replayed = Run.objects.get(pk=run_id)
    other = runs.exclude(pk=run_id).first()
    # one whole episode, shaped like a run nobody killed, its first turn as checkpointed
    assert [m["role"] for m in replayed.transcript] == [m["role"] for m in other.transcript]
    assert replayed.transcript[: len(checkpoint)] == checkpoint
    assert len(replayed.transcript) > len(checkpoint)
    assert replayed.claims == 2
