"""Browser flow: a student batch with rollout groups; its groups page switches the reward /
advantage / credit variant in place (htmx), keeps the choice in the address, and shows the
reason of a variant that cannot be."""

import json
import re

import pytest
from playwright.sync_api import expect

from apps.runs.models import Executor, RunRole
from apps.runs.services import (
    BatchSettings,
    TaskSelection,
    run_batch_create,
    run_batch_execute_inline,
)
from tests.runs.conftest import SAMPLES, import_valid

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_groups_page_variant_selector(login, live_server, author, project):
    environment = import_valid(project, author, json.loads(SAMPLES[0].read_text()))
    batch = run_batch_create(
        project=project,
        user=author,
        role=RunRole.STUDENT,
        selection=TaskSelection(environments=(environment.pk,)),
        settings=BatchSettings(group_size=2, discount=0.9),
        executor=Executor.INLINE,
    )
    run_batch_execute_inline(batch=batch)
    tasks = environment.tasks.count()

    page = login(author)
    page.goto(f"{live_server.url}/runs/batches/{batch.pk}/")
    page.get_by_test_id("batch-groups-link").click()
    expect(page).to_have_url(re.compile(rf"/runs/batches/{batch.pk}/groups/$"))
    expect(page.get_by_test_id("group")).to_have_count(tasks)
    expect(page.get_by_test_id("member")).to_have_count(2 * tasks)
    expect(page.get_by_test_id("member-advantage").first).to_have_text("0.0000")

    page.get_by_test_id("variant-credit").select_option("turn")
    expect(page).to_have_url(re.compile(r"credit=turn"))
    expect(page.get_by_test_id("member-turns").first).to_contain_text("t0: ")
    page.get_by_test_id("variant-advantage").select_option("rloo")
    expect(page.get_by_test_id("variant-error")).to_contain_text(
        "Per-turn and per-call credit are normalised with or without std scaling"
    )
    page.get_by_test_id("variant-credit").select_option("trajectory")
    expect(page.get_by_test_id("member-reward").first).to_have_text("1.0000")
    expect(page.get_by_test_id("variant-error")).to_have_count(0)
