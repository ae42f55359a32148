import os

import pytest
from hypothesis import settings
from rest_framework.test import APIClient

from apps.accounts.models import Role
from tests.factories import MembershipFactory, ProjectFactory, UserFactory

# Playwright's sync API runs an event loop in the test thread; the ORM calls made by test
# code around it are still synchronous.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

# Property tests check what is true, never how fast: an example over Hypothesis's default
# 200 ms deadline on a loaded CI machine is not a failure (timings are bench/'s business).
settings.register_profile("coworkenv", deadline=None)
settings.load_profile("coworkenv")

PASSWORD = "secret-pass-123"


@pytest.fixture
def project(db):
    return ProjectFactory(name="Acme agents", slug="acme")


@pytest.fixture
def other_project(db):
    return ProjectFactory(name="Other team", slug="other")


def _member(project, username, role):
    return MembershipFactory(project=project, user=UserFactory(username=username), role=role).user


@pytest.fixture
def admin(project):
    return _member(project, "alice-admin", Role.ADMIN)


@pytest.fixture
def reviewer(project):
    return _member(project, "rita-reviewer", Role.REVIEWER)


@pytest.fixture
def author(project):
    return _member(project, "arthur-author", Role.AUTHOR)


@pytest.fixture
def viewer(project):
    return _member(project, "vera-viewer", Role.VIEWER)


@pytest.fixture
def outsider(other_project):
    """A member (admin, even) of another project."""
    return _member(other_project, "oscar-outsider", Role.ADMIN)


@pytest.fixture
def client_for(client):
    def login(user):
        client.force_login(user)
        return client

    return login


@pytest.fixture
def api_client_for():
    def make(user=None):
        api = APIClient()
        if user is not None:
            api.force_authenticate(user)
        return api

    return make


HTMX_HEADERS = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture(autouse=True)
def _fresh_throttles():
    """API throttle counters live in the (per-process) cache: each test starts with none.
    Sign-in lockouts (django-axes) are database rows and go with each test's rollback."""
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()


@pytest.fixture(autouse=True)
def _fresh_run_claims():
    """A worker keeps the batches and tasks its runs play for a second; ids come back after
    a test's rollback, so each test starts with none."""
    from apps.runs.services import claims

    claims.clear()
    yield
    claims.clear()


@pytest.fixture(autouse=True)
def _fresh_attachments(settings, tmp_path_factory):
    """Each test stores attachment files in a folder of its own (they are content-addressed,
    so a file left by another test would hide a missing one)."""
    from apps.environments.attachments import _cached_data_url

    location = tmp_path_factory.mktemp("attachments")
    settings.STORAGES = {
        **settings.STORAGES,
        "attachments": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(location)},
        },
    }
    _cached_data_url.cache_clear()
    yield
    _cached_data_url.cache_clear()


def pytest_sessionfinish(session, exitstatus):
    """Remove this run's own var folder (test database, broker queue) unless it was given."""
    import shutil
    from pathlib import Path

    from django.conf import settings

    var_dir = Path(settings.VAR_DIR)
    if var_dir.name == f"run-{os.getpid()}":
        shutil.rmtree(var_dir, ignore_errors=True)
