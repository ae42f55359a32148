"""The environment server page in Chromium: reached from the environment list, its URLs
copied with a click (runserver-like live_server: no mount, so the command is shown)."""

import re

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_viewer_opens_the_server_page_and_copies_the_url(login, live_server, project, viewer):
    page = login(viewer)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.goto(f"{live_server.url}/p/{project.slug}/environments/")
    page.get_by_test_id("envserver-link").click()
    expect(page).to_have_url(re.compile(r"/p/acme/environments/server/$"))
    expect(page.get_by_test_id("envserver-not-live")).to_contain_text("manage.py runserver")
    http_url = f"{live_server.url}/envs/acme/t/<token>"
    expect(page.locator("#envserver-http")).to_have_text(http_url)
    copy = page.locator('[data-copy="#envserver-http"]')
    expect(copy).to_be_visible()
    copy.click()
    expect(copy).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == http_url
