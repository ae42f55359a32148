"""The environment server's MCP face, driven by the official ``mcp`` SDK's own client
(``streamable_http_client`` + ``ClientSession``) against a real uvicorn server on loopback:
the reference solution reaches 1.0, doing nothing stays below the threshold, a bad token is
refused, an unknown tool is an MCP error and the session goes on."""

from __future__ import annotations

import functools
import json

import httpx2
import pytest
from mcp.shared.exceptions import MCPError

from coworkenv_engine.mcp_server import mcp_content
from coworkenv_engine.server import create_app
from coworkenv_engine.spec import load_spec
from tests.asyncio_thread import run_coroutine

from . import mcp_drive
from .helpers import SAMPLES, load_json, mini_doc
from .serving import running

TOKEN = "s3cret-token"
SPECS = [load_spec(load_json(p)) for p in SAMPLES]
SPEC = SPECS[0]
TASK = SPEC.tasks[0]


APP = create_app(SPECS, token=TOKEN, max_sessions=4)


@pytest.fixture(scope="module")
def base_url():
    with running(APP) as url:
        yield url


@pytest.fixture
def app_store():
    return APP.state.store


mcp_session = functools.partial(mcp_drive.mcp_session, token=TOKEN)


def task_url(base_url: str, **query) -> str:
    query = {"environment": SPEC.name, "task_key": TASK.key, "faults": "false", **query}
    return f"{base_url}/mcp?" + "&".join(f"{k}={v}" for k, v in query.items())


def run(coro):
    return run_coroutine(coro)


def test_the_reference_solution_scores_one(base_url):
    async def oracle():
        async with mcp_session(task_url(base_url)) as session:
            listed = {tool.name for tool in (await session.list_tools()).tools}
            assert listed == {t.name for t in SPEC.tools} | {"reset", "grade"}
            last = await mcp_drive.play_reference(session, TASK)
            return last

    last = run(oracle())
    assert last.structured_content["done"] is True
    assert last.structured_content["reward"] == 1.0
    grading = last.structured_content["observation"]["grading"]
    assert grading["strict"] is True
    assert all("evidence" not in verdict for verdict in grading["verdicts"])


def test_doing_nothing_stays_below_the_threshold(base_url):
    async def idle():
        async with mcp_session(task_url(base_url)) as session:
            reset = await session.call_tool("reset", {})
            assert [c.text for c in reset.content][-1] == TASK.turns[0].message
            for _ in TASK.turns:
                last = await session.call_tool("grade", {"reply": "OK."})
            with pytest.raises(MCPError, match="the episode is over"):
                await session.call_tool("grade", {"reply": "again"})
            return last

    last = run(idle())
    assert last.structured_content["done"] is True
    assert last.structured_content["reward"] < 0.75
    assert last.structured_content["observation"]["grading"]["passed"] is False


def test_reset_picks_another_task_and_seed(base_url):
    other = SPECS[1]

    async def reset():
        async with mcp_session(f"{base_url}/mcp") as session:
            result = await session.call_tool(
                "reset", {"environment": other.name, "task_key": other.tasks[0].key, "seed": 3}
            )
            tools = {tool.name for tool in (await session.list_tools()).tools}
            return result, tools

    result, tools = run(reset())
    episode = result.structured_content["observation"]["episode"]
    assert episode == {
        "environment": other.name,
        "task_key": other.tasks[0].key,
        "seed": 3,
        "faults": True,
    }
    assert tools == {t.name for t in other.tools} | {"reset", "grade"}


def test_an_unknown_tool_is_an_mcp_error_and_the_session_goes_on(base_url):
    async def unknown():
        async with mcp_session(task_url(base_url)) as session:
            with pytest.raises(MCPError, match="Unknown tool: no_such_tool") as caught:
                await session.call_tool("no_such_tool", {})
            listed = await session.list_tools()
            return caught.value, listed

    error, listed = run(unknown())
    assert error.code == -32602
    assert "grade" in {tool.name for tool in listed.tools}


def test_bad_reset_arguments_are_an_mcp_error_and_take_no_slot(base_url, app_store):
    async def bad():
        async with mcp_session(f"{base_url}/mcp") as session:
            with pytest.raises(MCPError, match="no environment named 'nope'"):
                await session.call_tool("reset", {"environment": "nope"})
            with pytest.raises(MCPError, match="seed must be an integer"):
                await session.call_tool("reset", {"seed": -1})
            return len(app_store.slots)

    assert run(bad()) == 0


def test_a_wrong_token_is_refused(base_url, app_store):
    statuses = []

    async def seen(response):
        statuses.append(response.status_code)

    async def refused():
        async with mcp_drive.mcp_session(
            task_url(base_url), "wrong", event_hooks={"response": [seen]}
        ):
            pass

    with pytest.raises(ExceptionGroup) as caught:
        run(refused())
    assert caught.group_contains(MCPError, match="Server returned an error response", depth=2)
    assert statuses == [401]
    response = httpx2.post(f"{base_url}/t/wrong/mcp", json={})
    assert (response.status_code, response.json()) == (401, {"detail": "missing or wrong token"})
    assert len(app_store.slots) == 0


def test_a_session_is_one_slot_freed_when_the_client_ends_it(base_url, app_store):
    async def one():
        async with mcp_session(task_url(base_url)) as session:
            await session.list_tools()
            during = len(app_store.slots)
        return during

    assert run(one()) == 1
    assert len(app_store.slots) == 0


def test_a_session_answers_only_the_token_that_opened_it():
    async def two_tokens(raw: str, client: str) -> bool:
        return raw in ("token-a", "token-b")

    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    accept = {"Accept": "application/json, text/event-stream"}
    with running(create_app(SPECS, authorise=two_tokens)) as url:
        opened = httpx2.post(f"{url}/t/token-a/mcp", json=initialize, headers=accept, timeout=30)
        session = {**accept, "mcp-session-id": opened.headers["mcp-session-id"]}
        other = httpx2.post(f"{url}/t/token-b/mcp", json=listing, headers=session, timeout=30)
        own = httpx2.post(f"{url}/t/token-a/mcp", json=listing, headers=session, timeout=30)
    assert opened.status_code == 200
    assert other.status_code == 404
    assert own.status_code == 200
    assert '"name":"grade"' in own.text


def test_an_expired_episode_is_an_mcp_error_and_its_slot_is_gone():
    now = [0.0]
    app = create_app(SPECS, token=TOKEN, idle_timeout=600, clock=lambda: now[0])

    async def expire(url):
        async with mcp_session(task_url(url)) as session:
            await session.list_tools()
            now[0] += 601
            with pytest.raises(MCPError, match="the episode expired") as caught:
                await session.call_tool("list_events", {})
            return caught.value.code

    with running(app) as url:
        assert run(expire(url)) == -32600
    assert app.state.store.slots == {}


def test_bad_reset_arguments_in_the_url_are_an_mcp_error(base_url, app_store):
    async def bad(query):
        async with mcp_session(f"{base_url}/mcp?{query}") as session:
            with pytest.raises(MCPError) as caught:
                await session.list_tools()
            return caught.value.message

    assert run(bad("seed=abc")) == "seed must be an integer >= 0"
    assert run(bad("faults=yes")) == "faults must be true or false"
    assert run(bad("task_key=nope")) == "no task 'nope'"
    assert app_store.slots == {}


def test_mcp_content_turns_image_parts_into_image_content():
    parts = [
        {"type": "text", "text": '{"id": "r1"}'},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        {"type": "image_url", "image_url": {"url": "attachment:sha256:ab12"}},
    ]
    shown = mcp_content(parts)
    assert [c.type for c in shown] == ["text", "image", "text"]
    assert (shown[1].mime_type, shown[1].data) == ("image/png", "iVBORw0KGgo=")
    assert shown[2].text == "attachment:sha256:ab12"
    assert [c.text for c in mcp_content("plain")] == ["plain"]


def test_an_environment_with_a_tool_named_grade_is_refused_clearly():
    doc = json.loads(json.dumps(mini_doc()).replace('"search_people"', '"grade"'))
    app = create_app([load_spec(doc)], token=TOKEN)

    async def clash(url):
        async with mcp_session(f"{url}/mcp") as session:
            with pytest.raises(MCPError, match="a tool named 'grade', which the MCP face"):
                await session.list_tools()

    with running(app) as url:
        run(clash(url))
    assert app.state.store.slots == {}
