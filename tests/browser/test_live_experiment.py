"""Issue 27, item 2, for experiments: the page follows each stage in place and swaps to its
finished state by itself, whether the last stage fails or the experiment succeeds (the
results table then appears without a reload of the test's own)."""

import dataclasses
import re

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from apps.core.models import ACTIVE_JOB_STATUSES, Job
from apps.experiments.advance import STEPS, experiment_advance
from apps.experiments.models import Stage
from apps.experiments.services import experiment_create
from apps.runs.models import RunBatch
from apps.runs.services import run_batch_cancel
from apps.serving.models import ModelServer
from tests.experiments.conftest import catalogue, recipe, small, student  # noqa: F401
from tests.workers import wait_for

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# The live parts poll every 2 s: two polls and a reload, with room for a slow shared machine.
LIVE_MS = 15_000


def _stage_row(live, name):
    return live.locator(f'[data-testid="stage-row"][data-stage="{name}"]')


def test_experiment_page_shows_each_stage_and_the_failure(
    login,
    live_server,
    author,
    catalogue,  # noqa: F811
    recipe,  # noqa: F811
):
    """Advanced as its worker would (``experiment_advance``): the synthesis stage done and
    the teacher's batch started show in place; the batch cancelled, the experiment fails."""
    experiment = experiment_create(project=catalogue, user=author, recipe=recipe, enqueue=False)
    experiment_advance(experiment_id=experiment.pk)
    page = login(author)
    page.goto(f"{live_server.url}{reverse('experiments:detail', args=[experiment.pk])}")
    live = page.get_by_test_id("experiment-live")
    synthesis, teacher = _stage_row(live, "synthesis"), _stage_row(live, "teacher")
    expect(live).to_have_attribute("data-status", "running")
    expect(synthesis).to_have_attribute("data-status", "running")

    STEPS[Stage.SYNTHESIS].run(experiment.stages.get(stage=Stage.SYNTHESIS))
    experiment_advance(experiment_id=experiment.pk)

    expect(synthesis).to_have_attribute("data-status", "succeeded", timeout=LIVE_MS)
    expect(teacher).to_have_attribute("data-status", "running")
    expect(teacher.get_by_role("link")).not_to_have_count(0)

    teacher_batch = experiment.stages.get(stage=Stage.TEACHER).outputs["batch"]
    run_batch_cancel(batch=RunBatch.objects.get(pk=teacher_batch))
    experiment_advance(experiment_id=experiment.pk)

    expect(page.get_by_test_id("experiment-status")).to_have_text("Failed", timeout=LIVE_MS)
    expect(teacher).to_have_attribute("data-status", "failed")
    expect(page.get_by_test_id("experiment-message")).to_contain_text("Teacher batch")
    expect(live).not_to_have_attribute("hx-get", re.compile(".*"))


def test_experiment_page_shows_the_results_once_it_succeeds(
    login,
    live_server,
    author,
    catalogue,  # noqa: F811
    small,  # noqa: F811
    student,  # noqa: F811
    monkeypatch,
):
    """The whole small loop worked inline up to the last student batch, left for a worker;
    the page opened then shows that stage running and no GRPO score in the table. The batch
    worked and the experiment advanced, the page turns to Succeeded with the GRPO scores
    and the weaknesses button, and stops polling."""
    small["evaluation"] = {"k": 1, "max_tokens": 24}
    small["student_endpoint"] = "student"
    small["grpo"]["hyperparameters"] = {"max_steps": 2}
    last = STEPS[Stage.EVAL_GRPO]
    monkeypatch.setitem(STEPS, Stage.EVAL_GRPO, dataclasses.replace(last, run=None))
    experiment = experiment_create(project=catalogue, user=author, recipe=small, enqueue=False)
    experiment_advance(experiment_id=experiment.pk, inline=True)
    page = login(author)
    page.goto(f"{live_server.url}{reverse('experiments:detail', args=[experiment.pk])}")
    live = page.get_by_test_id("experiment-live")
    expect(live).to_have_attribute("data-status", "running")
    expect(_stage_row(live, "eval_sft")).to_have_attribute("data-status", "succeeded")
    expect(_stage_row(live, "eval_grpo")).to_have_attribute("data-status", "running")
    expect(page.get_by_test_id("synthesize-for-weaknesses")).to_have_count(0)
    after_grpo = page.locator('[data-testid="results-row"][data-group="all"]').filter(
        has_text="After GRPO"
    )
    score = after_grpo.locator("td").nth(3)
    expect(score).to_have_text("—")

    last.run(experiment.stages.get(stage=Stage.EVAL_GRPO))
    experiment_advance(experiment_id=experiment.pk)

    expect(page.get_by_test_id("experiment-status")).to_have_text("Succeeded", timeout=LIVE_MS)
    expect(score).to_have_text(re.compile(r"^\d\.\d{3}$"))
    expect(page.get_by_test_id("synthesize-for-weaknesses")).to_be_visible()
    expect(page.get_by_test_id("experiment-live")).not_to_have_attribute("hx-get", re.compile(".*"))
    # the served models stop once nothing is left to ask them: their threads end here
    served = list(ModelServer.objects.values_list("job_id", flat=True))
    wait_for(
        lambda: not Job.objects.filter(pk__in=served, status__in=ACTIVE_JOB_STATUSES).exists(),
        timeout=120,
        interval=0.2,
        message="the model servers to stop",
    )
