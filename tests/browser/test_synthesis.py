"""Browser flow of issue 5: launch a template synthesis job from the UI, watch the live
progress reach the end (a real Celery worker), open a result and its attempt timeline."""

import re

import pytest
from playwright.sync_api import expect

from apps.capabilities.services import capability_catalogue_seed
from apps.synthesis.models import SlotStatus, SynthesisJob
from tests.workers import WorkerProcess, purge_queues

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

JOB_TIMEOUT_MS = 120_000


@pytest.fixture
def worker(tmp_path):
    purge_queues()
    process = WorkerProcess(concurrency=2, log_path=tmp_path / "worker.log").start()
    yield process
    process.stop()


def test_template_synthesis_from_the_ui(login, live_server, author, project, worker):
    capability_catalogue_seed(project=project)
    page = login(author)
    page.goto(f"{live_server.url}/p/{project.slug}/synthesis/")
    expect(page.get_by_text("No synthesis jobs yet.")).to_be_visible()
    page.get_by_role("button", name="New synthesis job").click()

    choices = page.get_by_test_id("choices-capabilities")
    choices.get_by_placeholder("Filter capabilities…").fill("clarify")
    expect(choices.get_by_label("Resolve scheduling conflicts")).to_be_hidden()
    choices.get_by_label("Clarify before acting").check()
    choices.get_by_placeholder("Filter capabilities…").fill("")
    choices.get_by_label("Resolve scheduling conflicts").check()
    expect(choices).to_contain_text("2 selected")
    # Template is the generator: the LLM-only fields stay out of the way.
    expect(page.get_by_test_id("llm-fields")).to_be_hidden()
    page.get_by_label("LLM", exact=True).check()
    expect(page.get_by_test_id("llm-fields")).to_be_visible()
    page.get_by_label("Template (offline)").check()
    expect(page.get_by_test_id("llm-fields")).to_be_hidden()
    page.get_by_label("Environments").fill("2")
    page.get_by_label("Tasks per environment").fill("2")
    page.locator("#id_seed").fill("31")  # the family select's help names the seed too
    page.get_by_role("button", name="Start synthesis").click()

    expect(page).to_have_url(re.compile(r"/synthesis/\d+/$"))
    progress = page.get_by_test_id("synthesis-progress")
    expect(progress).to_have_attribute("data-status", "succeeded", timeout=JOB_TIMEOUT_MS)
    expect(page.get_by_test_id("synthesis-message")).to_have_text(
        "2 of 2 finished: 2 valid, 0 invalid, 0 failed."
    )
    expect(page.locator('[data-testid="slot-row"][data-status="valid"]')).to_have_count(2)

    synthesis = SynthesisJob.objects.get()
    assert synthesis.seed == 31
    slot = synthesis.slots.get(index=0)
    assert slot.status == SlotStatus.VALID

    # Open the first slot's attempt timeline, then its environment.
    page.get_by_test_id("slot-row").first.get_by_role("link", name="1", exact=True).first.click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Slot 1 of")
    expect(page.get_by_test_id("attempt")).to_have_count(1)
    expect(page.get_by_test_id("attempt").first).to_contain_text("Draft")
    expect(page.get_by_test_id("attempt").first).to_contain_text("valid")
    page.get_by_test_id("slot-environment").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text(slot.environment.name)


def test_submitting_without_a_capability_says_so_beside_the_checkboxes(
    login, live_server, author, project
):
    """The capabilities select is hidden behind its checkboxes, so the browser's own "fill
    this in" bubble has nowhere to point: the button used to do nothing at all."""
    capability_catalogue_seed(project=project)
    page = login(author)
    page.goto(f"{live_server.url}/p/{project.slug}/synthesis/new/")
    problem = page.get_by_test_id("choices-problem-capabilities")
    expect(problem).to_be_hidden()
    page.get_by_role("button", name="Start synthesis").click()
    expect(problem).to_be_visible()
    expect(problem).to_have_text("Choose at least one.")
    expect(page).to_have_url(re.compile(r"/synthesis/new/$"))
    choices = page.get_by_test_id("choices-capabilities")
    choices.get_by_label("Clarify before acting").check()
    expect(problem).to_be_hidden()
    assert not SynthesisJob.objects.exists()
