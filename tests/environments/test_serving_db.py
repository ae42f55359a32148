"""The mounted environment server and its database: a connection the database dropped, or a
database that refuses for a while, costs the requests made meanwhile (503, nothing counted
against the token) and nothing after (defect 3 of issue 24)."""

from __future__ import annotations

import socket

import httpx
import pytest
from django.db import connection, connections

from apps.environments.serving import healthy, project_token_allowed
from tests.engine.serving import running

from .test_serving import REFUSED


def _dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # closed again: nothing listens there


def test_a_read_on_a_connection_the_database_dropped_is_made_on_a_new_one(served, project):
    connection.ensure_connection()
    connection.connection.close()  # what a database restart leaves behind
    assert project_token_allowed(project_id=project.pk, raw=served["member"]).startswith("user:")
    assert project_token_allowed(project_id=project.pk, raw=served["revoked"]) is False


def test_a_read_on_a_database_that_refuses_raises_and_the_next_one_reconnects(served, project):
    if connection.vendor != "postgresql":
        pytest.skip("a port to refuse needs a database server")
    settings_dict = connections.settings["default"]
    port = settings_dict["PORT"]
    connection.close()
    settings_dict["PORT"] = _dead_port()
    try:
        with pytest.raises(Exception, match=r"(?i)connect"):
            healthy(lambda: list(type(project).objects.all()))
    finally:
        settings_dict["PORT"] = port
    assert project_token_allowed(project_id=project.pk, raw=served["member"]).startswith("user:")


def _terminate_other_backends() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


def test_the_mount_answers_again_as_soon_as_the_database_does(served, project):
    """Through a real uvicorn: a valid token works; the database then drops every connection
    and refuses new ones (a dead port): uncached tokens get 503, never 401 or 500; back, the
    same tokens work at once (the next request), and a wrong one is 401 again."""
    if connection.vendor != "postgresql":
        pytest.skip("dropping the server's connections needs a database server")
    from coworkenv_web.asgi import application

    settings_dict = connections.settings["default"]
    port = settings_dict["PORT"]
    mine = f"/envs/{project.slug}/tasks"

    def tasks(client: httpx.Client, token: str) -> httpx.Response:
        return client.get(mine, headers={"Authorization": f"Bearer {token}"})

    with running(application) as url, httpx.Client(base_url=url) as client:
        assert tasks(client, served["member"]).status_code == 200
        _terminate_other_backends()
        connection.close()
        settings_dict["PORT"] = _dead_port()
        try:
            for _ in range(3):
                refused = tasks(client, served["outsider"])  # not remembered: asks the database
                assert refused.status_code == 503, refused.text
                assert refused.json()["code"] == "UNAVAILABLE"
            assert tasks(client, served["member"]).status_code == 200  # remembered
        finally:
            settings_dict["PORT"] = port
        fresh = tasks(client, served["outsider"])
        assert fresh.status_code == 401 and fresh.json() == REFUSED  # asked, and not a member
        _, token = _new_member_token(served)
        assert tasks(client, token).status_code == 200


def _new_member_token(served):
    from apps.accounts.services import api_token_create

    return api_token_create(user=served["valid"].created_by, name="after the blip")


def test_a_project_first_asked_for_while_the_database_refuses_is_503_then_served(served, project):
    if connection.vendor != "postgresql":
        pytest.skip("a port to refuse needs a database server")
    from coworkenv_web.asgi import application

    settings_dict = connections.settings["default"]
    port = settings_dict["PORT"]
    headers = {"Authorization": f"Bearer {served['member']}"}
    with running(application) as url, httpx.Client(base_url=url) as client:
        _terminate_other_backends()
        connection.close()
        settings_dict["PORT"] = _dead_port()
        try:
            refused = client.get(f"/envs/{project.slug}/tasks", headers=headers)
            assert refused.status_code == 503 and refused.json()["code"] == "UNAVAILABLE"
        finally:
            settings_dict["PORT"] = port
        assert client.get(f"/envs/{project.slug}/tasks", headers=headers).status_code == 200
