"""The environment server mounted in the web app's ASGI application (``coworkenv_web.asgi``)
under ``/envs/<project-slug>/``: a real uvicorn on a loopback port serving the whole app,
driven by openenv-core's client, httpx and websockets."""

from __future__ import annotations

import json
import threading

import httpx
import pytest
from django.core.files.storage import FileSystemStorage
from django.test import override_settings
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from apps.environments.models import Environment, EnvironmentStatus
from tests.asyncio_thread import run_coroutine
from tests.engine import mcp_drive
from tests.engine.serving import running
from tests.workers import wait_for

from .conftest import SAMPLES
from .test_serving import (
    REFUSED,
    assert_token_path_refused,
    oracle_and_do_nothing,
    play_oracle,
)


@pytest.fixture
def app_url(served):
    from coworkenv_web.asgi import application

    with override_settings(ENVSERVER_REFRESH_S=0.2), running(application) as url:
        yield url
    assert application.servers == {}  # the shutdown ended and forgot every project server


def _tasks(url: str, token: str) -> httpx.Response:
    return httpx.get(f"{url}/tasks", headers={"Authorization": f"Bearer {token}"})


def test_openenv_client_through_the_web_app(app_url, served, project):
    oracle_and_do_nothing(f"{app_url}/envs/{project.slug}/t/{served['member']}", served["spec"])


def test_an_mcp_client_through_the_web_app(app_url, served, project):
    """The MCP face under the mount, opened by a member's token: the reference solution
    scores 1.0; another project's token is refused before any session."""
    task = served["spec"].tasks[0]
    url = f"{app_url}/envs/{project.slug}/mcp?task_key={task.key}&faults=false"

    async def oracle():
        async with mcp_drive.mcp_session(url, served["member"]) as session:
            return await mcp_drive.play_reference(session, task)

    assert run_coroutine(oracle()).structured_content["reward"] == 1.0
    refused = httpx.post(url, json={}, headers={"Authorization": f"Bearer {served['outsider']}"})
    assert (refused.status_code, refused.json()) == (401, REFUSED)


def test_the_mount_is_per_project_and_django_still_serves_the_rest(
    app_url, served, project, other_project
):
    mine, theirs = f"{app_url}/envs/{project.slug}", f"{app_url}/envs/{other_project.slug}"
    listing = _tasks(mine, served["member"]).json()
    assert [e["name"] for e in listing["environments"]] == [served["valid"].name]
    assert listing["environments"][0]["id"] == served["valid"].pk
    # another project's token is refused like a wrong one; it opens its own project's server
    for token in (served["outsider"], served["revoked"], "cwe_nope_nope"):
        response = _tasks(mine, token)
        assert (response.status_code, response.json()) == (401, REFUSED)
        assert_token_path_refused(mine, token)
    elsewhere = json.loads(SAMPLES[2].read_text())["name"]
    assert [e["name"] for e in _tasks(theirs, served["outsider"]).json()["environments"]] == [
        elsewhere
    ]
    assert _tasks(theirs, served["member"]).status_code == 401
    assert httpx.get(f"{mine}/health").json() == {"status": "healthy"}
    # an HTTP episode through the mount (POST routes, episode_id sessions)
    headers = {"Authorization": f"Bearer {served['member']}"}
    task_key = served["spec"].tasks[0].key
    reset = httpx.post(f"{mine}/reset", json={"task_key": task_key}, headers=headers).json()
    episode_id = reset["observation"]["episode_id"]
    step = httpx.post(
        f"{mine}/step",
        json={"episode_id": episode_id, "action": {"reply": "Done."}},
        headers=headers,
    )
    assert step.status_code == 200 and step.json()["observation"]["turn_ended"] is True
    state = httpx.get(f"{mine}/state", params={"episode_id": episode_id}, headers=headers)
    assert (state.json()["task_key"], state.json()["step_count"]) == (task_key, 1)
    closed = httpx.post(f"{mine}/close", json={"episode_id": episode_id}, headers=headers)
    assert closed.json() == {"episode_id": episode_id, "closed": True}
    # Django answers everything outside /envs/<slug>/
    from django.urls import reverse

    login = httpx.get(app_url + reverse("accounts:login"))
    assert login.status_code == 200
    assert "text/html" in login.headers["content-type"]
    assert httpx.get(f"{app_url}/envs/{project.slug}").status_code == 404


def test_an_unknown_project_answers_as_a_wrong_token_does(app_url, served, project):
    """One answer for a slug no project has and a project the token is not a member of:
    the same 401 and body on every route and the /ws handshake, /health alike."""
    for slug in ("nope", project.slug):
        base = f"{app_url}/envs/{slug}"
        token = served["outsider"]
        for method, route, body in ROUTES:
            for url, headers in (
                (base + route, {"Authorization": f"Bearer {token}"}),
                (f"{base}/t/{token}{route}", {}),
            ):
                response = httpx.request(method, url, json=body, headers=headers)
                assert (response.status_code, response.json()) == (401, REFUSED), url
        assert httpx.get(f"{base}/health").json() == {"status": "healthy"}
        assert httpx.get(f"{base}/no-such-route").status_code == 404
        with pytest.raises(InvalidStatus) as refused:
            connect(base.replace("http://", "ws://") + f"/t/{token}/ws")
        denied = refused.value.response
        assert (denied.status_code, json.loads(denied.body)) == (401, REFUSED)


def test_a_withdrawn_environment_is_gone_after_a_refresh(app_url, served, project):
    url, token, valid = f"{app_url}/envs/{project.slug}", served["member"], served["valid"]
    ws_url = url.replace("http://", "ws://") + f"/t/{token}/ws"
    with connect(ws_url) as ws:
        ws.send(json.dumps({"type": "reset", "data": {"environment": valid.name}}))
        assert json.loads(ws.recv(timeout=30))["type"] == "observation"
    Environment.objects.filter(pk=valid.pk).update(status=EnvironmentStatus.DRAFT)
    wait_for(
        lambda: not _tasks(url, token).json()["environments"],
        timeout=20,
        interval=0.05,
        message="the catalogue to drop the withdrawn environment",
    )
    with connect(ws_url) as ws:
        ws.send(json.dumps({"type": "reset", "data": {"environment": valid.name}}))
        refused = json.loads(ws.recv(timeout=30))
    assert refused["type"] == "error"
    assert refused["data"]["message"] == f"no environment named {valid.name!r}"
    # validated again: served again at the next refresh
    Environment.objects.filter(pk=valid.pk).update(status=EnvironmentStatus.VALID)
    wait_for(
        lambda: _tasks(url, token).json()["environments"],
        timeout=20,
        interval=0.05,
        message="the catalogue to serve the environment again",
    )


def test_an_image_environments_view_tool_sends_the_stored_image_as_a_data_url(
    transactional_db, project, author
):
    """A receipts environment (images in the attachments storage), served by the web app:
    the oracle, driven through OpenEnv's client, sees each receipt it views as an
    ``image_url`` part with the stored bytes' ``data:`` URL, and scores 1.0."""
    from openenv.core import GenericEnvClient

    from apps.accounts.services import api_token_create
    from apps.environments.services import environment_import_with_files, environment_validate
    from apps.synthesis.generators.receipts import generate_receipts_environment
    from coworkenv_engine.attachments import data_url, image_urls
    from coworkenv_engine.spec import load_spec
    from coworkenv_web.asgi import application

    doc, files = generate_receipts_environment(seed=1, tasks=1)
    environment = environment_import_with_files(project=project, spec=doc, files=files, user=author)
    assert environment_validate(environment=environment).valid
    _, token = api_token_create(user=author, name="vlm trainer")
    spec = load_spec(doc)
    expected = {
        data_url(a["media_type"], files[a["sha256"]])
        for a in doc["attachments"]
        if a["media_type"].startswith("image/")
    }
    with running(application) as url:
        base = f"{url}/envs/{project.slug}/t/{token}"
        with GenericEnvClient(base_url=base).sync() as client:
            seen = play_oracle(client, spec, spec.tasks[0].key, faults=False)
    shown = {u for obs in seen for m in obs["messages"] for u in image_urls(m["content"])}
    assert shown and shown <= expected
    assert seen[-1]["reward"] == 1.0


def test_the_session_limit_of_the_settings_holds_through_the_mount(served, project):
    """ENVSERVER_MAX_SESSIONS=2: a third WebSocket gets CAPACITY_REACHED and an HTTP reset
    503 until a session ends."""
    from coworkenv_web.asgi import application

    token, task_key = served["member"], served["spec"].tasks[0].key
    headers = {"Authorization": f"Bearer {token}"}
    with (
        override_settings(ENVSERVER_MAX_SESSIONS=2, ENVSERVER_MAX_SESSIONS_PER_TOKEN=2),
        running(application) as url,
    ):
        mine = f"{url}/envs/{project.slug}"
        ws_url = mine.replace("http://", "ws://") + f"/t/{token}/ws"
        with connect(ws_url) as first, connect(ws_url) as second:
            for ws in (first, second):
                ws.send(json.dumps({"type": "reset", "data": {"task_key": task_key}}))
                assert json.loads(ws.recv(timeout=30))["type"] == "observation"
            with connect(ws_url) as third:
                refused = json.loads(third.recv(timeout=30))
            assert refused["type"] == "error"
            assert refused["data"] == {
                "message": "session limit reached",
                "code": "CAPACITY_REACHED",
                "active_sessions": 2,
                "max_sessions": 2,
                "max_sessions_per_token": 2,
            }
            reset = httpx.post(f"{mine}/reset", json={"task_key": task_key}, headers=headers)
            assert reset.status_code == 503
            assert reset.json()["code"] == "CAPACITY_REACHED"
        # both WebSockets closed: their slots are free again
        wait_for(
            lambda: (
                httpx.post(
                    f"{mine}/reset", json={"task_key": task_key}, headers=headers
                ).status_code
                == 200
            ),
            timeout=20,
            interval=0.05,
            message="a freed session slot",
        )


class GatedStorage(FileSystemStorage):
    """The attachments storage of the tests, each read held until the test opens ``gate``:
    what an S3 bucket far away looks like to the server. ``reads`` counts the reads begun."""

    gate = threading.Event()
    reading = threading.Event()
    reads = 0

    def _open(self, name, mode="rb"):
        type(self).reads += 1
        type(self).reading.set()
        assert type(self).gate.wait(60), "the test never let the read finish"
        return super()._open(name, mode)


def test_a_slow_image_read_stalls_only_the_session_viewing_it(transactional_db, project, author):
    """Session A views a receipt whose image read is held in storage; meanwhile session B's
    steps keep coming back (the read runs in a worker thread, not on the event loop). A's
    second view of the same image is served from the cache, with no second read."""
    from django.conf import settings as django_settings

    from apps.accounts.services import api_token_create
    from apps.environments.services import environment_import_with_files, environment_validate
    from apps.synthesis.generators.receipts import generate_receipts_environment
    from coworkenv_engine.attachments import data_url
    from coworkenv_web.asgi import application

    doc, files = generate_receipts_environment(seed=1, tasks=1)
    environment = environment_import_with_files(project=project, spec=doc, files=files, user=author)
    assert environment_validate(environment=environment).valid
    _, token = api_token_create(user=author, name="vlm trainer")
    task_key = doc["tasks"][0]["key"]
    receipt = doc["services"]["expenses"]["receipts"][0]
    sha = receipt["image"].removeprefix("sha256:")
    expected_url = data_url("image/png", files[sha])
    view = {"tool_calls": [{"name": "view_receipt", "arguments": {"receipt_id": receipt["id"]}}]}
    listing = {"tool_calls": [{"name": "list_receipts", "arguments": {}}]}
    gated = {
        **django_settings.STORAGES,
        "attachments": {
            **django_settings.STORAGES["attachments"],
            "BACKEND": f"{__name__}.GatedStorage",
        },
    }
    GatedStorage.gate.clear()
    GatedStorage.reading.clear()
    GatedStorage.reads = 0
    with override_settings(STORAGES=gated), running(application) as url:
        ws_url = url.replace("http://", "ws://") + f"/envs/{project.slug}/t/{token}/ws"
        with connect(ws_url) as a, connect(ws_url) as b:
            for ws in (a, b):
                ws.send(json.dumps({"type": "reset", "data": {"task_key": task_key}}))
                assert json.loads(ws.recv(timeout=30))["type"] == "observation"
            try:
                a.send(json.dumps({"type": "step", "data": view}))
                assert GatedStorage.reading.wait(30), "A's view never read the image"
                for _ in range(5):  # A's read is still held: B is served all the same
                    b.send(json.dumps({"type": "step", "data": listing}))
                    assert json.loads(b.recv(timeout=30))["type"] == "observation"
                assert GatedStorage.reads == 1
            finally:
                GatedStorage.gate.set()
            first = json.loads(a.recv(timeout=60))["data"]["observation"]["tool_results"][0]
            assert {"type": "image_url", "image_url": {"url": expected_url}} in first["content"]
            # the same image again: from the cache, no storage read
            a.send(json.dumps({"type": "step", "data": view}))
            again = json.loads(a.recv(timeout=60))["data"]["observation"]["tool_results"][0]
            assert {"type": "image_url", "image_url": {"url": expected_url}} in again["content"]
            assert GatedStorage.reads == 1


ROUTES = [
    ("GET", "/metadata", None),
    ("GET", "/schema", None),
    ("GET", "/tasks", None),
    ("POST", "/reset", {}),
    ("POST", "/step", {"episode_id": "x", "action": {"reply": "hi"}}),
    ("GET", "/state?episode_id=x", None),
    ("POST", "/close", {"episode_id": "x"}),
    ("POST", "/mcp", {}),
]


def test_every_route_refuses_a_bad_revoked_missing_or_other_projects_token_alike(
    app_url, served, project
):
    """The same 401 and body on every route, by header and by /t/<token>/ prefix, the /ws
    handshake included, whatever is wrong with the token."""
    mine = f"{app_url}/envs/{project.slug}"
    tokens = {
        "other project": served["outsider"],
        "revoked": served["revoked"],
        "unknown": "cwe_nope_nope",
        "not a token": "x",
    }
    with httpx.Client() as client:
        for what, token in tokens.items():
            for method, route, body in ROUTES:
                for url, headers in (
                    (mine + route, {"Authorization": f"Bearer {token}"}),
                    (f"{mine}/t/{token}{route}", {}),
                ):
                    response = client.request(method, url, json=body, headers=headers)
                    assert (response.status_code, response.json()) == (401, REFUSED), (what, url)
            for url, headers in (
                (f"{mine}/ws", {"Authorization": f"Bearer {token}"}),
                (f"{mine}/t/{token}/ws", {}),
            ):
                with pytest.raises(InvalidStatus) as refused:
                    connect(url.replace("http://", "ws://"), additional_headers=headers)
                denied = refused.value.response
                assert (denied.status_code, json.loads(denied.body)) == (401, REFUSED), (what, url)
        for method, route, body in ROUTES:  # no token at all
            response = client.request(method, mine + route, json=body)
            assert (response.status_code, response.json()) == (401, REFUSED), route
    with pytest.raises(InvalidStatus) as refused:
        connect(mine.replace("http://", "ws://") + "/ws")
    denied = refused.value.response
    assert (denied.status_code, json.loads(denied.body)) == (401, REFUSED)


def test_a_session_of_one_project_is_not_found_under_another(
    app_url, served, project, other_project
):
    """Each project's server keeps its own sessions: project A's episode id, presented to
    /envs/B/ with a valid B token, finds nothing there (404), and A's session is untouched."""
    mine, theirs = f"{app_url}/envs/{project.slug}", f"{app_url}/envs/{other_project.slug}"
    a_headers = {"Authorization": f"Bearer {served['member']}"}
    b_headers = {"Authorization": f"Bearer {served['outsider']}"}
    task_key = served["spec"].tasks[0].key
    reset = httpx.post(f"{mine}/reset", json={"task_key": task_key}, headers=a_headers)
    ep_a = reset.json()["observation"]["episode_id"]
    step = {"episode_id": ep_a, "action": {"reply": "Done."}}
    for response in (
        httpx.post(f"{theirs}/step", json=step, headers=b_headers),
        httpx.get(f"{theirs}/state", params={"episode_id": ep_a}, headers=b_headers),
        httpx.post(f"{theirs}/close", json={"episode_id": ep_a}, headers=b_headers),
    ):
        assert response.status_code == 404
        assert response.json()["code"] == "NOT_FOUND"
    # a reset under B naming A's episode id finds nothing either; A's is as it was
    elsewhere = json.loads(SAMPLES[2].read_text())
    b_reset = httpx.post(
        f"{theirs}/reset",
        json={"episode_id": ep_a, "task_key": elsewhere["tasks"][0]["key"]},
        headers=b_headers,
    )
    assert b_reset.status_code == 404
    state = httpx.get(f"{mine}/state", params={"episode_id": ep_a}, headers=a_headers).json()
    assert (state["environment"], state["task_key"], state["step_count"]) == (
        served["valid"].name,
        task_key,
        0,
    )
    # and A's token opens nothing under B, B's nothing under A
    assert httpx.post(f"{theirs}/step", json=step, headers=a_headers).status_code == 401
    assert httpx.post(f"{mine}/step", json=step, headers=b_headers).status_code == 401
    assert httpx.post(f"{mine}/step", json=step, headers=a_headers).status_code == 200
