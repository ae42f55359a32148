"""The environment server page: URLs and client snippet for any member, the live session
count when this process's ASGI mount serves the project, the envserver command otherwise."""

import json

import pytest
from django.test import override_settings
from django.urls import reverse
from websockets.sync.client import connect

from tests.conftest import HTMX_HEADERS
from tests.engine.serving import running


def page_url(project):
    return reverse("environments:envserver", args=[project.slug])


@pytest.mark.django_db
def test_a_viewer_reads_the_urls_snippet_and_the_command_when_nothing_serves_here(
    client_for, project, viewer
):
    with override_settings(ENVSERVER_MAX_SESSIONS=64, ENVSERVER_REFRESH_S=0):
        response = client_for(viewer).get(page_url(project))
    assert response.status_code == 200
    html = response.content.decode()
    assert "http://testserver/envs/acme/t/&lt;token&gt;" in html
    assert "ws://testserver/envs/acme/t/&lt;token&gt;/ws" in html
    assert 'curl -H "Authorization: Bearer &lt;token&gt;" http://testserver/envs/acme/tasks' in html
    assert 'GenericEnvClient(base_url="http://testserver/envs/acme/t/&lt;token&gt;")' in html
    assert 'data-copy="#envserver-http"' in html and 'data-copy="#envserver-ws"' in html
    # runserver / a test client: no mount here, so the page says what to run instead
    assert 'data-testid="envserver-not-live"' in html
    assert "python manage.py envserver --project acme --port 8001" in html
    assert "64 sessions at once" in html
    assert "read once, at start" in html
    assert 'hx-trigger="every 5s"' not in html  # nothing to poll


@pytest.mark.django_db
def test_https_gives_a_wss_url(client_for, project, viewer):
    response = client_for(viewer).get(page_url(project), secure=True)
    assert "wss://testserver/envs/acme/t/&lt;token&gt;/ws" in response.content.decode()


@pytest.mark.django_db
def test_an_outsider_gets_404_and_an_anonymous_user_the_sign_in(
    client_for, client, project, outsider
):
    assert client.get(page_url(project)).status_code == 302
    assert client_for(outsider).get(page_url(project)).status_code == 404
    assert client_for(outsider).get(page_url(project), **HTMX_HEADERS).status_code == 404
    missing = reverse("environments:envserver", args=["nope"])
    assert client_for(outsider).get(missing).status_code == 404


@pytest.mark.django_db
def test_only_get(client_for, project, viewer):
    assert client_for(viewer).post(page_url(project)).status_code == 405


@pytest.mark.django_db
def test_the_htmx_variant_is_the_status_panel(client_for, project, viewer):
    response = client_for(viewer).get(page_url(project), **HTMX_HEADERS)
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith('<section id="envserver-status"')
    assert "<html" not in html and "envserver-urls" not in html


def test_the_live_mount_shows_its_session_count(served, project, author, client_for):
    """Under the ASGI application (a real uvicorn in this process), the page says the
    project is served here and counts its open sessions; polled by htmx."""
    from coworkenv_web.asgi import application

    client = client_for(author)
    with running(application) as url:
        html = client.get(page_url(project)).content.decode()
        assert 'data-testid="envserver-live"' in html and "Not started yet" in html
        assert 'hx-trigger="every 5s"' in html
        ws_url = url.replace("http://", "ws://") + f"/envs/{project.slug}/t/{served['member']}/ws"
        task_key = served["spec"].tasks[0].key
        with connect(ws_url) as first, connect(ws_url) as second:
            for ws in (first, second):
                ws.send(json.dumps({"type": "reset", "data": {"task_key": task_key}}))
                assert json.loads(ws.recv(timeout=30))["type"] == "observation"
            panel = client.get(page_url(project), **HTMX_HEADERS).content.decode()
            assert "2 active sessions</strong> of at most 256" in panel
        # both closed: the server drops their slots as the connections end
        import time

        deadline = time.monotonic() + 20
        while "0 active sessions" not in client.get(page_url(project)).content.decode():
            assert time.monotonic() < deadline
            time.sleep(0.05)
    # the ASGI server shut down: nothing serves here any more
    html = client.get(page_url(project)).content.decode()
    assert 'data-testid="envserver-not-live"' in html
