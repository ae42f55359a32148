"""Browser tests: pytest-playwright driving the machine's Chromium against live_server."""

import os
import shutil

import pytest

from coworkenv_web.env import env_bool

CHROMIUM = os.environ.get("CHROMIUM_PATH") or shutil.which("chromium")
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


def pytest_collection_modifyitems(config, items):
    if CHROMIUM:
        return
    if env_bool("COWORKENV_REQUIRE_BROWSER", False):
        raise pytest.UsageError("COWORKENV_REQUIRE_BROWSER is set but no Chromium was found.")
    skip = pytest.mark.skip(reason="No Chromium found (apt-get install chromium, or CHROMIUM_PATH)")
    for item in items:
        if "browser" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "args": CHROMIUM_FLAGS}


@pytest.fixture
def login(page, live_server):
    def log_in(user, password="secret-pass-123"):
        page.goto(f"{live_server.url}/login/")
        page.get_by_label("Username").fill(user.username)
        page.get_by_label("Password").fill(password)
        page.get_by_role("button", name="Log in").click()
        page.wait_for_load_state()
        return page

    return log_in


def htmx_settled(page) -> None:
    """Wait until what htmx loads after a page (``hx-trigger=load``) has arrived and been
    processed: content htmx has just swapped in is visible before its own ``hx-*``
    attributes are bound, and a ``change`` made in that moment is lost."""
    page.wait_for_load_state("networkidle")
    page.wait_for_function(
        "!document.querySelector('[hx-trigger=load], .htmx-request, .htmx-swapping,"
        " .htmx-settling')"
    )
