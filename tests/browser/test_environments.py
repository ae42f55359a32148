"""Browser flow of issue 4: import, open, break a grader, validate, follow the problem to the
grader, fix it, validate again (a real Celery worker); a viewer cannot edit."""

import json
import re

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from apps.environments.models import Environment, Grader
from tests.environments.conftest import SAMPLES
from tests.workers import WorkerProcess, purge_queues

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SPEC_PATH = SAMPLES[0]
TRIVIAL_CHECK = {"kind": "state", "query": "length(email.sent)", "op": ">=", "value": 0}
JOB_TIMEOUT_MS = 120_000


@pytest.fixture
def worker(tmp_path):
    purge_queues()
    process = WorkerProcess(concurrency=1, log_path=tmp_path / "worker.log").start()
    yield process
    process.stop()


def fill_json_editor(page, name: str, text: str):
    """Replace a JSON field's text once its CodeMirror editor is on (the bundle loads
    asynchronously and then hides the textarea, which keeps carrying the text)."""
    expect(page.locator(f"textarea[name={name}][data-editor=on]")).to_have_count(1)
    # the editor follows the textarea, or the label the textarea was moved out of
    page.locator(
        f"textarea[name={name}] + .json-editor .cm-content, "
        f"textarea[name={name}] + label .json-editor .cm-content"
    ).click()
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(text)
    expect(page.locator(f"textarea[name={name}]")).to_have_value(text)


def edit_first_grader(page, *, weight: str, check: dict):
    page.locator("#task-0-grader-0").get_by_test_id("edit-grader").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Edit grader “event-booked”")
    page.get_by_label("Weight").fill(weight)
    fill_json_editor(page, "check_spec", json.dumps(check, indent=2))
    page.get_by_test_id("save").click()
    expect(page).to_have_url(re.compile(r"/tasks/#task-0-grader-0$"))


def validate_and_wait(page, environment, *, revision: int):
    """Validate lands on the validation tab, which follows the job and shows the report of
    ``revision`` (or says that the job failed, and why)."""
    page.get_by_test_id("validate").click()
    expect(page).to_have_url(re.compile(rf"/environments/{environment.pk}/validation/$"))
    failed = page.get_by_test_id("validation-failed")
    report = page.get_by_test_id("validation-report").filter(
        has_text=re.compile(rf"Revision {revision} ·")
    )
    expect(failed.or_(report)).to_be_visible(timeout=JOB_TIMEOUT_MS)
    assert not failed.count(), failed.inner_text()
    expect(page.get_by_test_id("validation-job")).to_have_count(0)


def test_author_breaks_a_grader_sees_the_problem_there_and_fixes_it(
    login, live_server, project, author, worker
):
    page = login(author)
    page.goto(f"{live_server.url}/p/{project.slug}/environments/import/")
    page.get_by_label("Spec file").set_input_files(str(SPEC_PATH))
    page.get_by_label("Validate after importing").uncheck()
    page.get_by_test_id("import-submit").click()
    expect(page).to_have_url(re.compile(r"/environments/\d+/$"))
    environment = Environment.objects.get()
    original = Grader.objects.get(task__environment=environment, task__position=0, position=0)
    expect(page.get_by_test_id("environment-status")).to_have_text("Draft")

    # The tasks tab swaps in with htmx and gets its own URL.
    page.locator("nav.tabs").get_by_role("link", name="Tasks").click()
    expect(page).to_have_url(re.compile(rf"/environments/{environment.pk}/tasks/$"))
    expect(page.locator("#task-0-grader-0")).to_contain_text("event-booked")

    # A trivially true check with most of the weight: a do-nothing agent now passes.
    edit_first_grader(page, weight="10", check=TRIVIAL_CHECK)
    expect(page.get_by_test_id("needs-validation")).to_have_text(
        re.compile(r"Edited: revision 2, needs validation\.")
    )
    expect(page.locator("#task-0-grader-0")).to_contain_text("state: length(email.sent) >= 0")

    validate_and_wait(page, environment, revision=2)
    expect(page.get_by_test_id("report-verdict")).to_have_text("invalid")
    problem = page.locator('li.problem[data-code="grader_passes_null_agent"]')
    expect(problem).to_contain_text("A do-nothing agent passes the task")
    link = problem.get_by_test_id("problem-link")
    expect(link).to_have_text("/tasks/0/graders/0")
    link.click()
    expect(page).to_have_url(re.compile(r"/tasks/#task-0-grader-0$"))
    expect(page.locator("#task-0-grader-0")).to_be_in_viewport()
    # ...and not under the sticky header.
    header_bottom = (
        page.locator("header.topbar").bounding_box()["y"]
        + (page.locator("header.topbar").bounding_box()["height"])
    )
    assert page.locator("#task-0-grader-0").bounding_box()["y"] >= header_bottom

    # Put the real check back.
    edit_first_grader(page, weight="2", check=original.check_spec)
    validate_and_wait(page, environment, revision=3)
    expect(page.get_by_test_id("report-verdict")).to_have_text("valid")
    expect(page.locator('li.problem[data-code="grader_passes_null_agent"]')).to_have_count(0)
    environment.refresh_from_db()
    assert (environment.status, environment.revision) == ("valid", 3)


def test_viewer_sees_no_edit_controls_and_is_refused(login, live_server, project, author, viewer):
    from apps.environments.services import environment_import

    environment = environment_import(
        project=project, spec=json.loads(SPEC_PATH.read_text()), user=author
    )
    page = login(viewer)
    page.goto(f"{live_server.url}/environments/{environment.pk}/tasks/")
    expect(page.locator("#task-0-grader-0")).to_be_visible()
    expect(page.get_by_test_id("edit-grader")).to_have_count(0)
    expect(page.get_by_test_id("validate")).to_have_count(0)
    expect(page.get_by_role("link", name="Edit JSON")).to_have_count(0)
    expect(page.get_by_role("link", name="Add a task")).to_have_count(0)

    # Posting anyway (from the viewer's own session in the browser) is refused.
    grader = Grader.objects.filter(task__environment=environment).first()
    url = reverse("environments:grader_edit", args=[grader.pk])
    csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    response = page.request.post(
        f"{live_server.url}{url}",
        form={"key": "hacked", "category": "completion", "weight": "1", "check_spec": "{}"},
        headers={"X-CSRFToken": csrf, "Referer": f"{live_server.url}/"},
    )
    assert response.status == 403
    grader.refresh_from_db()
    assert grader.key != "hacked"
    environment.refresh_from_db()
    assert environment.revision == 1
