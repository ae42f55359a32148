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
