"""Issue 27, item 2: a page that follows a job swaps to its finished state by itself. Each
test opens the page while the job is under way, ends the job through its own service (as a
worker would), and waits for the page to show Cancel gone and the results there, without a
reload of its own."""

import pytest
from django.urls import reverse
from django.utils import timezone
from playwright.sync_api import expect

from apps.core.models import JobStatus
from apps.core.services import job_claim, job_finish, job_report_progress
from apps.datasets.services import (
    VersionFilter,
    dataset_create,
    dataset_version_build_job,
    dataset_version_create,
)
from apps.runs.models import Executor
from apps.runs.services import (
    BatchSettings,
    TaskSelection,
    run_batch_create,
    run_batch_execute_inline,
)
from apps.serving.services import (
    model_server_register,
    model_server_start,
    model_server_stop,
    model_server_unregister,
)
from apps.synthesis.services import synthesis_run_inline
from apps.training.services import training_job_create
from apps.training.services.reports import training_callback_receive
from tests.datasets.conftest import approved_demonstrations, sample_environments  # noqa: F401
from tests.synthesis.conftest import capabilities, catalogue, start_template  # noqa: F401
from tests.training.conftest import TINY, training_settings, training_version  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# The live parts poll every 2 s: two polls and a reload, with room for a slow shared machine.
LIVE_MS = 15_000


def test_training_page_shows_the_model_once_the_job_ends(
    login,
    live_server,
    author,
    project,
    training_version,  # noqa: F811
):
    training_job = training_job_create(
        project=project,
        user=author,
        dataset_version=training_version,
        backend="local",
        preset="tiny-cpu",
        hyperparameters=TINY,
        enqueue=False,
    )
    page = login(author)
    page.goto(f"{live_server.url}{reverse('training:detail', args=[training_job.pk])}")
    expect(page.get_by_test_id("cancel-training")).to_be_visible()
    expect(page.get_by_test_id("trained-model")).to_have_count(0)

    finished = {"type": "finished", "status": "succeeded", "message": "Trained."}
    finished["artifacts"] = {"final": "/models/tiny/final", "kind": "full"}
    training_callback_receive(training_job=training_job, events=[finished])

    expect(page.get_by_test_id("trained-model")).to_be_visible(timeout=LIVE_MS)
    expect(page.get_by_test_id("serve-command")).to_contain_text("/models/tiny/final")
    expect(page.get_by_test_id("cancel-training")).to_have_count(0)
    expect(page.get_by_test_id("training-status")).to_have_text("Succeeded")


def test_synthesis_page_shows_the_environments_once_the_job_ends(
    login,
    live_server,
    author,
    start_template,  # noqa: F811
):
    synthesis = start_template(count=2)
    page = login(author)
    page.goto(f"{live_server.url}{reverse('synthesis:detail', args=[synthesis.pk])}")
    progress = page.get_by_test_id("synthesis-progress")
    cancel = progress.get_by_role("button", name="Cancel")
    expect(cancel).to_be_visible()

    synthesis_run_inline(synthesis=synthesis)

    expect(progress).to_have_attribute("data-status", "succeeded", timeout=LIVE_MS)
    expect(cancel).to_have_count(0)
    expect(page.locator('[data-testid="slot-row"][data-status="valid"]')).to_have_count(2)
    expect(page.get_by_test_id("slot-row").first.get_by_role("link").nth(2)).to_be_visible()


def test_batch_page_shows_the_scores_once_the_batch_ends(
    login,
    live_server,
    author,
    project,
    sample_environments,  # noqa: F811
):
    batch = run_batch_create(
        project=project,
        user=author,
        name="Oracle while you watch",
        selection=TaskSelection(environments=(sample_environments[0].pk,)),
        settings=BatchSettings(faults=False),
        executor=Executor.INLINE,
    )
    page = login(author)
    page.goto(f"{live_server.url}{reverse('runs:batch_detail', args=[batch.pk])}")
    expect(page.get_by_test_id("cancel-batch")).to_be_visible()
    expect(page.get_by_test_id("by-capability")).to_have_count(0)

    run_batch_execute_inline(batch=batch)

    expect(page.get_by_test_id("batch-status")).to_have_text("Succeeded", timeout=LIVE_MS)
    expect(page.get_by_test_id("cancel-batch")).to_have_count(0)
    expect(page.get_by_test_id("pass-rate")).not_to_have_text("—")
    expect(page.get_by_test_id("by-capability")).to_be_visible()


def test_version_page_shows_the_rows_once_the_build_ends(
    login,
    live_server,
    author,
    project,
    approved_demonstrations,  # noqa: F811
):
    dataset = dataset_create(project=project, name="Watched build", user=author)
    version = dataset_version_create(
        dataset=dataset, user=author, filters=VersionFilter(), enqueue=False
    )
    page = login(author)
    page.goto(f"{live_server.url}{reverse('datasets:version_detail', args=[dataset.pk, 1])}")
    expect(page.get_by_test_id("version-status")).to_have_text("Building")
    expect(page.get_by_test_id("rebuild-version")).to_have_count(0)

    dataset_version_build_job(version.job_id)

    expect(page.get_by_test_id("version-status")).to_have_text("Ready", timeout=LIVE_MS)
    expect(page.get_by_test_id("train-rows")).not_to_have_text("0")
    expect(page.get_by_test_id("row-table")).to_be_visible()
    expect(page.get_by_test_id("rebuild-version")).to_be_visible()


def test_server_page_shows_the_endpoint_then_the_stop(login, live_server, author, project):
    """The rows as the gpu worker leaves them (``apps.serving.running``), without a model
    process: claimed, then answering and registered, then stopped on request."""
    server = model_server_start(project=project, user=author, model_path="org/tiny-model")
    page = login(author)
    page.goto(f"{live_server.url}{reverse('serving:detail', args=[server.pk])}")
    expect(page.get_by_test_id("server-status")).to_have_text("Pending")
    expect(page.get_by_test_id("stop-server")).to_be_visible()

    job = job_claim(job_id=server.job_id)
    server.host, server.port, server.served_model = "127.0.0.1", 18_000, "org/tiny-model"
    server.save(update_fields=["host", "port", "served_model"])
    model_server_register(server=server, now=timezone.now())
    job_report_progress(job=job, done=0, message=f"Serving at {server.base_url}")

    expect(page.get_by_test_id("server-status")).to_have_text("Running", timeout=LIVE_MS)
    expect(page.get_by_test_id("server-endpoint")).to_contain_text(f"served-{server.pk}")
    expect(page.get_by_test_id("server-message")).to_have_text(f"Serving at {server.base_url}")

    model_server_stop(server=server)
    model_server_unregister(server=server)
    job_finish(job=job, status=JobStatus.CANCELLED, message="Cancelled.")

    expect(page.get_by_test_id("server-status")).to_have_text("Cancelled", timeout=LIVE_MS)
    expect(page.get_by_test_id("stop-server")).to_have_count(0)
    expect(page.get_by_test_id("server-endpoint")).to_have_count(0)
