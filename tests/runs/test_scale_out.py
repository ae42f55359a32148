"""Scale-out: two worker processes, as on two hosts (each with its own name and pool, each
alone able to exceed the endpoint's limit), play one batch against one endpoint, and the
model server never sees more requests in flight than the endpoint's limit, while the limit
is reached. Run it against PostgreSQL + Redis (``DATABASE_URL``, ``CELERY_BROKER_URL``) for
the team-server setup: the limit then lives in Redis, shared by hosts; on SQLite the lock
files of one host hold it, and the database backend is checked on both."""

import os

import pytest

from apps.core.models import Job, JobStatus
from apps.llm.services import endpoint_create
from apps.runs.models import PolicyKind, Run, RunRole, RunStatus
from apps.runs.services import BatchSettings, TaskSelection, run_batch_create
from tests.llm_server import LoopbackLLMServer, Reply
from tests.runs.conftest import import_valid
from tests.runs.test_llm_runs import clarify_spec
from tests.workers import wait_for, worker_group

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

KEY_ENV = "COWORKENV_TEST_SCALE_API_KEY"
KEY = "sk-loopback-scale"
LIMIT = 3
TRIALS = 12

BROKER = os.environ.get("CELERY_BROKER_URL", "")
BACKENDS = ["database", "redis" if BROKER.startswith("redis://") else "file"]


@pytest.fixture
def processes(tmp_path):
    with worker_group(tmp_path) as start:
        yield start


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_workers_share_one_endpoint_limit_exactly(
    backend, settings, monkeypatch, project, author, processes
):
    monkeypatch.setenv(KEY_ENV, KEY)
    settings.LLM_SLOT_BACKEND = backend
    server = LoopbackLLMServer(api_key=KEY, latency=0.3, responder=lambda r: Reply.text("Done."))
    server.start()
    try:
        environment = import_valid(project, author, clarify_spec())
        endpoint = endpoint_create(
            project=project,
            created_by=author,
            name="shared",
            base_url=server.base_url,
            model="loop",
            api_key_env=KEY_ENV,
            request_timeout_s=10,
            max_concurrency=LIMIT,
        )
        # Each worker runs LIMIT + 1 runs at once: alone, either would go over the limit.
        env = {"LLM_SLOT_BACKEND": backend}
        host_a = processes("host-a", queues="llm", concurrency=LIMIT + 1, pool="threads",
                  hostname="a@host-a", env=env)  # fmt: skip
        host_b = processes("host-b", queues="llm", concurrency=LIMIT + 1, pool="prefork",
                  hostname="b@host-b", env=env)  # fmt: skip
        batch = run_batch_create(
            project=project,
            user=author,
            policy_kind=PolicyKind.ENDPOINT,
            endpoint=endpoint,
            role=RunRole.EVAL,
            selection=TaskSelection(environments=(environment.pk,)),
            settings=BatchSettings(trials=TRIALS, concurrency=2 * (LIMIT + 1), faults=False),
        )

        def finished():
            job = Job.objects.get(pk=batch.job_id)
            return job if not job.is_active else None

        job = wait_for(finished, timeout=120, interval=0.3, message="the batch to finish")
    finally:
        server.stop()
    assert job.status == JobStatus.SUCCEEDED, job.message
    runs = Run.objects.filter(batch=batch)
    assert sorted(runs.values_list("trial", "status")) == [
        (trial, RunStatus.SUCCEEDED) for trial in range(TRIALS)
    ]
    # Both workers played runs: the threads one in its own process, the prefork one in its
    # pool processes.
    pids = {int(worker.rsplit(":", 1)[1]) for worker in runs.values_list("worker", flat=True)}
    assert host_a.process.pid in pids
    assert pids & set(host_b.pool_children())
    assert len(server.chat_requests()) == 2 * TRIALS  # two model requests per run
    assert server.max_in_flight == LIMIT
