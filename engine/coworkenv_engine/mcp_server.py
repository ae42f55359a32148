"""The environment server's MCP face: each MCP session (the official ``mcp`` SDK's
streamable HTTP transport, stateful) is one episode, so that an agent harness that speaks
the Model Context Protocol runs a CoworkEnv task with nothing but the server's URL.

``POST/GET/DELETE /mcp`` (and ``/t/<token>/mcp``), behind the same token check as the
OpenEnv routes. The URL's query may carry reset arguments (``?task_key=…&seed=3``, also
``environment``, ``split``, ``capability``, ``faults``); the session's episode starts with
them at its first ``tools/list`` or tool call. Its tools:

- the task's tools, as ``spec.openai_tools()`` declares them: a call runs as one assistant
  message with that one tool call; the tool's content comes back (images as MCP image
  content), ``isError`` when the call failed as a service would fail it;
- ``reset`` (OpenEnv's name for the control that starts an episode; OpenEnv reserves it, so
  no environment tool can take it): restart the episode, the URL's arguments overridden by
  the call's; returns the system prompt and the user's first message;
- ``grade``: the agent's reply to the user, which ends its turn: returns the user's next
  message, or after the last turn the episode's score (``passed`` at 0.75).

Every result's ``structuredContent`` is the OpenEnv wire step (``observation``, ``reward``,
``done``), as ``POST /step`` would answer it; the final one carries the grading (its
verdicts without evidence). A tool the episode does not have, bad reset arguments or a call
after the end are MCP errors. The session takes one of the server's session slots (the same
limits as the other routes) and is bound to the token that opened it; it ends with the
client's DELETE or after the server's idle timeout.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import mcp_types as types
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.lowlevel import Server
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from starlette.requests import Request
from starlette.responses import JSONResponse

from .protocol import REFUSED, VERSION, ProtocolError, SessionStore, Slot, Unavailable
from .session import SessionError

RESERVED = ("reset", "grade")
RESET_TOOL = types.Tool(
    name="reset",
    description=(
        "Start the episode again (a new task or seed). Returns the system prompt and the "
        "user's first message."
    ),
    input_schema={
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "environment": {"type": "string"},
            "task_key": {"type": "string"},
            "seed": {"type": "integer", "minimum": 0},
            "split": {"type": "string"},
            "capability": {"type": "string"},
            "faults": {"type": "boolean"},
        },
    },
)
GRADE_TOOL = types.Tool(
    name="grade",
    description=(
        "Send your reply to the user, which ends your turn. Returns the user's next message, "
        "or after the last turn the episode's score."
    ),
    input_schema={
        "type": "object",
        "additionalProperties": False,
        "properties": {"reply": {"type": "string", "description": "your message to the user"}},
        "required": ["reply"],
    },
)
QUERY_STRINGS = ("environment", "task_key", "split", "capability")

Start = Callable[[Slot, dict[str, Any]], dict[str, Any]]
Step = Callable[[Slot, Any], Awaitable[dict[str, Any]]]


def query_reset(query: Mapping[str, str]) -> dict[str, Any]:
    """The reset arguments of an MCP URL's query string, typed as ``Catalog.resolve`` takes
    them (anything else there is left to the client: harnesses add their own)."""
    kwargs: dict[str, Any] = {k: query[k] for k in QUERY_STRINGS if k in query}
    if "seed" in query:
        if not query["seed"].isdigit():
            raise MCPError(types.INVALID_PARAMS, "seed must be an integer >= 0")
        kwargs["seed"] = int(query["seed"])
    if "faults" in query:
        if query["faults"] not in ("true", "false"):
            raise MCPError(types.INVALID_PARAMS, "faults must be true or false")
        kwargs["faults"] = query["faults"] == "true"
    return kwargs


def mcp_content(content: Any) -> list[types.TextContent | types.ImageContent]:
    """A tool message's content (text, or OpenAI content parts) as MCP content."""
    if not isinstance(content, list):
        return [
            types.TextContent(text=content if isinstance(content, str) else json.dumps(content))
        ]
    shown: list[types.TextContent | types.ImageContent] = []
    for part in content:
        url = (
            (part.get("image_url") or {}).get("url", "") if part.get("type") == "image_url" else ""
        )
        head, _, data = url.partition(";base64,")
        if head.startswith("data:") and data:
            shown.append(types.ImageContent(data=data, mime_type=head[len("data:") :]))
        else:
            shown.append(types.TextContent(text=part.get("text") or url))
    return shown


def _text(*texts: str) -> list[types.TextContent]:
    return [types.TextContent(text=t) for t in texts if t]


class McpFace:
    """The MCP endpoint of one environment server (``server.create_app`` builds it over its
    session store and its own reset and step): an ASGI app for the ``/mcp`` route, whose
    ``manager.run()`` the server's lifespan holds open."""

    def __init__(
        self,
        *,
        store: SessionStore,
        start: Start,
        step: Step,
        authorised: Callable[[Request], Awaitable[bool]],
        idle_timeout: float,
    ):
        self.store = store
        self.authorised = authorised
        self.start = start
        self.step = step
        self.episodes: dict[str, Slot] = {}  # MCP session id -> its episode's slot
        self.server = Server(
            "coworkenv",
            version=VERSION,
            instructions=(
                "A CoworkEnv task: call `reset` to read the task, use the tools, and send "
                "your reply to the user with `grade`."
            ),
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
        )
        self.server.middleware = []  # no tracing spans per message
        self.manager = StreamableHTTPSessionManager(self.server, session_idle_timeout=idle_timeout)

    async def __call__(self, scope, receive, send) -> None:
        """The token check of the server's other routes (``authorised``: 401, or 503 when
        it cannot decide), then the SDK's transport, which binds a session to its opener."""
        request = Request(scope, receive)
        try:
            refused = None if await self.authorised(request) else JSONResponse(REFUSED, 401)
        except Unavailable as exc:
            refused = JSONResponse({"detail": str(exc), "code": "UNAVAILABLE"}, 503)
        if refused is not None:
            await refused(scope, receive, send)
            return
        if request.state.owner is not None:
            token = AccessToken(token="", client_id=request.state.owner, scopes=[])
            scope["user"] = AuthenticatedUser(token)
        if request.method == "DELETE":  # the client ends the session: free its slot first
            slot = self.episodes.get(request.headers.get(MCP_SESSION_ID_HEADER, ""))
            if slot is not None and slot.owner == request.state.owner:
                self.forget(request.headers[MCP_SESSION_ID_HEADER])
        await self.manager.handle_request(scope, receive, send)

    async def running(self) -> asyncio.Task:
        """The session manager, run in a task of its own until the task is cancelled: its
        task group must be left by the task that entered it, and a server mounted in the app
        enters its lifespan in one request's task and leaves it at shutdown in another."""
        started = asyncio.Event()

        async def hold() -> None:
            async with self.manager.run():
                started.set()
                await asyncio.Event().wait()

        task = asyncio.create_task(hold())
        await started.wait()
        return task

    def prune(self) -> None:
        """Forget the sessions whose episodes the store dropped (expired: the SDK ends such
        a session after the same idle time)."""
        live = self.store.slots
        self.episodes = {k: s for k, s in self.episodes.items() if live.get(s.id) is s}

    def forget(self, session_id: str) -> None:
        slot = self.episodes.pop(session_id, None)
        if slot is not None:
            self.store.drop(slot.id)

    # ------------------------------------------------------------------ handlers

    async def list_tools(self, ctx, params) -> types.ListToolsResult:
        slot = self.episode(ctx)
        return types.ListToolsResult(tools=[*self.task_tools(slot), RESET_TOOL, GRADE_TOOL])

    async def call_tool(self, ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = dict(params.arguments or {})
        try:
            if params.name == "reset":
                return await self.reset(ctx, arguments)
            slot = self.episode(ctx)
            if params.name == "grade":
                return await self.grade(slot, arguments)
            if params.name not in {tool.name for tool in self.task_tools(slot)}:
                raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
            wire = await self.step(
                slot, {"tool_calls": [{"name": params.name, "arguments": arguments}]}
            )
        except (ProtocolError, SessionError) as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc)) from exc
        result = wire["observation"]["tool_results"][0]
        return types.CallToolResult(
            content=mcp_content(result["content"]),
            structured_content=wire,
            is_error=not result["ok"],
        )

    async def reset(self, ctx, arguments: dict[str, Any]) -> types.CallToolResult:
        sid = self.session_id(ctx)
        slot = self.episodes.get(sid)
        before = slot.session.spec.name if slot is not None and slot.session else None
        wire = self.begin(ctx, {**query_reset(ctx.request.query_params), **arguments})
        if before is not None and wire["observation"]["episode"]["environment"] != before:
            await ctx.session.send_tool_list_changed()
        obs = wire["observation"]
        return types.CallToolResult(
            content=_text(obs["system_prompt"], obs["user_message"]), structured_content=wire
        )

    async def grade(self, slot: Slot, arguments: dict[str, Any]) -> types.CallToolResult:
        reply = arguments.get("reply")
        if not isinstance(reply, str) or set(arguments) - {"reply"}:
            raise MCPError(types.INVALID_PARAMS, "grade takes one argument, reply (a string)")
        wire = await self.step(slot, {"reply": reply, "tool_calls": []})
        obs = wire["observation"]
        if wire["done"]:
            grading = obs["grading"]
            summary = {k: grading.get(k) for k in ("score", "passed", "strict")}
            return types.CallToolResult(content=_text(json.dumps(summary)), structured_content=wire)
        return types.CallToolResult(content=_text(obs["user_message"]), structured_content=wire)

    # ------------------------------------------------------------------ episodes

    @staticmethod
    def session_id(ctx) -> str:
        return ctx.request.headers.get(MCP_SESSION_ID_HEADER, "")

    def episode(self, ctx) -> Slot:
        """The session's episode, started with the URL's reset arguments if it has none."""
        slot = self.episodes.get(self.session_id(ctx))
        if slot is None:
            self.begin(ctx, query_reset(ctx.request.query_params))
            return self.episodes[self.session_id(ctx)]
        if self.store.slots.get(slot.id) is not slot or self.store.expired(slot):
            self.forget(self.session_id(ctx))
            raise MCPError(types.INVALID_REQUEST, "the episode expired; open a new MCP session")
        return slot

    def begin(self, ctx, kwargs: dict[str, Any]) -> dict[str, Any]:
        """(Re)start the session's episode; a new one takes a slot of the store."""
        sid = self.session_id(ctx)
        slot = self.episodes.get(sid)
        try:
            if slot is None or self.store.slots.get(slot.id) is not slot:
                state = ctx.request.state
                slot = self.store.open(state.owner, state.group)
                self.prune()
            wire = self.start(slot, kwargs)
        except ProtocolError as exc:
            if self.episodes.get(sid) is not slot and slot is not None:
                self.store.drop(slot.id)  # a new slot its reset could not start
            raise MCPError(types.INVALID_PARAMS, str(exc)) from exc
        clash = sorted({t["function"]["name"] for t in slot.session.tools} & set(RESERVED))
        if clash:
            self.store.drop(slot.id)
            self.episodes.pop(sid, None)
            raise MCPError(
                types.INVALID_PARAMS,
                f"the environment has a tool named {clash[0]!r}, which the MCP face reserves",
            )
        self.episodes[sid] = slot
        return wire

    @staticmethod
    def task_tools(slot: Slot) -> list[types.Tool]:
        assert slot.session is not None
        return [
            types.Tool(
                name=t["function"]["name"],
                description=t["function"].get("description") or "",
                input_schema=t["function"].get("parameters") or {"type": "object"},
            )
            for t in slot.session.tools
        ]
