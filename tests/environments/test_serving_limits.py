"""Limits of the web app's ASGI application (``coworkenv_web.asgi``), through a real
uvicorn: body sizes on every route (defect 7 of issue 24)."""

from __future__ import annotations

import json

import httpx
import pytest
from django.test import override_settings
from django.urls import reverse
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from coworkenv_engine.body_limit import too_large
from tests.engine.serving import running


@pytest.fixture
def small_limits():
    from coworkenv_web.asgi import application

    with (
        override_settings(ENVSERVER_MAX_BODY_BYTES=3000, ASGI_MAX_BODY_BYTES=5000),
        running(application) as url,
    ):
        yield url


def test_a_reset_body_over_the_mounts_limit_is_413(small_limits, served, project):
    mine = f"{small_limits}/envs/{project.slug}"
    headers = {"Authorization": f"Bearer {served['member']}"}
    task_key = served["spec"].tasks[0].key
    ok = httpx.post(f"{mine}/reset", json={"task_key": task_key}, headers=headers)
    assert ok.status_code == 200
    big = httpx.post(f"{mine}/reset", json={"pad": "x" * 3000}, headers=headers)
    assert (big.status_code, big.json()) == (413, too_large(3000))
    # refused before the token is looked at: no token needed to be told the body is too big
    assert httpx.post(f"{mine}/reset", json={"pad": "x" * 3000}).status_code == 413


def test_a_websocket_message_over_the_mounts_limit_closes_the_session(
    small_limits, served, project
):
    ws_url = small_limits.replace("http://", "ws://") + f"/envs/{project.slug}/ws"
    headers = {"Authorization": f"Bearer {served['member']}"}
    with connect(ws_url, additional_headers=headers) as ws:
        ws.send(json.dumps({"type": "state"}))
        assert json.loads(ws.recv(timeout=30))["type"] == "state"
        ws.send(json.dumps({"type": "step", "data": {"reply": "x" * 3000}}))
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=30)
    assert closed.value.rcvd.code == 1009


def test_every_other_route_has_the_apps_limit(small_limits):
    login = small_limits + reverse("accounts:login")
    assert httpx.post(login, data={"username": "a", "password": "b"}).status_code != 413
    big = httpx.post(login, data={"username": "a" * 6000, "password": "b"})
    assert (big.status_code, big.json()) == (413, too_large(5000))


def test_one_user_takes_only_its_share_of_the_mounts_sessions(served, project):
    """ENVSERVER_MAX_SESSIONS=4, per token unset: a quarter each, per user. The member's
    token opens one session, and a second token of the same user none; another member's
    token opens its own; neither steps the other's."""
    from apps.accounts.services import api_token_create
    from coworkenv_web.asgi import application
    from tests.factories import MembershipFactory

    _, same_user = api_token_create(user=served["valid"].created_by, name="second trainer")
    colleague = MembershipFactory(project=project).user
    _, theirs = api_token_create(user=colleague, name="colleague's trainer")
    task_key = served["spec"].tasks[0].key
    first, second, other = (
        {"Authorization": f"Bearer {t}"} for t in (served["member"], same_user, theirs)
    )
    with override_settings(ENVSERVER_MAX_SESSIONS=4), running(application) as url:
        mine = f"{url}/envs/{project.slug}"
        opened = httpx.post(f"{mine}/reset", json={"task_key": task_key}, headers=first)
        episode_id = opened.json()["observation"]["episode_id"]
        again = httpx.post(f"{mine}/reset", json={"task_key": task_key}, headers=first)
        assert (again.status_code, again.json()["detail"]) == (
            503,
            "session limit of this token's user reached",
        )
        more = httpx.post(f"{mine}/reset", json={"task_key": task_key}, headers=second)
        assert (more.status_code, more.json()["detail"]) == (
            503,
            "session limit of this token's user reached",
        )
        assert httpx.post(f"{mine}/reset", json={"task_key": task_key}, headers=other).is_success
        step = {"episode_id": episode_id, "action": {"reply": "Done."}}
        assert httpx.post(f"{mine}/step", json=step, headers=other).status_code == 404
        assert httpx.post(f"{mine}/step", json=step, headers=second).status_code == 404
        assert httpx.post(f"{mine}/step", json=step, headers=first).status_code == 200
