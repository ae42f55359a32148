"""The training form shows the fields of the chosen method and backend only, and says why a
pair cannot work before anything is launched (issue 27)."""

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_form_follows_the_method_and_the_backend(login, live_server, author, project):
    page = login(author)
    page.goto(f"{live_server.url}/p/{project.slug}/training/new/")
    grpo, version = page.get_by_test_id("grpo-fields"), page.locator("#id_dataset_version")
    endpoint, template = page.locator("#id_endpoint"), page.locator("#id_command_template")
    refused = page.get_by_test_id("grpo-backend-refused")
    # SFT on the local backend, the default: no GRPO, API or command fields
    expect(version).to_be_visible()
    for hidden in (grpo, endpoint, template, refused):
        expect(hidden).to_be_hidden()

    page.locator("#id_method").select_option("grpo")
    expect(grpo).to_be_visible()
    expect(version).to_be_hidden()  # GRPO rolls out environments, not a dataset version
    expect(refused).to_be_hidden()
    page.locator("#id_backend").select_option("openai")
    expect(refused).to_be_visible()  # said before launching, not after
    expect(endpoint).to_be_visible()

    page.locator("#id_method").select_option("sft")
    expect(refused).to_be_hidden()
    page.locator("#id_backend").select_option("command")
    expect(template).to_be_visible()
    expect(endpoint).to_be_hidden()
    expect(grpo).to_be_hidden()


def test_without_javascript_every_field_is_there(browser, live_server, author, project):
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(f"{live_server.url}/login/")
    page.get_by_label("Username").fill(author.username)
    page.get_by_label("Password").fill("secret-pass-123")
    page.get_by_role("button", name="Log in").click()
    page.goto(f"{live_server.url}/p/{project.slug}/training/new/")
    for selector in ("#id_dataset_version", "#id_endpoint", "#id_command_template"):
        expect(page.locator(selector)).to_be_visible()
    expect(page.get_by_test_id("grpo-fields")).to_be_visible()
    context.close()
