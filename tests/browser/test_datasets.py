"""Browser flow of issue 7 (datasets half): a reviewer creates a dataset, builds a version
from approved demonstrations in the UI (a real Celery worker runs the build job), watches it
finish, downloads the `openai` export, and the file passes the OpenAI linter."""

import re

import pytest
from playwright.sync_api import expect

from apps.datasets.formats.lint import lint_lines
from apps.datasets.formats.openai import OpenAILinter
from apps.datasets.models import DatasetVersion
from tests.datasets.conftest import approved_demonstrations, sample_environments  # noqa: F401
from tests.workers import WorkerProcess, purge_queues

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

BUILD_TIMEOUT_MS = 120_000


@pytest.fixture
def worker(tmp_path):
    purge_queues()
    process = WorkerProcess(
        queues="default", concurrency=1, log_path=tmp_path / "worker.log"
    ).start()
    yield process
    process.stop()


def test_build_a_version_and_download_the_openai_export(
    login,
    live_server,
    reviewer,
    project,
    approved_demonstrations,  # noqa: F811
    worker,
    tmp_path,
):
    page = login(reviewer)
    page.goto(f"{live_server.url}/p/{project.slug}/datasets/")
    expect(page.get_by_text("No datasets yet.")).to_be_visible()
    page.get_by_test_id("new-dataset").click()
    page.get_by_label("Name").fill("Browser SFT <b>v</b>")
    page.get_by_label("Description").fill("Built in the browser.")
    page.get_by_test_id("create-dataset").click()
    expect(page.get_by_role("heading", name="Browser SFT <b>v</b>")).to_be_visible()

    page.get_by_test_id("new-version").click()
    page.get_by_label("Seed").fill("11")
    page.get_by_label("Validation fraction").fill("0.3")
    page.get_by_test_id("build-version").click()
    expect(page).to_have_url(re.compile(r"/datasets/\d+/versions/1/$"))

    # The progress panel polls until the worker is done, then the page reloads.
    expect(page.get_by_test_id("version-status")).to_have_text("Ready", timeout=BUILD_TIMEOUT_MS)
    version = DatasetVersion.objects.get()
    expect(page.get_by_test_id("checksum")).to_have_text(version.checksum)
    expect(page.get_by_test_id("train-rows")).to_have_text(str(version.train_rows))
    # The card is Markdown with the name escaped, shown as text.
    expect(page.get_by_test_id("card")).to_contain_text(r"# Browser SFT \<b\>v\</b\> — version 1")

    with page.expect_download() as info:
        page.get_by_test_id("download-openai-train").click()
    download = info.value
    assert download.suggested_filename == "browser-sft-bvb-v1-openai-train.jsonl"
    path = tmp_path / download.suggested_filename
    download.save_as(path)
    lines = path.read_text().splitlines()
    report = lint_lines(OpenAILinter("train"), lines)
    assert report.ok, report.errors
    assert report.rows == version.train_rows >= 10


def test_build_an_rl_prompt_version_and_download_the_verl_parquet(
    login,
    live_server,
    author,
    project,
    sample_environments,  # noqa: F811
    worker,
    tmp_path,
):
    import pyarrow.parquet as pq

    from apps.datasets.models import PromptRow

    page = login(author)
    page.goto(f"{live_server.url}/p/{project.slug}/datasets/new/")
    page.get_by_label("Name").fill("Browser RL")
    page.get_by_label("RL prompts (environment tasks)").check()
    page.get_by_test_id("create-dataset").click()
    expect(page.get_by_test_id("dataset-kind")).to_have_text("RL prompts (environment tasks)")

    page.get_by_test_id("new-version").click()
    page.get_by_label("Seeds").fill("3, 4")
    page.get_by_test_id("build-version").click()
    expect(page).to_have_url(re.compile(r"/datasets/\d+/versions/1/$"))
    expect(page.get_by_test_id("version-status")).to_have_text("Ready", timeout=BUILD_TIMEOUT_MS)
    version = DatasetVersion.objects.get()
    expect(page.get_by_test_id("checksum")).to_have_text(version.checksum)
    expect(page.get_by_test_id("train-rows")).to_have_text(str(version.train_rows))
    expect(page.get_by_test_id("prompt-row-table")).to_be_visible()

    with page.expect_download() as info:
        page.get_by_test_id("download-verl-train").click()
    download = info.value
    assert download.suggested_filename == "browser-rl-v1-verl-train.parquet"
    path = tmp_path / download.suggested_filename
    download.save_as(path)
    rows = pq.read_table(path).to_pylist()
    expected = PromptRow.objects.filter(version=version).order_by("position")
    assert [(r["extra_info"]["task_key"], r["extra_info"]["seed"]) for r in rows] == [
        (p.task_key, p.seed) for p in expected
    ]
    assert {r["extra_info"]["seed"] for r in rows} == {3, 4}
