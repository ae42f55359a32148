"""The agent side of the MCP face, with the official ``mcp`` SDK's own client: a session
opened with a bearer token, and the reference solution played through it."""

from __future__ import annotations

import contextlib

import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from coworkenv_engine.spec_model import TaskSpec


@contextlib.asynccontextmanager
async def mcp_session(url: str, token: str, **client_options):
    """An initialized ``ClientSession`` on ``url``; ``client_options`` go to httpx2's client."""
    client = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=30, **client_options
    )
    async with (
        client,
        streamable_http_client(url, http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def play_reference(session: ClientSession, task: TaskSpec):
    """Every reference call of every turn as a tool call, then the turn's reply by ``grade``;
    returns the last result (the episode's grading)."""
    for turn in range(len(task.turns)):
        step = task.step_for_turn(turn)
        for call in step.calls if step else ():
            result = await session.call_tool(call.tool, call.arguments)
            assert not result.is_error, result.content
        last = await session.call_tool(
            "grade", {"reply": step.reply if step and step.reply else "Done."}
        )
    return last
