"""Browser flow of issue 6: start an oracle batch from the UI, watch it finish (a real Celery
worker), open a run, expand a tool call's diff, read the verdicts, open the evaluation page;
model output with markup is shown as text and never runs."""

import json
import re

import pytest
from playwright.sync_api import expect

from apps.runs.models import Run, RunBatch
from tests.browser.conftest import htmx_settled
from tests.runs.conftest import SAMPLES, import_valid
from tests.workers import WorkerProcess, purge_queues

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

BATCH_TIMEOUT_MS = 120_000
EVIL = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2"><b>bold</b>'


@pytest.fixture
def worker(tmp_path):
    purge_queues()
    process = WorkerProcess(queues="llm", concurrency=2, log_path=tmp_path / "worker.log").start()
    yield process
    process.stop()


def test_oracle_batch_from_the_ui(login, live_server, author, project, worker):
    environment = import_valid(project, author, json.loads(SAMPLES[0].read_text()))
    tasks = environment.tasks.count()
    page = login(author)
    page.goto(f"{live_server.url}/p/{project.slug}/runs/")
    expect(page.get_by_text("No run batches yet.")).to_be_visible()
    page.get_by_test_id("new-batch").click()

    page.get_by_label("Name").fill("Oracle in the browser")
    page.get_by_test_id("choices-environments").get_by_label(environment.name).check()
    page.locator("#id_trials").fill("2")
    page.get_by_test_id("start-batch").click()

    expect(page).to_have_url(re.compile(r"/runs/batches/\d+/$"))
    progress = page.get_by_test_id("batch-progress")
    expect(progress).to_have_attribute("data-status", "succeeded", timeout=BATCH_TIMEOUT_MS)
    expect(page.get_by_test_id("batch-done")).to_have_text(f"{2 * tasks}/{2 * tasks} trials done")
    expect(page.get_by_test_id("avg-score")).to_have_text("1.00")
    expect(page.get_by_test_id("pass-rate")).to_have_text("100%")
    expect(page.get_by_test_id("run-row")).to_have_count(2 * tasks)
    batch = RunBatch.objects.get()
    assert batch.name == "Oracle in the browser"

    # A run whose model output carries markup: it must show as text and never execute.
    run = Run.objects.filter(batch=batch, tool_calls__gt=0).order_by("id").first()
    run.transcript = [*run.transcript, {"role": "assistant", "content": EVIL}]
    run.save(update_fields=["transcript"])

    page.locator(f'a[href="/runs/{run.pk}/"]').first.click()
    expect(page).to_have_url(re.compile(rf"/runs/{run.pk}/$"))
    expect(page.get_by_test_id("assistant-message").last).to_have_text(EVIL)
    assert page.evaluate("window.pwned") is None

    # Expand a tool call's diff.
    diff = page.get_by_test_id("diff").first
    expect(diff.get_by_test_id("diff-table")).to_be_hidden()
    diff.locator("summary").click()
    expect(diff.get_by_test_id("diff-table")).to_be_visible()
    expect(diff.locator("tr.changed").first).to_be_visible()

    # The verdicts, all passed for the oracle.
    verdicts = page.get_by_test_id("verdict")
    expect(verdicts).to_have_count(len(run.verdicts))
    expect(page.locator('[data-testid="verdict"][data-status="passed"]')).to_have_count(
        len(run.verdicts)
    )

    # The evaluation page, from the batch.
    page.go_back()
    page.get_by_role("link", name="Evaluation", exact=True).first.click()
    expect(page).to_have_url(re.compile(r"/runs/evaluation/\?batch=\d+$"))
    expect(page.get_by_test_id("model-row")).to_have_count(1)
    expect(page.get_by_test_id("model-row")).to_contain_text("oracle")
    expect(page.get_by_test_id("line-chart").first).to_be_visible()


def test_a_rejected_batch_form_brings_its_problem_into_view(login, live_server, author, project):
    """The form is long and swapped in place: its problem (here beside Group size, far above
    the Start button) is scrolled to and its field focused, and the input is kept."""
    environment = import_valid(project, author, json.loads(SAMPLES[0].read_text()))
    page = login(author)
    page.set_viewport_size({"width": 1366, "height": 700})
    page.goto(f"{live_server.url}/p/{project.slug}/runs/new/")
    page.get_by_test_id("choices-environments").get_by_label(environment.name).check()
    page.get_by_label("Group size G").fill("4")  # groups are for the student role only
    page.get_by_test_id("start-batch").click()

    group_size = page.get_by_label("Group size G")
    expect(page.get_by_text("Rollout groups are for the student role.")).to_be_in_viewport()
    expect(group_size).to_be_focused()
    expect(group_size).to_have_value("4")
    expect(
        page.get_by_test_id("choices-environments").get_by_label(environment.name)
    ).to_be_checked()
    assert not RunBatch.objects.exists()


def test_environment_runs_tab_loads_filters_and_starts_a_batch(login, live_server, author, project):
    """The environment page's Runs tab: empty, it offers a run batch with the environment
    chosen; with runs, it lists them and a filter swaps the tab in place."""
    from apps.runs.models import Executor
    from apps.runs.services import (
        BatchSettings,
        TaskSelection,
        run_batch_create,
        run_batch_execute_inline,
    )

    environment = import_valid(project, author, json.loads(SAMPLES[0].read_text()))
    page = login(author)
    page.goto(f"{live_server.url}/environments/{environment.pk}/")
    page.locator('a[data-tab="runs"]').click()
    expect(page).to_have_url(re.compile(rf"/environments/{environment.pk}/runs/$"))
    expect(page.get_by_test_id("environment-runs-empty")).to_contain_text("No runs yet")
    page.get_by_test_id("new-batch-for-environment").click()
    expect(page).to_have_url(re.compile(rf"/runs/new/\?environment={environment.pk}$"))
    box = page.get_by_test_id("choices-environments").get_by_label(environment.name)
    expect(box).to_be_checked()

    batch = run_batch_execute_inline(
        batch=run_batch_create(
            project=project,
            user=author,
            selection=TaskSelection(environments=(environment.pk,)),
            settings=BatchSettings(trials=1),
            executor=Executor.INLINE,
        )
    )
    runs = Run.objects.filter(batch=batch).count()
    page.goto(f"{live_server.url}/environments/{environment.pk}/runs/")
    expect(page.get_by_test_id("environment-run-row")).to_have_count(runs)
    htmx_settled(page)
    page.get_by_label("Status").select_option("errored")
    expect(page).to_have_url(re.compile(r"/runs/\?(.*&)?status=errored"))
    expect(page.get_by_test_id("environment-runs-empty")).to_contain_text("No runs match.")
    page.get_by_role("link", name="show every run").click()
    expect(page.get_by_test_id("environment-run-row")).to_have_count(runs)
