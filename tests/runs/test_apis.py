"""REST API: run batches (create, list, retrieve with metrics, cancel) and runs."""

import pytest

from apps.core.models import Job
from apps.runs.models import Executor, Run, RunBatch, RunStatus
from apps.runs.services import (
    BatchSettings,
    TaskSelection,
    run_batch_create,
    run_batch_execute_inline,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def finished_batch(project, author, sample_environments):
    batch = run_batch_create(
        project=project,
        user=author,
        selection=TaskSelection(environments=(sample_environments[0].pk,)),
        settings=BatchSettings(trials=2),
        executor=Executor.INLINE,
    )
    return run_batch_execute_inline(batch=batch)


def test_create_returns_the_batch_with_its_job(
    api_client_for,
    author,
    project,
    sample_environments,
    django_capture_on_commit_callbacks,
    monkeypatch,
):
    sent = []
    monkeypatch.setattr("apps.runs.tasks.execute_run_task.delay", sent.append)
    env = sample_environments[1]
    with django_capture_on_commit_callbacks(execute=True):
        response = api_client_for(author).post(
            f"/api/v1/projects/{project.pk}/run-batches/",
            {"policy": "oracle", "environments": [env.pk], "trials": 3, "concurrency": 2},
            format="json",
        )
    assert response.status_code == 201, response.json()
    body = response.json()
    batch = RunBatch.objects.get()
    tasks = list(env.tasks.order_by("position", "id").values_list("pk", flat=True))
    assert body["id"] == batch.pk
    assert (body["policy"], body["policy_kind"], body["trials"], body["task_ids"]) == (
        "oracle",
        "oracle",
        3,
        tasks,
    )
    assert body["job"]["id"] == batch.job_id
    assert (body["job"]["status"], body["job"]["progress_total"]) == ("pending", 3 * len(tasks))
    assert len(sent) == 2  # the concurrency


def test_create_validates(api_client_for, author, project, sample_environments):
    api = api_client_for(author)
    url = f"/api/v1/projects/{project.pk}/run-batches/"
    bad = api.post(url, {"policy": "oracle", "trials": 0}, format="json")
    assert bad.status_code == 400
    assert bad.json()["message"] == "The request is not valid."
    assert "trials" in bad.json()["details"]
    nothing = api.post(
        url, {"policy": "oracle", "split": "eval", "capabilities": ["nope"]}, format="json"
    )
    assert nothing.status_code == 400
    assert nothing.json()["message"].startswith("No task matches this selection.")
    no_endpoint = api.post(url, {"policy": "endpoint", "endpoint": 999}, format="json")
    assert no_endpoint.status_code == 400
    assert no_endpoint.json()["message"] == "No model endpoint 999 in this project."
    assert RunBatch.objects.count() == 0 and Job.objects.count() == 0


def test_create_role_rules(api_client_for, viewer, outsider, project, sample_environments):
    url = f"/api/v1/projects/{project.pk}/run-batches/"
    assert api_client_for(viewer).post(url, {"policy": "oracle"}).status_code == 403
    assert api_client_for(outsider).post(url, {"policy": "oracle"}).status_code == 404
    assert api_client_for().post(url, {"policy": "oracle"}).status_code == 401
    assert RunBatch.objects.count() == 0


def test_list_and_retrieve_with_metrics(api_client_for, viewer, project, finished_batch):
    api = api_client_for(viewer)
    listing = api.get(f"/api/v1/projects/{project.pk}/run-batches/").json()
    assert listing["count"] == 1
    assert listing["results"][0]["id"] == finished_batch.pk
    detail = api.get(f"/api/v1/run-batches/{finished_batch.pk}/").json()
    summary = detail["metrics"]["summary"]
    assert (summary["average_score"], summary["pass_rate"], summary["strict_rate"]) == (1, 1, 1)
    assert summary["pass_at_k"] == {"1": 1.0, "2": 1.0}
    assert summary["pass_hat_k"] == {"1": 1.0, "2": 1.0}
    assert detail["metrics"]["counts"]["succeeded"] == 2 * len(finished_batch.task_ids)
    assert detail["job"]["status"] == "succeeded"


def test_batch_endpoints_refuse_outsiders_and_anonymous(api_client_for, outsider, finished_batch):
    for url in (
        f"/api/v1/projects/{finished_batch.project_id}/run-batches/",
        f"/api/v1/run-batches/{finished_batch.pk}/",
        f"/api/v1/projects/{finished_batch.project_id}/runs/",
        f"/api/v1/runs/{Run.objects.filter(batch=finished_batch).first().pk}/",
    ):
        assert api_client_for(outsider).get(url).status_code == 404, url
        assert api_client_for().get(url).status_code == 401, url


def test_cancel(api_client_for, author, viewer, outsider, project, sample_environments):
    batch = run_batch_create(project=project, user=author, executor=Executor.INLINE)
    url = f"/api/v1/run-batches/{batch.pk}/cancel/"
    assert api_client_for(viewer).post(url).status_code == 403
    assert api_client_for(outsider).post(url).status_code == 404
    assert Job.objects.get(pk=batch.job_id).status == "pending"
    assert api_client_for(author).get(url).status_code == 405
    response = api_client_for(author).post(url)
    assert response.status_code == 200
    assert response.json()["job"]["status"] == "cancelled"
    assert set(Run.objects.filter(batch=batch).values_list("status", flat=True)) == {
        RunStatus.CANCELLED
    }
    again = api_client_for(author).post(url)
    assert (again.status_code, again.json()["message"]) == (400, "This job has already cancelled.")


def test_run_list_filters_and_detail(api_client_for, viewer, project, finished_batch):
    api = api_client_for(viewer)
    base = f"/api/v1/projects/{project.pk}/runs/"
    task = finished_batch.task_ids[0]
    everything = api.get(base).json()
    assert everything["count"] == 2 * len(finished_batch.task_ids)
    assert "transcript" not in everything["results"][0]
    one_task = api.get(base, {"batch": finished_batch.pk, "task": task}).json()
    assert [r["trial"] for r in one_task["results"]] == [0, 1]
    assert api.get(base, {"passed": "false"}).json()["count"] == 0
    assert api.get(base, {"status": "errored"}).json()["count"] == 0
    assert api.get(base, {"policy": "oracle"}).json()["count"] == everything["count"]
    run_id = one_task["results"][0]["id"]
    detail = api.get(f"/api/v1/runs/{run_id}/").json()
    run = Run.objects.get(pk=run_id)
    assert detail["transcript"] == run.transcript
    assert detail["verdicts"] == run.verdicts
    assert (detail["score"], detail["passed"], detail["strict"]) == (1.0, True, True)
    assert detail["audit_log"] == run.audit_log


def test_schema_lists_the_runs_endpoints(api_client_for, viewer):
    schema = api_client_for(viewer).get("/api/v1/schema/", {"format": "json"}).json()
    for path in (
        "/api/v1/projects/{id}/run-batches/",
        "/api/v1/run-batches/{id}/",
        "/api/v1/run-batches/{id}/cancel/",
        "/api/v1/projects/{id}/runs/",
        "/api/v1/runs/{id}/",
    ):
        assert path in schema["paths"], path


def test_resume(api_client_for, author, viewer, outsider, project, sample_environments):
    batch = run_batch_create(project=project, user=author, executor=Executor.INLINE)
    url = f"/api/v1/run-batches/{batch.pk}/resume/"
    assert api_client_for(viewer).post(url).status_code == 403
    assert api_client_for(outsider).post(url).status_code == 404
    batch.refresh_from_db()
    assert batch.executor == Executor.INLINE
    response = api_client_for(author).post(url)
    assert response.status_code == 200
    batch.refresh_from_db()
    assert batch.executor == Executor.CELERY
    api_client_for(author).post(f"/api/v1/run-batches/{batch.pk}/cancel/")
    again = api_client_for(author).post(url)
    assert (again.status_code, again.json()["message"]) == (
        400,
        "This batch has already cancelled.",
    )
