"""Browser flow of issue 13: an author launches a tiny training job from the form (presets,
advanced hyperparameters folded), a real gpu-queue worker trains it, and the job page's loss
chart grows while it runs, then shows the trained model and its vLLM command."""

import re

import pytest
from playwright.sync_api import expect

pytest.importorskip("trl")  # the `train` extra

from apps.training.models import TrainingJob
from tests.datasets.conftest import approved_demonstrations, sample_environments  # noqa: F401
from tests.training.conftest import training_settings, training_version  # noqa: F401
from tests.workers import WorkerProcess, purge_queues

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]

TRAIN_TIMEOUT_MS = 240_000


@pytest.fixture
def gpu_worker(tmp_path, training_settings):  # noqa: F811
    purge_queues()
    process = WorkerProcess(queues="gpu", concurrency=1, log_path=tmp_path / "worker.log").start()
    yield process
    process.stop()
    print((tmp_path / "worker.log").read_text()[-3000:])


def _points(page) -> int:
    chart = page.get_by_test_id("loss-chart")
    return int(chart.get_attribute("data-points")) if chart.count() else 0


def test_launch_a_tiny_job_and_watch_the_loss_chart_grow(
    login,
    live_server,
    author,
    project,
    training_version,  # noqa: F811
    gpu_worker,
):
    page = login(author)
    page.goto(f"{live_server.url}/p/{project.slug}/training/")
    expect(page.get_by_text("No training jobs yet.")).to_be_visible()
    page.get_by_test_id("new-training").click()
    page.locator("#id_dataset_version").select_option(str(training_version.pk))
    page.locator("#id_preset").select_option("tiny-cpu")
    expect(page.locator("#id_max_steps")).not_to_be_visible()  # folded away
    page.get_by_text("Advanced hyperparameters").click()
    page.locator("#id_max_steps").fill("24")
    page.locator("#id_save_steps").fill("12")
    page.get_by_test_id("launch").click()
    expect(page).to_have_url(re.compile(r"/training/\d+/$"))
    training_job = TrainingJob.objects.get()
    assert training_job.hyperparameters["max_steps"] == 24

    # The live partial polls: the chart appears and gains points while the worker trains.
    expect(page.get_by_test_id("loss-chart")).to_be_visible(timeout=TRAIN_TIMEOUT_MS)
    first = _points(page)
    page.wait_for_function(
        f"document.querySelector('[data-testid=loss-chart]')?.dataset.points > {first}",
        timeout=TRAIN_TIMEOUT_MS,
    )
    expect(page.get_by_test_id("training-status")).to_have_text(
        "Succeeded", timeout=TRAIN_TIMEOUT_MS
    )
    assert _points(page) > first
    page.reload()
    expect(page.get_by_test_id("serve-command")).to_contain_text(
        f"--served-model-name coworkenv-{training_job.pk}"
    )
    expect(page.get_by_test_id("current-step")).to_have_text("24")
