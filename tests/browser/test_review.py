"""Browser flow of issue 7 (review half): a reviewer works through the queue with the
keyboard only — start, edit a message, exclude a turn, approve, reject with a reason, open
the shortcut sheet — and every action lands in the database."""

import re

import pytest
from playwright.sync_api import expect

from apps.curation.models import Demonstration, Review
from tests.curation.conftest import import_valid, spec_document, teacher_batch_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def queue(project, author):
    environment = import_valid(project, author, spec_document())
    teacher_batch_run(project, author, environment)
    return list(Demonstration.objects.order_by("id"))


def test_review_with_the_keyboard_only(login, live_server, reviewer, project, queue):
    first, second, third = queue
    page = login(reviewer)
    page.goto(f"{live_server.url}/p/{project.slug}/review/")
    expect(page.get_by_test_id("start-review")).to_be_visible()

    # n starts: the first pending item, reserved for this reviewer.
    page.keyboard.press("n")
    expect(page).to_have_url(re.compile(rf"/review/{first.pk}/$"))
    expect(page.get_by_test_id("claim")).to_contain_text("Reserved for you")

    # e edits the selected (last) assistant turn; Ctrl+Enter saves a re-graded version.
    page.keyboard.press("e")
    editor = page.locator("details.edit-turn[open] textarea")
    expect(editor).to_be_focused()
    page.keyboard.press("Control+a")
    page.keyboard.type("Booked the Q3 review for Thursday 16:00-17:00 and told Dana.")
    page.keyboard.press("Control+Enter")
    expect(page.get_by_text("Version 2 saved and re-graded")).to_be_visible()

    # Esc leaves any editor (so the next keys are shortcuts, not text), once the swapped-in
    # version has settled; k selects the turn before it, x excludes it from training.
    page.keyboard.press("Escape")
    expect(page.locator("details.edit-turn[open]")).to_have_count(0)
    page.wait_for_function("document.activeElement === document.body")
    page.keyboard.press("k")
    expect(page.locator(".turn-row.selected")).to_have_count(1)
    page.keyboard.press("x")
    expect(page.get_by_text("Version 3 saved and re-graded")).to_be_visible()
    expect(page.get_by_test_id("excluded")).to_have_count(1)

    # a approves and moves on to the next item.
    page.keyboard.press("a")
    expect(page).to_have_url(re.compile(rf"/review/{second.pk}/$"))
    expect(page.get_by_text(f"Demonstration #{first.pk}: approved.")).to_be_visible()

    # r opens the reasons; 1 ticks the first; Tab reaches the comment; Ctrl+Enter rejects.
    page.keyboard.press("r")
    expect(page.locator("#reject-panel")).to_have_attribute("open", "")
    page.keyboard.press("1")
    expect(page.locator("#reject-panel input[type=checkbox]").first).to_be_checked()
    comment = page.get_by_test_id("rejected-comment")
    for _ in range(10):
        if comment.evaluate("el => el === document.activeElement"):
            break
        page.keyboard.press("Tab")
    expect(comment).to_be_focused()
    page.keyboard.type("Books before reading the budget thread.")
    page.keyboard.press("Control+Enter")
    expect(page).to_have_url(re.compile(rf"/review/{third.pk}/$"))

    # ? shows the shortcut sheet, Esc closes it.
    page.keyboard.press("?")
    expect(page.get_by_test_id("shortcut-sheet")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.get_by_test_id("shortcut-sheet")).to_be_hidden()

    first.refresh_from_db()
    second.refresh_from_db()
    third.refresh_from_db()
    version = first.current_version
    assert (first.status, version.number, version.passed) == ("approved", 3, True)
    final = max(
        i for i, m in enumerate(version.transcript) if m["role"] == "assistant" and m["content"]
    )
    assert version.transcript[final]["content"] == (
        "Booked the Q3 review for Thursday 16:00-17:00 and told Dana."
    )
    assert [i for i, m in enumerate(version.transcript) if m.get("weight") == 0] == [final - 2]
    assert first.versions.get(number=1).transcript == first.run.transcript
    rejection = Review.objects.get(demonstration=second)
    assert (rejection.decision, rejection.reason_tags, rejection.comment) == (
        "rejected",
        ["wrong tool"],
        "Books before reading the budget thread.",
    )
    assert second.status == "rejected"
    assert (third.status, third.claimed_by_id) == ("pending", reviewer.pk)


def test_drop_from_here_asks_first_and_a_no_keeps_the_transcript(
    login, live_server, reviewer, project, queue
):
    """Dropping cuts the rest of the transcript at once: it asks first (by click or by d),
    and declining changes nothing."""
    first = queue[0]
    page = login(reviewer)
    page.goto(f"{live_server.url}/p/{project.slug}/review/{first.pk}/")
    asked = []

    def decline(dialog):
        asked.append(dialog.message)
        dialog.dismiss()

    page.once("dialog", decline)
    page.get_by_test_id("turn").first.locator("[data-action=truncate]").click()
    expect(page.get_by_test_id("turn").first).to_be_visible()
    page.wait_for_timeout(300)
    assert len(asked) == 1 and asked[0].startswith("Drop message ")
    assert "saved as version 2" in asked[0]
    first.refresh_from_db()
    assert first.versions.count() == 1

    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_test_id("turn").first.locator("[data-action=truncate]").click()
    expect(page.get_by_text(re.compile(r"Version 2 saved"))).to_be_visible()
    assert first.versions.count() == 2
