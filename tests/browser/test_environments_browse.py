"""Browser flows of the environment list, import and bulk actions (Chromium)."""

import json
import re

import pytest
from playwright.sync_api import expect

from apps.core.models import Job
from apps.environments.models import Environment
from tests.environments.conftest import SAMPLES

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SPEC_PATH = SAMPLES[0]


def test_author_imports_browses_filters_and_validates(login, live_server, project, author):
    page = login(author)
    page.goto(f"{live_server.url}/p/{project.slug}/environments/")
    expect(page.get_by_test_id("empty-state")).to_contain_text("No environments yet.")

    # A pasted spec with a syntax error: the error comes back in place, nothing is saved.
    page.get_by_test_id("import-button").click()
    page.get_by_label("…or paste a spec").fill('{\n  "name": "x",\n  "domain" "y"\n}')
    page.get_by_label("Validate after importing").uncheck()
    page.get_by_test_id("import-submit").click()
    expect(page.get_by_test_id("import-error-message")).to_have_text(
        "The pasted text is not valid JSON: line 3, column 12: Expecting ':' delimiter."
    )
    assert not Environment.objects.exists()

    # Upload a sample: it opens on its own page.
    page.get_by_label("…or paste a spec").fill("")
    page.get_by_label("Spec file").set_input_files(str(SPEC_PATH))
    page.get_by_label("Validate after importing").uncheck()
    page.get_by_test_id("import-submit").click()
    expect(page).to_have_url(re.compile(r"/environments/\d+/$"))
    environment = Environment.objects.get()
    assert page.url.endswith(f"/environments/{environment.pk}/")
    expect(page.locator(".messages")).to_contain_text(f"Imported “{environment.name}”")

    # The list: the row, a search that matches nothing (live, URL updated), clearing it.
    page.get_by_role("navigation", name="Project").get_by_role("link", name="Environments").click()
    rows = page.get_by_test_id("environment-row")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text(environment.name)
    expect(rows.first).to_contain_text("not validated")
    page.get_by_label("Search").fill("zzz-nothing")
    expect(page.get_by_test_id("empty-state")).to_contain_text(
        "No environments match these filters."
    )
    expect(page).to_have_url(re.compile(r"q=zzz-nothing"))
    page.get_by_test_id("clear-filters").click()
    expect(page).to_have_url(f"{live_server.url}/p/{project.slug}/environments/")
    expect(page.get_by_label("Search")).to_have_value("")
    expect(rows).to_have_count(1)

    # Bulk validate the ticked row: one job, whose page polls.
    page.get_by_label(f"Select {environment.name}").check()
    page.get_by_test_id("bulk-validate").click()
    expect(page).to_have_url(re.compile(r"/jobs/\d+/$"))
    job = Job.objects.get()
    assert page.url.endswith(f"/jobs/{job.pk}/")
    expect(page.get_by_test_id("job-status")).to_be_visible()
    assert job.params == {"environment_ids": [environment.pk]}

    # Deleting takes two steps: archive from the confirm page, then delete for good.
    page.goto(f"{live_server.url}/environments/{environment.pk}/delete/")
    page.get_by_test_id("archive-submit").click()
    expect(page.get_by_test_id("delete-confirm")).to_be_visible()
    page.get_by_test_id("delete-submit").click()
    expect(page).to_have_url(f"{live_server.url}/p/{project.slug}/environments/")
    expect(page.locator(".messages")).to_contain_text(f"Deleted “{environment.name}”")
    assert not Environment.objects.exists()


def test_viewer_sees_no_import_or_validate(login, live_server, project, author, viewer):
    from apps.environments.services import environment_import

    environment_import(project=project, spec=json.loads(SPEC_PATH.read_text()), user=author)
    page = login(viewer)
    page.goto(f"{live_server.url}/p/{project.slug}/environments/")
    expect(page.get_by_test_id("environment-row")).to_have_count(1)
    expect(page.get_by_test_id("import-button")).to_have_count(0)
    expect(page.get_by_test_id("bulk-validate")).to_have_count(0)
    expect(page.get_by_test_id("bulk-export")).to_be_visible()
    # Posting anyway (with a valid CSRF token) is refused by the server, and nothing starts.
    token = json.loads(page.locator("body").get_attribute("hx-headers"))["X-CSRFToken"]
    response = page.request.post(
        f"{live_server.url}/p/{project.slug}/environments/bulk/",
        form={"action": "validate", "ids": str(Environment.objects.get().pk)},
        headers={"X-CSRFToken": token, "Referer": page.url},
    )
    assert response.status == 403
    assert "CSRF" not in response.text()
    assert not Job.objects.exists()
