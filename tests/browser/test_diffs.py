"""Issue 12, item 1: an update's state diff shows the fields it changed — on the run page,
the compare page and the review page (all three read ``apps.runs.timeline.record_diff``)."""

import json

import pytest
from playwright.sync_api import expect

from apps.curation.models import Demonstration
from apps.runs.models import Run
from tests.curation.conftest import teacher_batch_run
from tests.runs.conftest import SAMPLES, import_valid

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

EXPECTED = [  # by field name, whatever order the database keeps the JSON keys in
    ("assignee", "—", "tier2-oncall"),
    ("priority", "high", "urgent"),
    ("status", "open", "escalated"),
]


def _assert_update_diff(page, scope=None):
    root = scope or page
    diff = root.locator('[data-testid="diff"]', has_text="update").first
    expect(diff.locator("summary")).to_contain_text("tickets/t-102 · 3 fields changed")
    diff.locator("summary").click()
    rows = diff.locator("tr.changed")
    expect(rows).to_have_count(3)
    for index, (name, before, after) in enumerate(EXPECTED):
        expect(rows.nth(index).locator("td")).to_have_text([name, before, after])


def test_update_diffs_show_the_changed_fields(login, live_server, reviewer, project, author):
    spec = json.loads(next(p for p in SAMPLES if p.name == "support-desk.json").read_text())
    environment = import_valid(project, author, spec)
    teacher_batch_run(project, author, environment, faults=False)
    run = Run.objects.get(task_key="escalate-platinum-outage")
    other = Run.objects.exclude(pk=run.pk).order_by("id").first()
    page = login(reviewer)

    page.goto(f"{live_server.url}/runs/{run.pk}/")
    _assert_update_diff(page)

    page.goto(f"{live_server.url}/runs/compare/?a={run.pk}&b={other.pk}")
    _assert_update_diff(page, page.get_by_test_id("compare-a"))

    demonstration = Demonstration.objects.get(run=run)
    page.goto(f"{live_server.url}/p/{project.slug}/review/{demonstration.pk}/")
    _assert_update_diff(page)
