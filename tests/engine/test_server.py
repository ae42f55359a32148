"""The OpenEnv-protocol environment server, driven over a real loopback socket: httpx for the
HTTP routes, websockets for the raw /ws protocol, openenv-core's own client, and many
interleaved sessions compared with in-process episodes."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from coworkenv_engine.adversaries import policy_by_name
from coworkenv_engine.policies import ToolCall
from coworkenv_engine.runner import run_task
from coworkenv_engine.server import create_app
from coworkenv_engine.session import EpisodeSession, public_grading
from coworkenv_engine.spec import load_spec

from .drive import play
from .helpers import SAMPLES, load_json
from .serving import running

TOKEN = "s3cret-token"
SPECS = [load_spec(load_json(p)) for p in SAMPLES]
BY_NAME = {s.name: s for s in SPECS}
CASES = [(s.name, t.key) for s in SPECS for t in s.tasks]


def scripted(env: str, task_key: str, policy_name: str, seed: int):
    """The wire actions ``policy_name`` takes and the observations an in-process session
    returns for them."""
    spec = BY_NAME[env]
    session = EpisodeSession(spec, task_key, seed, evidence=False)  # as a server shows it
    actions: list[dict] = []

    def step(action):
        actions.append(action)
        return session.act(
            action["reply"], [ToolCall(c["name"], c["arguments"]) for c in action["tool_calls"]]
        )

    observations = play(spec, task_key, policy_by_name(policy_name), session.start(), step)
    return actions, observations


def unwire(payload: dict) -> dict:
    obs = dict(payload["observation"])
    obs.pop("episode_id", None)
    return {**obs, "reward": payload["reward"], "done": payload["done"]}


@pytest.fixture(scope="module")
def base_url():
    with running(create_app(SPECS, token=TOKEN, max_sessions=300)) as url:
        yield url


@pytest.fixture
def http(base_url):
    with httpx.Client(
        base_url=base_url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30
    ) as client:
        yield client


def ws_url(base_url: str) -> str:
    return base_url.replace("http://", "ws://") + f"/t/{TOKEN}/ws"


# --------------------------------------------------------------------------- HTTP routes


def test_health_needs_no_token_and_the_rest_does(base_url):
    assert httpx.get(f"{base_url}/health").json() == {"status": "healthy"}
    for path in ("/tasks", "/metadata", "/schema", "/state?episode_id=x"):
        assert httpx.get(f"{base_url}{path}").status_code == 401
        bad = httpx.get(f"{base_url}{path}", headers={"Authorization": "Bearer nope"})
        assert bad.status_code == 401
    assert httpx.post(f"{base_url}/reset", json={}).status_code == 401
    assert httpx.get(f"{base_url}/t/nope/tasks").status_code == 401
    assert httpx.get(f"{base_url}/t/{TOKEN}/tasks").status_code == 200


def test_task_listing_has_splits_and_capabilities(http):
    listing = http.get("/tasks").json()
    assert [e["name"] for e in listing["environments"]] == [s.name for s in SPECS]
    acme = next(e for e in listing["environments"] if e["name"].startswith("Acme Ops"))
    assert acme["splits"] == ["eval", "train"]
    assert "clarify-before-acting" in acme["capabilities"]
    clarify = next(t for t in acme["tasks"] if t["key"] == "budget-figure-clarify")
    assert clarify == {
        "key": "budget-figure-clarify",
        "title": BY_NAME[acme["name"]].task("budget-figure-clarify").title,
        "split": "train",
        "capabilities": ["clarify-before-acting"],
        "turns": 2,
    }


def test_metadata_and_schema(http):
    meta = http.get("/metadata").json()
    assert meta["name"] == "coworkenv" and meta["version"] == "1.0.0"
    assert set(meta) == {
        "name",
        "description",
        "readme_content",
        "version",
        "author",
        "documentation_url",
    }
    schema = http.get("/schema").json()
    assert set(schema) == {"action", "observation", "state"}
    assert set(schema["action"]["properties"]) == {"tool_calls", "reply", "metadata"}
    assert schema["state"]["properties"]["step_count"] == {"type": "integer", "minimum": 0}


@pytest.mark.parametrize(("env", "task_key"), CASES)
def test_http_oracle_gets_the_engine_score(http, env, task_key):
    spec = BY_NAME[env]
    first = http.post("/reset", json={"environment": env, "task_key": task_key, "seed": 2})
    assert first.status_code == 200
    episode_id = first.json()["observation"]["episode_id"]

    def step(action):
        r = http.post("/step", json={"episode_id": episode_id, "action": action})
        assert r.status_code == 200, r.text
        return unwire(r.json())

    seen = play(spec, task_key, policy_by_name("oracle"), unwire(first.json()), step)
    expected = run_task(spec, task_key, policy_by_name("oracle"), seed=2)
    assert seen[-1]["reward"] == expected.grading.score == 1.0
    assert seen[-1]["grading"] == public_grading(expected.grading)
    assert seen[-1]["grading"]["strict"] is True
    state = http.get("/state", params={"episode_id": episode_id}).json()
    assert state["episode_id"] == episode_id
    assert state["step_count"] == len(seen) - 1
    assert state["state_hash"] == expected.state_hash
    assert state["done"] is True
    assert http.post("/close", json={"episode_id": episode_id}).json() == {
        "episode_id": episode_id,
        "closed": True,
    }
    assert http.get("/state", params={"episode_id": episode_id}).status_code == 404


def test_http_do_nothing_stays_below_the_threshold(http):
    for env, task_key in CASES:
        first = http.post("/reset", json={"environment": env, "task_key": task_key}).json()
        obs = first
        episode_id = first["observation"]["episode_id"]
        while not obs["done"]:
            obs = http.post(
                "/step", json={"episode_id": episode_id, "action": {"reply": "Done."}}
            ).json()
        threshold = obs["observation"]["grading"]["config"]["pass_threshold"]
        assert obs["reward"] < threshold, (env, task_key)
        assert obs["observation"]["grading"]["passed"] is False


def test_reset_draws_from_split_and_capability_by_seed(http):
    env = next(s.name for s in SPECS if s.name.startswith("Acme Ops"))
    keys = set()
    for seed in range(12):
        obs = http.post("/reset", json={"environment": env, "split": "train", "seed": seed}).json()[
            "observation"
        ]
        keys.add(obs["episode"]["task_key"])
        again = http.post(
            "/reset", json={"environment": env, "split": "train", "seed": seed}
        ).json()["observation"]
        assert again["episode"]["task_key"] == obs["episode"]["task_key"]
    assert keys == {"book-q3-review", "budget-figure-clarify"}
    obs = http.post("/reset", json={"capability": "respect-confidentiality"}).json()
    assert obs["observation"]["episode"]["task_key"] == "share-summary-safely"


@pytest.mark.parametrize(
    ("payload", "status"),
    [
        ({"seed": -1}, 422),
        ({"seed": "1"}, 422),
        ({"faults": "yes"}, 422),
        ({"colour": "red"}, 422),
        ({"task_key": "no-such-task"}, 404),
        ({"environment": "Nope"}, 404),
        ({"split": "holdout"}, 404),
    ],
)
def test_bad_reset_is_refused(http, payload, status):
    r = http.post("/reset", json=payload)
    assert r.status_code == status, r.text


def test_bad_steps_are_refused(http):
    first = http.post("/reset", json={"task_key": "book-q3-review"}).json()
    episode_id = first["observation"]["episode_id"]
    bad = http.post("/step", json={"episode_id": episode_id, "action": {"say": "hi"}})
    assert bad.status_code == 422
    assert bad.json()["detail"] == [{"loc": ["say"], "msg": "unknown action field 'say'"}]
    assert http.post("/step", json={"episode_id": episode_id}).status_code == 422
    assert http.post("/step", json={"action": {"reply": "x"}}).status_code == 422
    assert http.post("/step", json={"episode_id": "nope", "action": {}}).status_code == 404
    bad_call = http.post(
        "/step", json={"episode_id": episode_id, "action": {"tool_calls": [{"arguments": {}}]}}
    )
    assert bad_call.status_code == 422
    # a tool error is an observation, not a protocol error
    tool_err = http.post(
        "/step",
        json={"episode_id": episode_id, "action": {"tool_calls": [{"name": "nope"}]}},
    ).json()
    assert tool_err["observation"]["tool_results"][0]["error_code"] == "unknown_tool"
    final = http.post("/step", json={"episode_id": episode_id, "action": {}}).json()
    assert final["done"] is True
    over = http.post("/step", json={"episode_id": episode_id, "action": {"reply": "x"}})
    assert over.status_code == 409
    assert http.post("/reset", content=b"{not json").status_code == 400


# --------------------------------------------------------------------------- WebSocket


def ws_call(ws, message: dict) -> dict:
    ws.send(json.dumps(message))
    return json.loads(ws.recv(timeout=30))


def test_ws_protocol_and_errors(base_url):
    with connect(ws_url(base_url)) as ws:
        before = ws_call(ws, {"type": "step", "data": {"reply": "hi"}})
        assert before["type"] == "error" and before["data"]["code"] == "EXECUTION_ERROR"
        ws.send("{oops")
        assert json.loads(ws.recv(timeout=30))["data"]["code"] == "INVALID_JSON"
        assert ws_call(ws, {"type": "dance"})["data"]["code"] == "UNKNOWN_TYPE"
        assert ws_call(ws, {"type": "state", "data": {}})["data"]["code"] == "VALIDATION_ERROR"
        bad_seed = ws_call(ws, {"type": "reset", "data": {"seed": -3}})
        assert bad_seed["data"]["code"] == "VALIDATION_ERROR"
        obs = ws_call(ws, {"type": "reset", "data": {"task_key": "book-q3-review"}})
        assert obs["type"] == "observation" and obs["data"]["done"] is False
        assert obs["data"]["observation"]["system_prompt"]
        state = ws_call(ws, {"type": "state"})
        assert state["type"] == "state"
        assert state["data"]["task_key"] == "book-q3-review" and state["data"]["step_count"] == 0
        bad = ws_call(ws, {"type": "step", "data": {"reply": 3}})
        assert bad["data"]["code"] == "VALIDATION_ERROR"
        assert bad["data"]["errors"] == [
            {"loc": ["reply"], "msg": "reply must be a string or null"}
        ]
        ws.send(json.dumps({"type": "close"}))
        with pytest.raises(Exception):  # noqa: B017 - the server closes without a reply
            ws.recv(timeout=30)


def test_ws_without_token_is_refused(base_url):
    """The handshake gets the HTTP routes' 401 and body (uvicorn sends denial responses)."""
    for path, headers in (
        ("/ws", {}),
        ("/ws", {"Authorization": "Bearer wrong"}),
        ("/t/wrong/ws", {}),
    ):
        with pytest.raises(InvalidStatus) as refused:
            connect(base_url.replace("http://", "ws://") + path, additional_headers=headers)
        response = refused.value.response
        assert response.status_code == 401, path
        assert json.loads(response.body) == {"detail": "missing or wrong token"}
    with connect(
        base_url.replace("http://", "ws://") + "/ws",
        additional_headers={"Authorization": f"Bearer {TOKEN}"},
    ) as ws:
        assert ws_call(ws, {"type": "state"})["data"]["step_count"] == 0


@pytest.mark.parametrize(("env", "task_key"), CASES)
def test_openenv_client_drives_the_oracle_to_the_engine_score(base_url, env, task_key):
    from openenv.core import GenericEnvClient

    spec = BY_NAME[env]
    expected = run_task(spec, task_key, policy_by_name("oracle"), seed=1)
    with GenericEnvClient(base_url=f"{base_url}/t/{TOKEN}").sync() as client:
        first = client.reset(environment=env, task_key=task_key, seed=1)

        def as_obs(result):
            return {**result.observation, "reward": result.reward, "done": result.done}

        seen = play(
            spec,
            task_key,
            policy_by_name("oracle"),
            as_obs(first),
            lambda a: as_obs(client.step(a)),
        )
        state = client.state()
    assert seen[-1]["reward"] == expected.grading.score == 1.0
    assert seen[-1]["grading"] == public_grading(expected.grading)
    assert state["state_hash"] == expected.state_hash
    # a do-nothing episode through the same client stays below the threshold
    with GenericEnvClient(base_url=f"{base_url}/t/{TOKEN}").sync() as client:
        result = client.reset(environment=env, task_key=task_key, seed=1)
        while not result.done:
            result = client.step({"reply": "Done."})
    assert result.reward < result.observation["grading"]["config"]["pass_threshold"]


SESSION = st.tuples(
    st.sampled_from(CASES), st.sampled_from(["oracle", "null", "sprayer"]), st.integers(0, 3)
)


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(sessions=st.lists(SESSION, min_size=2, max_size=6), order=st.data())
def test_interleaved_sessions_stay_isolated(base_url, sessions, order):
    scripts = [scripted(env, key, policy, seed) for (env, key), policy, seed in sessions]
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(connect(ws_url(base_url))) for _ in scripts]
        for ws, ((env, key), _policy, seed), (_actions, expected) in zip(
            sockets, sessions, scripts, strict=True
        ):
            first = ws_call(
                ws, {"type": "reset", "data": {"environment": env, "task_key": key, "seed": seed}}
            )
            assert unwire(first["data"]) == expected[0]
        cursor = [0] * len(scripts)
        pending = [i for i, (actions, _) in enumerate(scripts) for _ in actions]
        schedule = order.draw(st.permutations(pending))
        for i in schedule:
            actions, expected = scripts[i]
            reply = ws_call(sockets[i], {"type": "step", "data": actions[cursor[i]]})
            cursor[i] += 1
            assert unwire(reply["data"]) == expected[cursor[i]]
        for ws, (_actions, expected) in zip(sockets, scripts, strict=True):
            state = ws_call(ws, {"type": "state"})["data"]
            assert state["score"] == expected[-1]["reward"]


def test_200_concurrent_sessions_match_in_process_runs(base_url):
    from websockets.asyncio.client import connect as aconnect

    jobs = [
        (CASES[i % len(CASES)], ["oracle", "null", "sprayer"][i % 3], i % 5) for i in range(200)
    ]
    scripts = {}
    for (env, key), policy, seed in jobs:
        if (env, key, policy, seed) not in scripts:
            scripts[env, key, policy, seed] = scripted(env, key, policy, seed)

    async def one(env, key, policy, seed):
        actions, expected = scripts[env, key, policy, seed]
        # 200 handshakes at once on a busy machine: past websockets' 10 s default, no pings.
        async with aconnect(ws_url(base_url), open_timeout=60, ping_interval=None) as ws:
            await ws.send(
                json.dumps(
                    {"type": "reset", "data": {"environment": env, "task_key": key, "seed": seed}}
                )
            )
            got = [unwire(json.loads(await ws.recv())["data"])]
            for action in actions:
                await ws.send(json.dumps({"type": "step", "data": action}))
                got.append(unwire(json.loads(await ws.recv())["data"]))
                await asyncio.sleep(0)
            return got == expected

    async def all_of_them():
        return await asyncio.gather(*(one(env, key, p, s) for (env, key), p, s in jobs))

    # In a thread of its own: Playwright's sync API (the browser tests, earlier in the same
    # session) leaves an event loop running in the main thread, where asyncio.run refuses.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        outcomes = pool.submit(asyncio.run, all_of_them()).result()
    assert outcomes == [True] * 200


# --------------------------------------------------------------------------- limits


def test_capacity_and_expiry():
    now = [0.0]
    app = create_app(SPECS, max_sessions=2, idle_timeout=60, max_lifetime=300, clock=lambda: now[0])
    with running(app) as url:
        ws = url.replace("http://", "ws://") + "/ws"
        with connect(ws) as a, connect(ws):
            assert (
                ws_call(a, {"type": "reset", "data": {"task_key": "book-q3-review"}})["type"]
                == "observation"
            )
            with connect(ws) as c:
                full = json.loads(c.recv(timeout=30))
                assert full == {
                    "type": "error",
                    "data": {
                        "message": "session limit reached",
                        "code": "CAPACITY_REACHED",
                        "active_sessions": 2,
                        "max_sessions": 2,
                        "max_sessions_per_token": 2,
                    },
                }
            assert httpx.post(f"{url}/reset", json={}).status_code == 503
            now[0] = 61.0  # a idle past the timeout
            expired = ws_call(a, {"type": "step", "data": {"reply": "x"}})
            assert expired["data"]["code"] == "SESSION_ERROR"
        # HTTP sessions expire by idleness and by lifetime
        first = httpx.post(f"{url}/reset", json={"task_key": "book-q3-review"}).json()
        episode_id = first["observation"]["episode_id"]
        now[0] += 59
        ok = httpx.post(
            f"{url}/step",
            json={"episode_id": episode_id, "action": {"tool_calls": [{"name": "nope"}]}},
        )
        assert ok.status_code == 200
        now[0] += 59
        assert httpx.get(f"{url}/state", params={"episode_id": episode_id}).status_code == 200
        now[0] += 61
        gone = httpx.post(f"{url}/step", json={"episode_id": episode_id, "action": {}})
        assert gone.status_code == 404 and "expired" in gone.json()["detail"]
        first = httpx.post(f"{url}/reset", json={"task_key": "book-q3-review"}).json()
        episode_id = first["observation"]["episode_id"]
        for _ in range(6):  # active every 50 s, 300 s of lifetime
            now[0] += 50
            step = httpx.post(
                f"{url}/step",
                json={"episode_id": episode_id, "action": {"tool_calls": [{"name": "nope"}]}},
            )
            assert step.status_code == 200
        now[0] += 1
        assert httpx.get(f"{url}/state", params={"episode_id": episode_id}).status_code == 404


# --------------------------------------------------------------------------- command line


def test_cli_serve_runs_a_server_with_a_token_from_the_environment(tmp_path):
    import os
    import socket
    import subprocess
    import sys
    import time

    from .helpers import ROOT

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "COWORKENV_ENV_TOKEN": TOKEN}
    samples = [str(p) for p in SAMPLES]
    proc = subprocess.Popen(
        [sys.executable, "-m", "coworkenv_engine", "serve", *samples, "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/health").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.1)
        assert httpx.get(f"{url}/tasks").status_code == 401
        listing = httpx.get(f"{url}/t/{TOKEN}/tasks").json()
        assert [e["name"] for e in listing["environments"]] == [s.name for s in SPECS]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_cli_serve_refuses_unreadable_and_invalid_files(tmp_path, capsys):
    from coworkenv_engine.cli import main

    assert main(["serve", str(tmp_path / "missing.json")]) == 2
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema": "coworkenv.environment/v1"}))
    assert main(["serve", str(bad)]) == 1
    assert "cannot load" in capsys.readouterr().err


def test_cli_serve_refuses_a_public_bind_without_a_token(monkeypatch, capsys):
    from coworkenv_engine.cli import main

    monkeypatch.delenv("COWORKENV_ENV_TOKEN", raising=False)
    assert main(["serve", str(SAMPLES[0]), "--host", "0.0.0.0"]) == 2
    assert "needs a token" in capsys.readouterr().err


def test_an_authorise_callable_decides_and_listing_extras_are_added():
    seen: list[str] = []

    async def authorise(given: str, client: str) -> bool:
        seen.append(given)
        return given == "good"

    name = SPECS[0].name
    app = create_app(SPECS[:1], authorise=authorise, listing_extra={name: {"id": 7}})
    with running(app) as url:
        assert httpx.get(f"{url}/tasks").status_code == 401
        assert httpx.get(f"{url}/tasks", headers={"Authorization": "Bearer bad"}).status_code == 401
        listing = httpx.get(f"{url}/t/good/tasks").json()
        with pytest.raises(InvalidStatus):
            connect(url.replace("http://", "ws://") + "/t/bad/ws")
        with connect(url.replace("http://", "ws://") + "/t/good/ws") as ws:
            assert ws_call(ws, {"type": "state"})["data"]["step_count"] == 0
    assert seen == ["", "bad", "good", "bad", "good"]
    assert listing["environments"][0]["id"] == 7
    assert listing["environments"][0]["name"] == name
    with pytest.raises(ValueError, match="not both"):
        create_app(SPECS, token="t", authorise=authorise)


# --- images: a view tool's image reaches the trainer as an image_url part ----------------


def _view_receipt(url: str) -> list:
    """Reset ``file-rc-1`` of the image spec over OpenEnv's client, view the receipt; the
    tool message's content and the tool result's content (the same)."""
    from openenv.core import GenericEnvClient

    with GenericEnvClient(base_url=f"{url}/t/{TOKEN}").sync() as client:
        client.reset(task_key="file-rc-1", faults=False)
        action = {"tool_calls": [{"name": "view_receipt", "arguments": {"receipt_id": "rc-1"}}]}
        obs = client.step(action).observation
    (message,), (result,) = obs["messages"], obs["tool_results"]
    assert message["content"] == result["content"]
    return message["content"]


def test_a_view_tools_image_is_sent_as_a_data_url_part():
    from coworkenv_engine.attachments import data_url

    from .test_attachments import FILES, PNG, PNG_SHA, image_spec

    record = {"id": "rc-1", "uploaded_on": "2026-02-27", "image": f"sha256:{PNG_SHA}"}
    with running(create_app([image_spec()], token=TOKEN, attachments=FILES.get)) as url:
        text, image = _view_receipt(url)
    assert (text["type"], json.loads(text["text"])) == ("text", record)
    assert image == {"type": "image_url", "image_url": {"url": data_url("image/png", PNG)}}
    assert image["image_url"]["url"].startswith("data:image/png;base64,")
    # without a resolver the part keeps the transcript's attachment: URL
    with running(create_app([image_spec()], token=TOKEN)) as url:
        assert _view_receipt(url)[1] == {
            "type": "image_url",
            "image_url": {"url": f"attachment:sha256:{PNG_SHA}"},
        }
    # bytes missing from the store: a text part says so
    with running(create_app([image_spec()], token=TOKEN, attachments={}.get)) as url:
        assert _view_receipt(url)[1] == {
            "type": "text",
            "text": "[image rc-1.png is not available]",
        }


def test_a_resolver_that_fails_makes_the_image_not_available_and_is_asked_again():
    from .test_attachments import FILES, PNG_SHA, image_spec

    asked = []

    def flaky(sha: str) -> bytes | None:
        asked.append(sha)
        if len(asked) == 1:
            raise ConnectionError("the bucket is down")
        return FILES.get(sha)

    with running(create_app([image_spec()], token=TOKEN, attachments=flaky)) as url:
        first = _view_receipt(url)[1]
        second = _view_receipt(url)[1]
    assert first == {"type": "text", "text": "[image rc-1.png is not available]"}
    assert second["image_url"]["url"].startswith("data:image/png;base64,")
    assert asked == [PNG_SHA, PNG_SHA]  # a failure is not kept; a success is


def test_image_urls_read_off_the_loop_once_for_concurrent_views_and_leave_the_transcript():
    """``ImageURLs.show``: concurrent misses of one image share one read (in a worker
    thread); the observation gets data: URLs, the session's transcript keeps attachment:
    URLs."""
    import asyncio
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor

    from coworkenv_engine.attachments import data_url
    from coworkenv_engine.policies import ToolCall
    from coworkenv_engine.protocol import ImageURLs
    from coworkenv_engine.session import EpisodeSession

    from .test_attachments import FILES, PNG, PNG_SHA, image_spec

    reads, loop_threads = [], set()

    def slow(sha: str) -> bytes | None:
        reads.append(threading.current_thread().name)
        time.sleep(0.3)
        return FILES.get(sha)

    images = ImageURLs(slow)
    view = ToolCall(name="view_receipt", arguments={"receipt_id": "rc-1"})

    async def both():
        loop_threads.add(threading.current_thread().name)
        sessions = [EpisodeSession(image_spec(), "file-rc-1", faults=False) for _ in range(2)]
        for session in sessions:
            session.start()
        observations = [s.act(tool_calls=[view]) for s in sessions]
        shown = await asyncio.gather(
            *(images.show(obs, s.spec) for obs, s in zip(observations, sessions, strict=True))
        )
        return sessions, shown

    with ThreadPoolExecutor(1) as pool:
        sessions, shown = pool.submit(asyncio.run, both()).result()
    assert len(reads) == 1 and reads[0] not in loop_threads
    url = data_url("image/png", PNG)
    for obs, session in zip(shown, sessions, strict=True):
        assert obs["messages"][0]["content"][1] == {"type": "image_url", "image_url": {"url": url}}
        assert obs["tool_results"][0]["content"][1]["image_url"]["url"] == url
        kept = session.transcript[-1]["content"][1]["image_url"]["url"]
        assert kept == f"attachment:sha256:{PNG_SHA}"
