"""A long-horizon run's page (issue 27, item 5: 7,700 px of trajectory) opens with links to
each turn, grouped by the working day it fell on."""

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from apps.runs.models import Executor, Run
from apps.runs.services import TaskSelection, run_batch_create, run_batch_execute_inline
from apps.synthesis.services import synthesis_run_inline
from tests.synthesis.conftest import capabilities, catalogue, start_template  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_long_horizon_run_links_to_its_turns_and_days(
    login,
    live_server,
    author,
    project,
    start_template,  # noqa: F811
):
    synthesis = start_template(count=1, tasks_per_environment=1, horizon="long", seed=5)
    synthesis_run_inline(synthesis=synthesis)
    environment = synthesis.slots.get().environment
    batch = run_batch_create(
        project=project,
        user=author,
        selection=TaskSelection(environments=(environment.pk,)),
        executor=Executor.INLINE,
    )
    run_batch_execute_inline(batch=batch)
    run = max(Run.objects.filter(batch=batch), key=lambda r: len(r.transcript))
    turns = sum(1 for message in run.transcript if message.get("role") == "user")
    assert turns >= 5  # a long horizon: 5-12 turns over a week or two

    page = login(author)
    page.goto(f"{live_server.url}{reverse('runs:detail', args=[run.pk])}")
    nav = page.get_by_test_id("turn-nav")
    links = nav.get_by_role("link")
    expect(links).to_have_count(turns)
    assert page.get_by_test_id("turn-day").count() > 1  # the turns fall on several days
    expect(page.get_by_test_id("turn-day").first).to_contain_text("day 1")
    last = page.locator(links.last.get_attribute("href"))
    expect(last).not_to_be_in_viewport()
    links.last.click()
    expect(last).to_be_in_viewport()
    expect(last).to_contain_text(f"turn {turns - 1}")
