"""The JSON editors (CodeMirror over the form's textarea) and the Spec tab's tree: a problem
the server finds is marked in the gutter at its line, a syntax error is marked as it is
typed, and without JavaScript the textarea and the plain <pre> still work."""

import json

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from apps.environments.models import Grader
from tests.environments.conftest import environment, example_spec  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

BAD_CHECK = '{\n"kind": "state",\n"query": "length(email.sent)",\n"op": "bogus",\n"value": 1\n}'

# The line number shown beside the first lint marker of the gutter.
MARKED_LINE = """() => {
  const marker = document.querySelector('.cm-lint-marker-error');
  if (!marker) return null;
  const top = marker.closest('.cm-gutterElement').getBoundingClientRect().top;
  for (const cell of document.querySelectorAll('.cm-lineNumbers .cm-gutterElement')) {
    if (Math.abs(cell.getBoundingClientRect().top - top) < 2) return cell.textContent;
  }
  return null;
}"""


def first_grader(env) -> Grader:
    return Grader.objects.filter(task__environment=env).order_by("task__position", "position")[0]


def test_grader_editor_marks_the_problem_at_its_line(page, live_server, login, author, environment):  # noqa: F811
    grader = first_grader(environment)
    login(author)
    page.goto(f"{live_server.url}{reverse('environments:grader_edit', args=[grader.pk])}")
    editor = page.get_by_role("textbox", name="Check")
    expect(editor).to_be_visible()
    expect(page.locator("textarea[name=check_spec]")).to_be_hidden()
    editor.click()
    page.keyboard.press("Control+a")
    page.keyboard.insert_text(BAD_CHECK)
    page.get_by_test_id("save").click()
    expect(page.get_by_test_id("form-errors")).to_contain_text("in Check, line 4")
    expect(page.locator(".cm-lint-marker-error")).to_have_count(1)
    assert page.evaluate(MARKED_LINE) == "4"
    page.locator(".cm-lint-marker-error").hover()
    expect(page.locator(".cm-tooltip-lint")).to_contain_text("'bogus' is not one of")
    grader.refresh_from_db()
    assert grader.check_spec["op"] == "=="

    # A syntax error is marked while typing, before anything is sent.
    editor = page.get_by_role("textbox", name="Check")
    editor.click()
    page.keyboard.press("Control+a")
    page.keyboard.insert_text('{\n"kind": "state",\n"query" "x"\n}')
    expect(page.locator(".cm-lint-marker-error")).to_have_count(1)
    assert page.evaluate(MARKED_LINE) == "3"


def test_whole_spec_editor_marks_static_problems(page, live_server, login, author, environment):  # noqa: F811
    login(author)
    url = f"{live_server.url}{reverse('environments:edit_spec', args=[environment.pk])}"
    page.goto(url)
    editor = page.get_by_role("textbox", name="Spec (coworkenv.environment/v1)")
    expect(editor).to_be_visible()
    text = page.locator("textarea[name=spec]").input_value()
    document = json.loads(text)
    document["tasks"][0]["graders"][0]["check"]["query"] = "length(email.nowhere)"
    new_text = json.dumps(document, indent=2, ensure_ascii=False)
    editor.click()
    page.keyboard.press("Control+a")
    page.keyboard.insert_text(new_text)
    page.get_by_test_id("save-spec").click()
    problem = page.locator('.problem[data-code="unknown_collection"]').first
    expect(problem).to_be_visible()
    line = int(problem.locator("[data-jump-line]").get_attribute("data-jump-line"))
    assert "email.nowhere" in new_text.splitlines()[line - 1]
    problem.locator("[data-jump-line]").click()
    expect(page.locator(".cm-activeLine")).to_contain_text("email.nowhere")
    assert str(line) in page.locator(".cm-activeLineGutter").all_inner_texts()


def test_spec_tab_tree_is_searchable(page, live_server, login, author, environment):  # noqa: F811
    login(author)
    page.goto(f"{live_server.url}{reverse('environments:tab', args=[environment.pk, 'spec'])}")
    expect(page.get_by_test_id("spec-tree")).to_be_visible()
    expect(page.get_by_test_id("spec-json")).to_be_hidden()
    page.get_by_test_id("spec-search").fill("event-booked")
    expect(page.locator(".jt-matches")).to_have_text("1 match")
    expect(page.locator(".jt-hit")).to_have_text('id: "event-booked"')
    expect(page.locator(".jt-hit")).to_be_visible()


def test_editors_work_without_javascript(browser, live_server, author, environment):  # noqa: F811
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(f"{live_server.url}/login/")
    page.get_by_label("Username").fill(author.username)
    page.get_by_label("Password").fill("secret-pass-123")
    page.get_by_role("button", name="Log in").click()
    grader = first_grader(environment)
    page.goto(f"{live_server.url}{reverse('environments:grader_edit', args=[grader.pk])}")
    page.locator("textarea[name=check_spec]").fill(BAD_CHECK)
    page.get_by_test_id("save").click()
    expect(page.get_by_test_id("form-errors")).to_contain_text("in Check, line 4")
    expect(page.locator(".cm-editor")).to_have_count(0)
    page.goto(f"{live_server.url}{reverse('environments:tab', args=[environment.pk, 'spec'])}")
    expect(page.get_by_test_id("spec-json")).to_contain_text('"event-booked"')
    context.close()


def test_the_problems_panel_never_says_no_problems_over_a_syntax_error(
    page,
    live_server,
    login,
    author,
    environment,  # noqa: F811
):
    login(author)
    page.goto(f"{live_server.url}{reverse('environments:edit_spec', args=[environment.pk])}")
    quiet = page.get_by_test_id("no-problems")
    expect(quiet).to_contain_text("find no problems")
    editor = page.get_by_role("textbox", name="Spec (coworkenv.environment/v1)")
    editor.click()
    page.keyboard.press("Control+End")
    page.keyboard.insert_text("\n,,")  # the linter marks it at once
    expect(page.locator(".cm-lint-marker-error")).to_have_count(1)
    expect(quiet).to_contain_text("not valid JSON")
    expect(quiet).not_to_contain_text("no problems")
    page.keyboard.press("Backspace")
    page.keyboard.press("Backspace")
    page.keyboard.press("Backspace")
    expect(quiet).to_contain_text("find no problems")
