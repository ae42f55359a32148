"""Bounded callbacks (issue 24, item 5): what one job reports stays bounded whoever sends it
— attempts, metric steps (within the job's own step count) and rows, the final artifact —
and its metrics are paginated in the API and down-sampled for the page's chart."""

import json
import re

import pytest
from rest_framework.test import APIClient

from apps.core.exceptions import ApplicationError
from apps.training.models import TrainingJob, TrainingMetric
from apps.training.selectors import _spread, training_metrics_sampled
from apps.training.services import training_events_apply
from apps.training.services.reports import (
    MAX_ATTEMPTS_LISTED,
    MAX_FINAL_ARTIFACT_BYTES,
    callback_secret_new,
    step_bound,
)
from tests.training.test_command_security import _launch


@pytest.fixture
def command_job(project, author, training_version, operator_templates):
    operator_templates({"cluster": {"argv": ["sbatch", "{config_path}"]}})
    job = _launch(project, author, training_version)
    return job, callback_secret_new(job)


def _post(job, secret, events):
    return APIClient().post(
        f"/api/v1/training-jobs/{job.pk}/callback/",
        {"events": events},
        format="json",
        HTTP_AUTHORIZATION=f"Bearer {secret}",
    )


def test_started_events_keep_the_last_attempts_and_count_them_all(command_job):
    job, secret = command_job
    for i in range(MAX_ATTEMPTS_LISTED + 15):
        started = {"type": "started", "resumed_from_step": i, "data_sha256": {"t": "x" * 10**4}}
        assert _post(job, secret, [started]).status_code == 200
    job.refresh_from_db()
    attempts = job.artifacts["attempts"]
    assert len(attempts) == MAX_ATTEMPTS_LISTED
    assert attempts[-1]["resumed_from_step"] == MAX_ATTEMPTS_LISTED + 14
    assert job.artifacts["attempts_total"] == MAX_ATTEMPTS_LISTED + 15
    assert len(json.dumps(job.artifacts)) < 20_000  # a 10 kB digest is cut, not stored


def test_a_metric_step_beyond_the_jobs_own_steps_is_refused(command_job):
    job, secret = command_job
    bound = step_bound(job)
    assert job.total_steps and bound == 2 * job.total_steps + 10
    assert _post(job, secret, [{"type": "metrics", "step": bound, "loss": 1.0}]).status_code == 200
    refused = _post(job, secret, [{"type": "metrics", "step": bound + 1, "loss": 1.0}])
    assert refused.status_code == 400
    assert refused.json()["message"] == f"A metrics event's step is at most {bound} for this job."
    assert list(TrainingMetric.objects.values_list("step", flat=True)) == [bound]


def test_a_job_without_a_step_count_is_bounded_by_the_setting(command_job, settings):
    job, secret = command_job
    TrainingJob.objects.filter(pk=job.pk).update(total_steps=0)
    job.refresh_from_db()
    settings.TRAINING_MAX_STEPS = 1000
    assert _post(job, secret, [{"type": "metrics", "step": 1001}]).status_code == 400
    assert _post(job, secret, [{"type": "started", "total_steps": 1001}]).status_code == 400
    job.refresh_from_db()
    assert job.total_steps == 0


def test_metric_rows_are_capped_per_job(command_job, settings):
    job, secret = command_job
    settings.TRAINING_MAX_METRIC_ROWS = 5
    events = [{"type": "metrics", "step": s, "loss": 1.0} for s in range(1, 6)]
    assert _post(job, secret, events).status_code == 200
    refused = _post(job, secret, [{"type": "metrics", "step": 6, "loss": 1.0}])
    assert refused.status_code == 400
    assert refused.json()["message"] == "This job has its 5 metric rows already."
    # a step it has already is updated (a resumed run replays it)
    assert _post(job, secret, [{"type": "metrics", "step": 5, "loss": 0.5}]).status_code == 200
    assert TrainingMetric.objects.get(step=5).loss == 0.5
    assert TrainingMetric.objects.count() == 5


def test_a_final_artifact_over_the_limit_is_refused(command_job):
    job, secret = command_job
    big = {"final": "x" * MAX_FINAL_ARTIFACT_BYTES}
    answer = _post(job, secret, [{"type": "finished", "status": "succeeded", "artifacts": big}])
    assert answer.status_code == 400
    job.refresh_from_db()
    assert "final" not in job.artifacts


def test_the_api_pages_the_metrics_and_the_detail_samples_them(
    project, author, viewer, outsider, training_version, operator_templates, api_client_for
):
    operator_templates({"cluster": {"argv": ["sbatch"]}})
    job = _launch(project, author, training_version)
    TrainingJob.objects.filter(pk=job.pk).update(total_steps=2000)
    TrainingMetric.objects.bulk_create(
        TrainingMetric(
            training_job=job, step=s, loss=1 / s, eval_loss=(2.0 if s % 400 == 0 else None)
        )
        for s in range(1, 1201)
    )
    api = api_client_for(viewer)
    detail = api.get(f"/api/v1/training-jobs/{job.pk}/").json()
    steps = [m["step"] for m in detail["metrics"]]
    assert detail["metrics_count"] == 1200
    assert len(steps) <= 503 and steps[0] == 1 and steps[-1] == 1200
    assert {400, 800, 1200} <= set(steps)  # the sparse eval points all survive
    first = api.get(f"/api/v1/training-jobs/{job.pk}/metrics/").json()
    assert first["count"] == 1200 and first["results"][0]["step"] == 1
    later = api.get(f"/api/v1/training-jobs/{job.pk}/metrics/?page=2").json()
    assert later["results"][0]["step"] == len(first["results"]) + 1
    assert (
        api_client_for(outsider).get(f"/api/v1/training-jobs/{job.pk}/metrics/").status_code == 404
    )
    bad = api.get(f"/api/v1/training-jobs/{job.pk}/metrics/?page=zero")
    assert bad.status_code == 404


def test_the_page_chart_draws_a_sample(
    project, author, training_version, operator_templates, client_for
):
    operator_templates({"cluster": {"argv": ["sbatch"]}})
    job = _launch(project, author, training_version)
    TrainingJob.objects.filter(pk=job.pk).update(total_steps=5000)
    TrainingMetric.objects.bulk_create(
        TrainingMetric(training_job=job, step=s, loss=1.0) for s in range(1, 3001)
    )
    assert len(training_metrics_sampled(training_job=job)) == 500
    page = client_for(author).get(f"/training/{job.pk}/").content.decode()
    drawn = re.search(r'data-testid="loss-chart" data-points="(\d+)"', page)
    assert drawn and int(drawn.group(1)) == 500


def test_spread_keeps_the_ends_and_the_limit():
    steps = list(range(10, 10_010, 3))
    chosen = _spread(steps, 50)
    assert len(chosen) == 50 and chosen[0] == steps[0] and chosen[-1] == steps[-1]
    assert _spread([1, 2], 50) == [1, 2]


def test_a_bad_batch_saves_nothing(project, author, training_version, operator_templates):
    operator_templates({"cluster": {"argv": ["sbatch"]}})
    job = _launch(project, author, training_version)
    with pytest.raises(ApplicationError):
        training_events_apply(
            training_job=job,
            events=[{"type": "started"}, {"type": "metrics", "step": 10**7}],
        )
    job.refresh_from_db()
    assert job.artifacts == {}


def test_the_comparison_charts_draw_a_sample_and_the_summary_counts_every_row(
    project, author, training_version, operator_templates, client_for
):
    from apps.training.selectors import chart_sample, loss_series, rl_series, rl_summary

    operator_templates({"cluster": {"argv": ["sbatch"]}})
    job = _launch(project, author, training_version)
    TrainingMetric.objects.bulk_create(
        TrainingMetric(training_job=job, step=s, loss=1.0, reward=s / 2000, pass_rate=0.5)
        for s in range(1, 1201)
    )
    assert len(loss_series(training_jobs=[job])[job.pk]) == 500
    points = rl_series(training_jobs=[job])[job.pk]
    assert rl_summary(points)["steps"] == 1200 and len(chart_sample(points)) == 500
    page = client_for(author).get(f"/p/acme/training/compare/?jobs={job.pk}").content.decode()
    drawn = re.search(r'data-testid="loss-chart" data-points="(\d+)"', page)
    assert drawn and int(drawn.group(1)) == 500
