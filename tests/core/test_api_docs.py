"""The OpenAPI schema and docs: open in the local mode, behind sign-in on a server."""

import json
import re
import subprocess
import sys

import pytest
from django.urls import reverse

from tests.workers import ROOT

pytestmark = pytest.mark.django_db

DOC_URLS = ["/api/v1/docs/", "/api/v1/redoc/"]


def test_schema_needs_a_signed_in_user_or_token_on_a_server(api_client_for, viewer, settings):
    settings.API_DOCS_PUBLIC = False
    response = api_client_for().get("/api/v1/schema/", {"format": "json"})
    assert response.status_code in (401, 403)
    assert json.loads(response.content) == {
        "message": "Authentication credentials were not provided.",
        "details": {},
    }
    assert api_client_for(viewer).get("/api/v1/schema/").status_code == 200


@pytest.mark.parametrize("url", DOC_URLS)
def test_docs_send_a_visitor_to_sign_in_on_a_server(client, viewer, settings, url):
    settings.API_DOCS_PUBLIC = False
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('accounts:login')}?next={url}"
    client.force_login(viewer)
    assert client.get(url).status_code == 200


@pytest.mark.parametrize("url", ["/api/v1/schema/", *DOC_URLS])
def test_api_docs_public_opens_them(client, settings, url):
    settings.API_DOCS_PUBLIC = True
    assert client.get(url).status_code == 200


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"DEBUG": "false"}, "False"),
        ({"DEBUG": "false", "API_DOCS_PUBLIC": "true"}, "True"),
        ({"DEBUG": "true"}, "True"),
    ],
)
def test_the_default_follows_debug(env, expected, tmp_path):
    code = "from coworkenv_web import settings; print(settings.API_DOCS_PUBLIC)"
    environment = {
        "PATH": "/usr/bin:/bin",
        "SECRET_KEY": "x" * 50,
        "COWORKENV_VAR_DIR": str(tmp_path),
        **env,
    }
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == expected


@pytest.mark.parametrize("url", DOC_URLS)
def test_the_docs_load_nothing_from_another_host(client, settings, url):
    """No CDN: every script, style sheet and font the docs pages name is the app's own."""
    settings.API_DOCS_PUBLIC = True
    page = client.get(url).content.decode()
    assert "redoc" in page.lower() or "swagger" in page.lower()
    linked = re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)""", page)
    assert linked
    assert [link for link in linked if re.match(r"(?:https?:)?//", link)] == []
