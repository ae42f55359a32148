"""The environment server served from the app: a project's validated environments from the
database, opened by its members' API tokens, driven over a real loopback socket by httpx,
websockets and openenv-core's own client."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from apps.environments.models import Environment, EnvironmentStatus
from apps.environments.services import environment_import
from apps.environments.serving import project_catalogue, project_envserver_app
from coworkenv_engine.adversaries import policy_by_name
from coworkenv_engine.runner import run_task
from coworkenv_engine.session import public_grading
from tests.engine.drive import play
from tests.engine.serving import running

from .conftest import SAMPLES

REFUSED = {"detail": "missing or wrong token"}


@pytest.fixture
def base_url(served, project):
    app = project_envserver_app(project=project, max_sessions=20, refresh_interval=None)
    with running(app) as url:
        yield url


def _listed(url: str, token: str) -> list[str]:
    listing = httpx.get(f"{url}/tasks", headers={"Authorization": f"Bearer {token}"}).json()
    return [e["name"] for e in listing["environments"]]


def _wait_for(condition, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("the catalogue was not refreshed in time")
        time.sleep(0.05)


def test_the_catalogue_is_refreshed_from_the_database(served, project):
    valid, draft, token = served["valid"], served["draft"], served["member"]
    app = project_envserver_app(project=project, refresh_interval=0.2)
    with running(app) as url:
        assert _listed(url, token) == [valid.name]
        with connect(url.replace("http://", "ws://") + f"/t/{token}/ws") as ws:
            task_key = served["spec"].tasks[0].key
            ws.send(json.dumps({"type": "reset", "data": {"task_key": task_key}}))
            assert json.loads(ws.recv(timeout=30))["type"] == "observation"
            Environment.objects.filter(pk=draft.pk).update(status=EnvironmentStatus.VALID)
            _wait_for(lambda: _listed(url, token) == [valid.name, draft.name])
            Environment.objects.filter(pk=valid.pk).update(status=EnvironmentStatus.DRAFT)
            _wait_for(lambda: _listed(url, token) == [draft.name])
            # the running episode keeps its spec; a new reset of the withdrawn one is refused
            ws.send(json.dumps({"type": "step", "data": {"reply": "Done."}}))
            assert json.loads(ws.recv(timeout=30))["type"] == "observation"
            ws.send(json.dumps({"type": "reset", "data": {"environment": valid.name}}))
            refused = json.loads(ws.recv(timeout=30))
            assert refused["type"] == "error"
            assert refused["data"]["message"] == f"no environment named {valid.name!r}"


def test_catalogue_serves_only_validated_environments(served, project):
    catalogue = project_catalogue(project=project)
    assert [s.name for s in catalogue.specs] == [served["valid"].name]
    assert catalogue.extra == {
        served["valid"].name: {
            "id": served["valid"].pk,
            "revision": served["valid"].revision,
            "spec_hash": served["valid"].spec_hash,
        }
    }
    assert served["draft"].status == EnvironmentStatus.DRAFT


def test_duplicate_names_are_served_apart(served, project, author):
    twin = environment_import(project=project, spec=json.loads(SAMPLES[0].read_text()), user=author)
    Environment.objects.filter(pk=twin.pk).update(status=EnvironmentStatus.APPROVED)
    names = [s.name for s in project_catalogue(project=project).specs]
    name = served["valid"].name
    assert names == [f"{name} #{served['valid'].pk}", f"{name} #{twin.pk}"]


def test_listing_has_splits_capabilities_and_lineage(base_url, served):
    listing = httpx.get(
        f"{base_url}/tasks", headers={"Authorization": f"Bearer {served['member']}"}
    ).json()
    spec = served["spec"]
    (entry,) = listing["environments"]
    assert entry["name"] == spec.name
    assert entry["id"] == served["valid"].pk
    assert entry["revision"] == served["valid"].revision
    assert entry["spec_hash"] == served["valid"].spec_hash
    assert entry["splits"] == sorted({t.split for t in spec.tasks})
    assert entry["capabilities"] == sorted({c for t in spec.tasks for c in t.capabilities})
    assert [t["key"] for t in entry["tasks"]] == [t.key for t in spec.tasks]
    # the /t/<token> prefix works the same
    same = httpx.get(f"{base_url}/t/{served['member']}/tasks").json()
    assert same == listing


@pytest.mark.parametrize("who", ["none", "wrong", "outsider", "revoked"])
def test_other_tokens_are_refused_alike(base_url, served, who):
    token = {"none": "", "wrong": "cwe_nope_nope", "outsider": served["outsider"]}.get(
        who, served.get(who)
    )
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    for path in ("/tasks", "/metadata", "/schema"):
        response = httpx.get(f"{base_url}{path}", headers=headers)
        assert (response.status_code, response.json()) == (401, REFUSED)
    reset = httpx.post(f"{base_url}/reset", json={}, headers=headers)
    assert (reset.status_code, reset.json()) == (401, REFUSED)
    if token:
        assert_token_path_refused(base_url, token)
    assert httpx.get(f"{base_url}/health").json() == {"status": "healthy"}


def test_another_projects_environment_is_not_there(base_url, served):
    headers = {"Authorization": f"Bearer {served['member']}"}
    theirs = json.loads(SAMPLES[2].read_text())["name"]
    response = httpx.post(f"{base_url}/reset", json={"environment": theirs}, headers=headers)
    assert (response.status_code, response.json()) == (
        404,
        {"detail": f"no environment named {theirs!r}", "code": "NOT_FOUND"},
    )


def test_openenv_client_oracle_and_do_nothing(base_url, served):
    oracle_and_do_nothing(f"{base_url}/t/{served['member']}", served["spec"])


def assert_token_path_refused(base_url: str, token: str) -> None:
    """The server at ``base_url`` refuses ``token`` in the URL path (``/t/<token>/…``), over
    HTTP and WebSocket alike: 401, ``REFUSED``."""
    prefixed = httpx.get(f"{base_url}/t/{token}/tasks")
    assert (prefixed.status_code, prefixed.json()) == (401, REFUSED)
    with pytest.raises(InvalidStatus) as refused:
        connect(base_url.replace("http://", "ws://") + f"/t/{token}/ws")
    denied = refused.value.response
    assert (denied.status_code, json.loads(denied.body)) == (401, REFUSED)


def play_oracle(client, spec, task_key: str, **reset) -> list[dict]:
    """The oracle plays ``task_key`` through OpenEnv's sync ``client`` (reset with ``reset``):
    every observation it saw, with its reward and done."""

    def as_obs(result):
        return {**result.observation, "reward": result.reward, "done": result.done}

    return play(
        spec,
        task_key,
        policy_by_name("oracle"),
        as_obs(client.reset(task_key=task_key, **reset)),
        lambda action: as_obs(client.step(action)),
    )


def oracle_and_do_nothing(url: str, spec) -> None:
    """OpenEnv's client at ``url``: the oracle gets the engine's score (1.0, strict) on
    every task of ``spec``, replying "Done." at once gets less than the pass threshold."""
    from openenv.core import GenericEnvClient

    for task in spec.tasks:
        expected = run_task(spec, task.key, policy_by_name("oracle"), seed=3)
        with GenericEnvClient(base_url=url).sync() as client:
            seen = play_oracle(client, spec, task.key, seed=3)
            state = client.state()
        assert seen[-1]["reward"] == expected.grading.score == 1.0
        assert seen[-1]["grading"]["strict"] is True
        assert seen[-1]["grading"] == public_grading(expected.grading)
        assert state["state_hash"] == expected.state_hash
        with GenericEnvClient(base_url=url).sync() as client:
            result = client.reset(task_key=task.key, seed=3)
            while not result.done:
                result = client.step({"reply": "Done."})
        threshold = result.observation["grading"]["config"]["pass_threshold"]
        assert result.reward < threshold
        assert result.observation["grading"]["passed"] is False


def test_command_refuses_unknown_project_and_empty_catalogue(transactional_db, other_project):
    with pytest.raises(CommandError, match="No project with the slug “nope”"):
        call_command("envserver", "--project", "nope")
    with pytest.raises(CommandError, match="has no valid or approved environment"):
        call_command("envserver", "--project", other_project.slug)
    with pytest.raises(CommandError, match="--max-sessions must be positive"):
        call_command("envserver", "--project", other_project.slug, "--max-sessions", "0")
    with pytest.raises(CommandError, match="--refresh must be 0"):
        call_command("envserver", "--project", other_project.slug, "--refresh", "-1")


def test_command_limits_default_to_the_settings_and_its_flags_override_them():
    from apps.environments.management.commands.envserver import server_options

    with override_settings(
        ENVSERVER_MAX_SESSIONS=7,
        ENVSERVER_IDLE_TIMEOUT_S=11.0,
        ENVSERVER_MAX_LIFETIME_S=13.0,
        ENVSERVER_REFRESH_S=0.0,
    ):
        unset = {"max_sessions": None, "idle_timeout": None, "max_lifetime": None, "refresh": None}
        assert server_options(unset) == {
            "max_sessions": 7,
            "max_sessions_per_token": 1,  # a quarter of 7, at least 1
            "idle_timeout": 11.0,
            "max_lifetime": 13.0,
            "refresh_interval": None,
        }
        given = {"max_sessions": 3, "idle_timeout": 1.5, "max_lifetime": 9.0, "refresh": 2.0}
        assert server_options(given) == {
            "max_sessions": 3,
            "max_sessions_per_token": 1,
            "idle_timeout": 1.5,
            "max_lifetime": 9.0,
            "refresh_interval": 2.0,
        }
        with pytest.raises(CommandError, match="--idle-timeout must be positive"):
            server_options({**unset, "idle_timeout": float("nan")})
        with pytest.raises(CommandError, match="--max-lifetime must be positive"):
            server_options({**unset, "max_lifetime": float("inf")})


def test_200_concurrent_sessions_on_the_app_server_stay_isolated(served, project):
    """200 WebSocket sessions, each opened with the member's token (checked against the
    database), play interleaved on one process and each sees exactly what an in-process
    session of its own task, seed and policy sees."""
    import asyncio
    import concurrent.futures

    from websockets.asyncio.client import connect as aconnect

    from coworkenv_engine.policies import ToolCall
    from coworkenv_engine.session import EpisodeSession

    spec = served["spec"]
    jobs = [
        (spec.tasks[i % len(spec.tasks)].key, ["oracle", "null"][i % 2], i % 4) for i in range(200)
    ]
    scripts = {}
    for key, policy, seed in set(jobs):
        session = EpisodeSession(spec, key, seed, evidence=False)  # as the server shows it
        actions: list[dict] = []

        def step(action, session=session, actions=actions):
            actions.append(action)
            calls = [ToolCall(c["name"], c["arguments"]) for c in action["tool_calls"]]
            return session.act(action["reply"], calls)

        seen = play(spec, key, policy_by_name(policy), session.start(), step)
        scripts[key, policy, seed] = (actions, seen)

    def decoded(text):
        try:
            return json.loads(text)
        except (TypeError, ValueError):
            return text

    def normal(obs: dict) -> dict:
        """Tool results compared as JSON values: PostgreSQL's jsonb keeps no key order, so
        records read from the database list their fields in another order."""
        return {
            **obs,
            "messages": [{**m, "content": decoded(m["content"])} for m in obs["messages"]],
            "tool_results": [{**r, "content": decoded(r["content"])} for r in obs["tool_results"]],
        }

    def unwire(payload: dict) -> dict:
        obs = dict(payload["observation"])
        obs.pop("episode_id", None)
        return normal({**obs, "reward": payload["reward"], "done": payload["done"]})

    app = project_envserver_app(project=project, max_sessions=250, refresh_interval=None)
    with running(app) as url:
        ws_url = url.replace("http://", "ws://") + f"/t/{served['member']}/ws"

        async def one(key, policy, seed):
            actions, expected = scripts[key, policy, seed]
            # 200 handshakes at once on a busy machine: past websockets' 10 s default, no pings.
            async with aconnect(ws_url, open_timeout=60, ping_interval=None) as ws:
                await ws.send(
                    json.dumps({"type": "reset", "data": {"task_key": key, "seed": seed}})
                )
                got = [unwire(json.loads(await ws.recv())["data"])]
                for action in actions:
                    await ws.send(json.dumps({"type": "step", "data": action}))
                    got.append(unwire(json.loads(await ws.recv())["data"]))
                    await asyncio.sleep(0)
                return got == [normal(o) for o in expected]

        async def all_of_them():
            return await asyncio.gather(*(one(*job) for job in jobs))

        with concurrent.futures.ThreadPoolExecutor(1) as pool:  # see the engine's test
            outcomes = pool.submit(asyncio.run, all_of_them()).result()
    assert outcomes == [True] * 200
