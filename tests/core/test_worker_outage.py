"""The database refuses the workers for a while — first when the messages of a job of every
kind arrive, then again while one of them is half done — and every job still ends complete,
with exactly its outputs, nobody pressing Resume.

PostgreSQL stops accepting connections and drops the workers' ones; SQLite is held locked
by another connection (see ``tests.workers.DatabaseOutage``). The tasks retry the database
errors with backoff, a claim given back or gone stale is taken again, and the sweeper
(Celery beat) sends again whatever is left."""

import json
import time

import pytest

from apps.capabilities.models import Capability
from apps.capabilities.services import capability_catalogue_seed
from apps.core.models import Job, JobStatus
from apps.core.services import worker_check_start
from apps.curation.services import regrade_job_start
from apps.datasets.models import VersionStatus
from apps.datasets.services import VersionFilter, dataset_create, dataset_version_create
from apps.environments.models import ValidationReport
from apps.environments.services import environment_validation_start
from apps.llm.services import endpoint_create, endpoint_test_start
from apps.runs.models import Run, RunStatus
from apps.runs.services import BatchSettings, TaskSelection, run_batch_create
from apps.synthesis.models import SlotStatus
from apps.synthesis.services import synthesis_start
from tests.datasets.conftest import make_demonstration
from tests.llm_server import LoopbackLLMServer, Reply
from tests.runs.conftest import SAMPLES, import_valid
from tests.workers import BeatProcess, DatabaseOutage, wait_for, worker_group

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

STALE_S = 3
KEY_ENV = "COWORKENV_TEST_OUTAGE_API_KEY"
KEY = "sk-loopback-outage"
OUTAGE_S = 6
SLOW_STEPS = 16


@pytest.fixture
def fast_sweeps(settings, monkeypatch):
    settings.JOB_STALE_AFTER_S = STALE_S
    monkeypatch.setenv("JOB_STALE_AFTER_S", str(STALE_S))
    monkeypatch.setenv("JOB_SWEEP_EVERY_S", "1")
    monkeypatch.setenv(KEY_ENV, KEY)


@pytest.fixture
def model_server():
    with LoopbackLLMServer(api_key=KEY, responder=lambda request: Reply.text("pong")) as server:
        yield server


@pytest.fixture
def processes(tmp_path):
    with worker_group(tmp_path, tail=4000) as start:
        yield start


def test_every_job_kind_completes_after_the_database_refused_the_workers(
    fast_sweeps, processes, model_server, project, author
):
    start = processes
    environments = [import_valid(project, author, json.loads(p.read_text())) for p in SAMPLES]
    first = environments[0]
    train_tasks = list(first.tasks.filter(split="train").values_list("key", flat=True))
    for key in train_tasks:
        make_demonstration(first, key)
    capability_catalogue_seed(project=project)
    capability = Capability.objects.get(project=project, slug="clarify-before-acting")

    # One job of every kind, queued while no worker runs yet.
    slow_check = worker_check_start(
        project=project, started_by=author, steps=SLOW_STEPS, step_seconds=0.4
    )
    validation = environment_validation_start(
        project=project, environments=environments, started_by=author
    )
    batch = run_batch_create(
        project=project,
        user=author,
        selection=TaskSelection(environments=(first.pk,)),
        settings=BatchSettings(trials=2, concurrency=2),
    )
    synthesis = synthesis_start(
        project=project,
        user=author,
        capabilities=[capability],
        count=3,
        generator="template",
        tasks_per_environment=1,
        seed=5,
    )
    dataset = dataset_create(project=project, name="Outage SFT", user=author)
    version = dataset_version_create(
        dataset=dataset, user=author, filters=VersionFilter(), validation_fraction=0.0
    )
    regrade = regrade_job_start(project=project, environment=first, user=author, only_stale=False)
    endpoint = endpoint_create(
        project=project,
        created_by=author,
        name="loop",
        base_url=model_server.base_url,
        model="loop",
        api_key_env=KEY_ENV,
    )
    endpoint_test = endpoint_test_start(endpoint=endpoint, started_by=author)
    jobs = Job.objects.filter(project=project)
    assert jobs.count() == 7

    # 1. The messages arrive while the database refuses the workers.
    with DatabaseOutage():
        start("beat", kind=BeatProcess)
        worker = start("worker", queues="default,llm", concurrency=3, sqlite_timeout=0.5)
        time.sleep(OUTAGE_S)

    # 2. Once a job is half done, the database goes away again under it.
    def half_done():
        row = Job.objects.get(pk=slow_check.pk)
        return row.status == JobStatus.RUNNING and row.progress_done >= 3

    wait_for(half_done, timeout=60, interval=0.1, message="the slow job to be half done")
    with DatabaseOutage():
        time.sleep(OUTAGE_S)

    def all_finished():
        return not jobs.filter(status__in=[JobStatus.PENDING, JobStatus.RUNNING]).exists()

    wait_for(all_finished, timeout=60, interval=0.3, message="every job to finish")
    log = worker.log()
    assert "OperationalError" in log  # the outage reached the workers

    kinds = [
        "curation.regrade",
        "dataset_build",
        "endpoint_test",
        "environment_validation",
        "run_batch",
        "synthesis",
        "worker_check",
    ]
    assert sorted(jobs.values_list("kind", "status")) == [
        (kind, JobStatus.SUCCEEDED) for kind in kinds
    ]
    slow_check.refresh_from_db()
    assert [step["step"] for step in slow_check.result["steps"]] == list(
        range(1, SLOW_STEPS + 1)
    )  # resumed where it stopped: no step done twice
    validation.refresh_from_db()
    assert ValidationReport.objects.filter(job=validation).count() == len(environments)
    assert (validation.result["valid"], validation.result["invalid"]) == (len(environments), 0)
    tasks = first.tasks.count()
    assert sorted(Run.objects.filter(batch=batch).values_list("trial", "attempt", "status")) == [
        (trial, 1, RunStatus.SUCCEEDED) for trial in range(2) for _ in range(tasks)
    ]
    assert list(synthesis.slots.values_list("status", flat=True)) == [SlotStatus.VALID] * 3
    assert synthesis.slots.filter(environment__isnull=False).count() == 3
    version.refresh_from_db()
    assert version.status == VersionStatus.READY
    assert version.train_rows == len(train_tasks)
    regrade.refresh_from_db()
    assert regrade.message == f"Re-graded {len(train_tasks)} demonstrations; 0 flipped."
    endpoint_test.refresh_from_db()
    assert endpoint_test.message.startswith("Connected. It answered “pong”")
