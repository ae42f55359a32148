"""A real Celery worker executes an oracle batch through the llm queue."""

import pytest

from apps.core.models import Job, JobStatus
from apps.runs.models import Run, RunStatus
from tests.workers import wait_for, worker_group

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def worker(tmp_path):
    with worker_group(tmp_path, tail=4000) as start:
        yield start("worker", queues="llm", concurrency=2)


def test_oracle_batch_is_executed_by_a_worker(worker, api_client_for, author, sample_environments):
    env = sample_environments[0]
    tasks = env.tasks.count()
    api = api_client_for(author)
    response = api.post(
        f"/api/v1/projects/{env.project_id}/run-batches/",
        {"policy": "oracle", "environments": [env.pk], "trials": 2, "concurrency": 2},
        format="json",
    )
    assert response.status_code == 201, response.json()
    batch_id, job_id = response.json()["id"], response.json()["job"]["id"]

    def finished():
        job = Job.objects.get(pk=job_id)
        return job if not job.is_active else None

    job = wait_for(finished, timeout=120, interval=0.3, message="the run batch")
    assert job.status == JobStatus.SUCCEEDED, job.message
    assert (job.progress_done, job.progress_total) == (2 * tasks, 2 * tasks)
    runs = Run.objects.filter(batch_id=batch_id)
    assert runs.count() == 2 * tasks  # one row per slot: nothing duplicated
    assert set(runs.values_list("status", "attempt", "passed", "strict", "score")) == {
        (RunStatus.SUCCEEDED, 1, True, True, 1.0)
    }
    detail = api.get(f"/api/v1/run-batches/{batch_id}/").json()
    assert detail["metrics"]["summary"]["pass_at_k"] == {"1": 1.0, "2": 1.0}


def test_a_student_group_batch_is_scored_by_the_workers(
    worker, api_client_for, author, sample_environments
):
    env = sample_environments[0]
    tasks = env.tasks.count()
    api = api_client_for(author)
    response = api.post(
        f"/api/v1/projects/{env.project_id}/run-batches/",
        {
            "policy": "oracle",
            "role": "student",
            "environments": [env.pk],
            "group_size": 3,
            "concurrency": 3,
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    batch_id, job_id = response.json()["id"], response.json()["job"]["id"]

    def finished():
        job = Job.objects.get(pk=job_id)
        return job if not job.is_active else None

    job = wait_for(finished, timeout=120, interval=0.3, message="the group batch")
    assert job.status == JobStatus.SUCCEEDED, job.message
    groups = api.get(f"/api/v1/run-batches/{batch_id}/groups/?advantage=rloo").json()
    assert groups["count"] == tasks
    for group in groups["results"]:
        assert group["size"] == 3 and group["scorable"] == 3
        assert [m["reward"] for m in group["members"]] == [1.0, 1.0, 1.0]
        assert [m["advantage"] for m in group["members"]] == [0.0, 0.0, 0.0]
        assert sorted(group["run_ids"]) == group["run_ids"]
