import re

import pytest
from playwright.sync_api import expect

from apps.accounts.models import ApiToken, Membership, Role

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_login_dashboard_switch_project_and_logout(
    login, live_server, admin, project, other_project
):
    Membership.objects.create(project=other_project, user=admin, role=Role.VIEWER)
    page = login(admin)
    expect(page).to_have_url(re.compile(r"/p/acme/$"))
    expect(page.get_by_role("heading", name="Acme agents")).to_be_visible()
    expect(page.get_by_test_id("dashboard-counts")).to_contain_text("Members")

    page.get_by_test_id("project-switcher").locator("summary").click()
    page.get_by_role("link", name="Other team").click()
    expect(page).to_have_url(re.compile(r"/p/other/$"))
    expect(page.get_by_role("heading", name="Other team")).to_be_visible()
    # A viewer there is not offered actions that need the author role.
    expect(page.get_by_role("button", name="Check background worker")).to_have_count(0)

    page.locator(".user-menu summary").click()
    page.get_by_test_id("logout").click()
    expect(page).to_have_url(re.compile(r"/login/"))
    page.goto(f"{live_server.url}/p/acme/")
    expect(page).to_have_url(re.compile(r"/login/\?next=/p/acme/"))


def test_create_api_token_shown_once(login, live_server, viewer, project):
    page = login(viewer)
    page.goto(f"{live_server.url}/account/tokens/")
    expect(page.get_by_text("No tokens yet.")).to_be_visible()
    page.get_by_label("Name").fill("training cluster")
    page.get_by_role("button", name="Create token").click()
    secret_box = page.get_by_test_id("new-token")
    expect(secret_box).to_contain_text("will not be shown again")
    secret = secret_box.locator("code").inner_text().strip()
    token = ApiToken.objects.get(user=viewer)
    assert secret.startswith(f"cwe_{token.prefix}_")
    expect(page.get_by_test_id("token-table")).to_contain_text("training cluster")

    page.reload()
    expect(page.get_by_test_id("token-table")).to_contain_text(f"cwe_{token.prefix}_")
    assert secret not in page.content()

    page.on("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Revoke").click()
    expect(page.get_by_test_id("token-table")).to_contain_text("revoked")


def test_wrong_password_stays_on_login(login, live_server, viewer):
    page = login(viewer, password="not-it")
    expect(page.get_by_role("alert")).to_contain_text("did not match")
