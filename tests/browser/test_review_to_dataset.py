"""Issue 12, item 2: the review queue cannot lead to an empty build. Eval-task runs never
enter the queue; with nothing approved the version form says why and creates nothing; once
the queue's items are approved a version is created."""

import re

import pytest
from playwright.sync_api import expect

from apps.curation.models import Demonstration
from apps.datasets.models import DatasetVersion
from apps.datasets.services import dataset_create
from tests.curation.conftest import import_valid, spec_document, teacher_batch_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_queue_leads_to_a_build_never_to_an_empty_one(
    login, live_server, reviewer, project, author
):
    environment = import_valid(project, author, spec_document(eval_tasks=True))
    teacher_batch_run(project, author, environment)  # two train tasks, one eval task
    first, second = Demonstration.objects.order_by("id")
    dataset = dataset_create(project=project, name="From the queue", user=author)
    page = login(reviewer)

    # Only the two train tasks are waiting.
    page.goto(f"{live_server.url}/p/{project.slug}/review/")
    expect(page.get_by_test_id("review-progress")).to_contain_text("2pending in the project")

    # Nothing approved yet: the form refuses, and the dataset lists no version.
    page.goto(f"{live_server.url}/datasets/{dataset.pk}/versions/new/")
    page.get_by_test_id("build-version").click()
    expect(page.get_by_test_id("version-form")).to_contain_text(
        "Nothing to build yet: this project has no approved train-task demonstration. "
        "Approve some in the review queue first."
    )
    assert not DatasetVersion.objects.exists()
    page.goto(f"{live_server.url}/datasets/{dataset.pk}/")
    expect(page.get_by_test_id("version-table")).to_have_count(0)

    # Work through the queue with the keyboard: n starts, a approves and moves on.
    page.goto(f"{live_server.url}/p/{project.slug}/review/")
    page.keyboard.press("n")
    expect(page).to_have_url(re.compile(rf"/review/{first.pk}/$"))
    page.keyboard.press("a")
    expect(page).to_have_url(re.compile(rf"/review/{second.pk}/$"))
    page.keyboard.press("a")
    expect(page.get_by_text(f"Demonstration #{second.pk}: approved.")).to_be_visible()
    page.goto(f"{live_server.url}/p/{project.slug}/review/")
    expect(page.get_by_test_id("queue-empty")).to_be_visible()

    # Now the build is accepted: version 1 is created and building.
    page.goto(f"{live_server.url}/datasets/{dataset.pk}/versions/new/")
    page.get_by_test_id("build-version").click()
    expect(page).to_have_url(re.compile(rf"/datasets/{dataset.pk}/versions/1/$"))
    version = DatasetVersion.objects.get()
    assert version.status == "building"
