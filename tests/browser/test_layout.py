"""Every page of the main flow fits the screen: at a laptop's 1366x900 and a phone's 390x844
nothing scrolls sideways (long values and JSON wrap or scroll inside their own box)."""

import io

import pytest
from django.core.management import call_command
from django.urls import reverse

from apps.accounts.models import Project
from apps.core.models import Job
from apps.curation.models import Demonstration
from apps.environments.models import Environment, Grader, ToolSchema
from apps.runs.models import Run, RunBatch
from apps.synthesis.models import SynthesisJob, SynthesisSlot
from tests.browser.conftest import htmx_settled

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

VIEWPORTS = [(1366, 900), (390, 844)]


def main_flow_paths() -> list[str]:
    project = Project.objects.get(slug="demo")
    slug = project.slug
    environment = Environment.objects.filter(project=project).order_by("pk").first()
    # The widest sample: the one with the most service records.
    widest = max(Environment.objects.filter(project=project), key=lambda e: e.records.count())
    task = environment.tasks.order_by("pk").first()
    grader = Grader.objects.filter(task__environment=environment).order_by("pk").first()
    tool = ToolSchema.objects.filter(environment=environment).order_by("pk").first()
    batch = RunBatch.objects.filter(project=project).order_by("pk").first()
    runs = list(Run.objects.filter(batch=batch).order_by("pk")[:2])
    demonstration = Demonstration.objects.filter(project=project).order_by("pk").first()
    synthesis = SynthesisJob.objects.filter(project=project).order_by("pk").first()
    slot = SynthesisSlot.objects.filter(synthesis=synthesis).order_by("pk").first()
    job = Job.objects.filter(project=project).order_by("pk").first()
    paths = [
        reverse("workspace:dashboard", args=[slug]),
        reverse("environments:list", args=[slug]),
        reverse("environments:import", args=[slug]),
        reverse("environments:edit_spec", args=[widest.pk]),
        reverse("environments:task_edit", args=[task.pk]),
        reverse("environments:grader_edit", args=[grader.pk]),
        reverse("environments:tool_edit", args=[tool.pk]),
        reverse("capabilities:list", args=[slug]),
        reverse("capabilities:coverage", args=[slug]),
        reverse("synthesis:list", args=[slug]),
        reverse("synthesis:create", args=[slug]),
        reverse("synthesis:detail", args=[synthesis.pk]),
        reverse("synthesis:slot", args=[slot.pk]),
        reverse("runs:batch_list", args=[slug]),
        reverse("runs:batch_create", args=[slug]),
        reverse("runs:batch_detail", args=[batch.pk]),
        reverse("runs:detail", args=[runs[0].pk]),
        reverse("runs:compare") + f"?a={runs[0].pk}&b={runs[1].pk}",
        reverse("runs:evaluation", args=[slug]),
        reverse("runs:leaderboard", args=[slug]),
        reverse("curation:queue", args=[slug]),
        reverse("curation:list", args=[slug]),
        reverse("curation:detail", args=[demonstration.pk]),
        reverse("curation:review", args=[slug, demonstration.pk]),
        reverse("datasets:list", args=[slug]),
        reverse("datasets:create", args=[slug]),
        reverse("core:job_list", args=[slug]),
        reverse("core:job_detail", args=[job.pk]),
        reverse("llm:endpoint_list", args=[slug]),
        reverse("accounts:member_list", args=[slug]),
        reverse("accounts:project_settings", args=[slug]),
        reverse("accounts:token_list"),
        reverse("accounts:project_list"),
    ]
    for tab in ("overview", "services", "tools", "tasks", "validation", "runs", "spec"):
        paths.append(reverse("environments:tab", args=[widest.pk, tab]))
    return paths


def test_no_page_of_the_main_flow_scrolls_sideways(page, live_server, login):
    call_command("seed_demo", url=live_server.url, stdout=io.StringIO())
    paths = main_flow_paths()
    page.goto(f"{live_server.url}/login/")
    page.get_by_label("Username").fill("demo")
    page.get_by_label("Password").fill("cowork-demo")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_load_state()
    too_wide = []
    for width, height in VIEWPORTS:
        page.set_viewport_size({"width": width, "height": height})
        for path in paths:
            response = page.goto(f"{live_server.url}{path}")
            assert response.status == 200, path
            # Parts loaded by htmx after the page (the environment's Runs tab) count too.
            htmx_settled(page)
            scroll_width = page.evaluate("document.documentElement.scrollWidth")
            inner_width = page.evaluate("innerWidth")
            if scroll_width > inner_width:
                too_wide.append((width, path, scroll_width))
    assert too_wide == []
