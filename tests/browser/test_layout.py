"""Every page of the main flow fits the screen: at a laptop's 1366x900 and a phone's 390x844
nothing scrolls sideways (long values and JSON wrap or scroll inside their own box); at the
laptop's width the metric tables show every column; identifiers never wrap; no page asks a
host other than the app's own for anything (issue 27)."""

import copy
import io
from urllib.parse import urlsplit

import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from apps.accounts.models import Project
from apps.capabilities.models import Capability
from apps.core.models import Job
from apps.core.services import job_claim
from apps.curation.models import Demonstration
from apps.datasets.models import DatasetVersion
from apps.environments.models import Environment, Grader, ToolSchema
from apps.experiments.advance import experiment_advance
from apps.experiments.forms import EXAMPLE_RECIPE
from apps.experiments.models import Experiment
from apps.experiments.services import experiment_create
from apps.runs.models import Run, RunBatch
from apps.serving.models import ModelServer
from apps.serving.services import model_server_register, model_server_start
from apps.synthesis.models import SynthesisJob, SynthesisSlot
from tests.browser.conftest import htmx_settled

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

VIEWPORTS = [(1366, 900), (390, 844)]


def longest_run(project) -> Run:
    """The demo's run with the most messages: the tallest trajectory page."""
    return max(Run.objects.filter(batch__project=project), key=lambda r: len(r.transcript))


def watched_jobs(project) -> tuple[Experiment, ModelServer]:
    """An experiment under way (its first stage started) and a model server answering, as
    their workers leave them: the demo seeds neither."""
    experiment = Experiment.objects.filter(project=project).first()
    if experiment is None:
        experiment = experiment_create(
            project=project, user=None, recipe=copy.deepcopy(EXAMPLE_RECIPE), enqueue=False
        )
        experiment_advance(experiment_id=experiment.pk)
    server = ModelServer.objects.filter(project=project).first()
    if server is None:
        server = model_server_start(project=project, model_path="Qwen/Qwen2.5-0.5B-Instruct")
        job_claim(job_id=server.job_id)
        server.host, server.port, server.served_model = "127.0.0.1", 18_000, server.model_path
        server.save(update_fields=["host", "port", "served_model"])
        model_server_register(server=server, now=timezone.now())
    return experiment, server


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
    version = DatasetVersion.objects.filter(dataset__project=project).order_by("pk").first()
    grouped = RunBatch.objects.filter(project=project, group_size__isnull=False).first()
    capability = Capability.objects.filter(project=project).order_by("pk").first()
    experiment, server = watched_jobs(project)
    paths = [
        reverse("workspace:dashboard", args=[slug]),
        reverse("environments:list", args=[slug]),
        reverse("environments:import", args=[slug]),
        reverse("environments:edit_spec", args=[widest.pk]),
        reverse("environments:task_edit", args=[task.pk]),
        reverse("environments:grader_edit", args=[grader.pk]),
        reverse("environments:tool_edit", args=[tool.pk]),
        reverse("capabilities:list", args=[slug]),
        reverse("capabilities:detail", args=[capability.pk]),
        reverse("capabilities:coverage", args=[slug]),
        reverse("synthesis:list", args=[slug]),
        reverse("synthesis:create", args=[slug]),
        reverse("synthesis:detail", args=[synthesis.pk]),
        reverse("synthesis:slot", args=[slot.pk]),
        reverse("runs:batch_list", args=[slug]),
        reverse("runs:batch_create", args=[slug]),
        reverse("runs:batch_detail", args=[batch.pk]),
        reverse("runs:batch_groups", args=[grouped.pk]),
        reverse("runs:detail", args=[runs[0].pk]),
        reverse("runs:detail", args=[longest_run(project).pk]),
        reverse("runs:compare") + f"?a={runs[0].pk}&b={runs[1].pk}",
        reverse("runs:evaluation", args=[slug]),
        reverse("runs:leaderboard", args=[slug]),
        reverse("curation:queue", args=[slug]),
        reverse("curation:list", args=[slug]),
        reverse("curation:detail", args=[demonstration.pk]),
        reverse("curation:review", args=[slug, demonstration.pk]),
        reverse("datasets:list", args=[slug]),
        reverse("datasets:create", args=[slug]),
        reverse("datasets:detail", args=[version.dataset_id]),
        reverse("datasets:version_detail", args=[version.dataset_id, version.number]),
        reverse("datasets:version_create", args=[version.dataset_id]),
        reverse("training:list", args=[slug]),
        reverse("training:create", args=[slug]),
        reverse("training:templates", args=[slug]),
        reverse("environments:envserver", args=[slug]),
        reverse("curation:settings", args=[slug]),
        reverse("experiments:list", args=[slug]),
        reverse("experiments:create", args=[slug]),
        reverse("experiments:detail", args=[experiment.pk]),
        reverse("serving:list", args=[slug]),
        reverse("serving:detail", args=[server.pk]),
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


@pytest.fixture
def demo(page, live_server):
    """The seeded demo project, its user logged in: the page on the dashboard."""
    call_command("seed_demo", url=live_server.url, stdout=io.StringIO())
    page.goto(f"{live_server.url}/login/")
    page.get_by_label("Username").fill("demo")
    page.get_by_label("Password").fill("cowork-demo")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_load_state()
    return page


def visit(page, live_server, path: str) -> None:
    response = page.goto(f"{live_server.url}{path}")
    assert response.status == 200, path
    # Parts loaded by htmx after the page (the environment's Runs tab) count too.
    htmx_settled(page)


def test_no_page_of_the_main_flow_scrolls_sideways(demo, live_server):
    paths = main_flow_paths()
    too_wide = []
    for width, height in VIEWPORTS:
        demo.set_viewport_size({"width": width, "height": height})
        for path in paths:
            visit(demo, live_server, path)
            scroll_width = demo.evaluate("document.documentElement.scrollWidth")
            inner_width = demo.evaluate("innerWidth")
            if scroll_width > inner_width:
                too_wide.append((width, path, scroll_width))
    assert too_wide == []


# Every table-scroll box whose table is wider than the box, and every identifier cell (task
# key, model name) whose text takes more than one line.
CUT_TABLES = """[...document.querySelectorAll('.table-scroll')]
  .filter(box => box.scrollWidth > box.clientWidth + 1)
  .map(box => box.querySelector('table').dataset.testid || box.querySelector('th').textContent)"""
WRAPPED_KEYS = """[...document.querySelectorAll('td.key')].filter(td => {
  const range = document.createRange();
  range.selectNodeContents(td);
  return new Set([...range.getClientRects()].map(r => Math.round(r.top))).size > 1;
}).map(td => td.textContent.trim())"""


def test_metric_tables_show_every_column_and_keep_keys_whole(demo, live_server):
    """The Overview's task scores, evaluation By horizon and the leaderboard used to be cut
    at a laptop's width (a horizontal scrollbar hid Sensitivity and pass^k), and task keys
    wrapped a letter a line; on a phone the tables scroll inside their box, keys whole."""
    environment = Environment.objects.filter(project__slug="demo").order_by("pk").first()
    batch = RunBatch.objects.filter(project__slug="demo").order_by("pk").first()
    paths = [
        reverse("environments:tab", args=[environment.pk, "overview"]),
        reverse("environments:tab", args=[environment.pk, "validation"]),
        reverse("runs:evaluation", args=["demo"]) + f"?batch={batch.pk}",
        reverse("runs:batch_detail", args=[batch.pk]),
        reverse("runs:leaderboard", args=["demo"]),
    ]
    cut, wrapped = [], []
    for width, height in VIEWPORTS:
        demo.set_viewport_size({"width": width, "height": height})
        for path in paths:
            visit(demo, live_server, path)
            demo.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
            assert demo.locator("td.key").count(), path
            if width >= 1366:
                cut += [(path, table) for table in demo.evaluate(CUT_TABLES)]
            wrapped += [(width, path, key) for key in demo.evaluate(WRAPPED_KEYS)]
    assert cut == []
    assert wrapped == []


def test_record_tables_fit_a_laptop_and_keep_long_values_on_hover(demo, live_server):
    """The Services tab's collections used to run 5-7 % past their box at 1366 px (a cell's
    max-width does nothing in a table): long values now end in an ellipsis, whole on hover."""
    widest = max(Environment.objects.filter(project__slug="demo"), key=lambda e: e.records.count())
    demo.set_viewport_size({"width": 1366, "height": 900})
    visit(demo, live_server, reverse("environments:tab", args=[widest.pk, "services"]))
    assert demo.locator("table.records").count() > 1
    assert demo.evaluate(CUT_TABLES) == []
    cut = demo.locator("table.records .cell").filter(has_text="Sharing for visibility").first
    assert cut.evaluate("cell => cell.scrollWidth > cell.clientWidth")
    assert "no action required" in cut.get_attribute("title")


def test_no_page_asks_another_host(demo, live_server):
    """Scripts, styles, fonts and images are the app's own (vendored): nothing is fetched
    from a CDN or any other host, so the app works offline and leaks no visit."""
    own = urlsplit(live_server.url).netloc
    elsewhere = []

    def note(request):
        parts = urlsplit(request.url)
        if parts.scheme in ("http", "https", "ws", "wss") and parts.netloc != own:
            elsewhere.append((demo.url, request.url))

    demo.on("request", note)
    for path in main_flow_paths():
        visit(demo, live_server, path)
    assert elsewhere == []
