"""An environment server speaking OpenEnv's protocol (openenv-core 0.3.0 wire format).

Optional extra ``envserver`` (starlette + uvicorn); the rest of the engine does not import
this module. ``python -m coworkenv_engine serve samples/*.json --port 8000``.

Routes (each also under ``/t/<token>/…`` for clients that cannot send headers, such as
OpenEnv's ``EnvClient``, whose base URL may then be ``http://host:port/t/<token>``):

    GET  /health          {"status": "healthy"}   (never needs the token)
    GET  /metadata        EnvironmentMetadata (name, description, readme_content, version, …)
    GET  /schema          {"action", "observation", "state"} JSON Schemas
    GET  /tasks           environments with their tasks, splits and capabilities
    POST /reset           {seed?, episode_id?, environment?, task_key?, split?, capability?,
                           faults?, evidence?} -> {"observation", "reward", "done"}
                           (``evidence``: the final grading's verdicts with their
                           evidence, for a trainer that credits calls); starts the HTTP
                           session ``observation.episode_id`` (an id chosen here), or
                           restarts the caller's own one named by ``episode_id``
    POST /step            {"action": {...}, "episode_id": "..."} -> {"observation", "reward",
                           "done"}
    GET  /state           ?episode_id=... -> State (episode_id, step_count, extra fields)
    POST /close           {"episode_id": "..."} -> {"episode_id", "closed": true}
    WS   /ws              OpenEnv's session protocol: reset / step / state / close messages
    *    /mcp             the MCP face (streamable HTTP): one MCP session = one episode
                          (``mcp_server.py``)

OpenEnv 0.3.0's HTTP routes are stateless; here an HTTP episode is kept under its
``episode_id`` (our extension) so that plain HTTP clients can run whole episodes, while the
WebSocket session (one connection = one session) is what OpenEnv clients and TRL use.

Action: ``{"tool_calls": [{"id"?, "name", "arguments"}], "reply": str | null, "metadata"?}``
(an entry may also be OpenAI-shaped: ``{"id", "type": "function", "function": {"name",
"arguments"}}``). Tool calls are run in order; an action without tool calls is the assistant's
reply and ends the turn. Observation fields: see ``session.py``.

Sessions: at most ``max_sessions`` at once (HTTP and WebSocket together; a WebSocket over the
limit gets ``CAPACITY_REACHED`` and is closed, an HTTP reset gets 503), at most
``max_sessions_per_token`` of them opened by one token; an HTTP session belongs to the token
that opened it (another token's ``episode_id`` is not found, like a closed one); each dropped after
``idle_timeout`` seconds without a reset/step or ``max_lifetime`` seconds after it began.
Bearer-token auth when a token is set (``Authorization: Bearer <token>`` or the ``/t/<token>``
prefix; a refusal is 401 ``{"detail": "missing or wrong token"}`` on every route, the
``/ws`` handshake included where the ASGI server supports denial responses, as uvicorn
does), or through ``authorise`` (an async callable given the presented token, empty when
none, and the client's address, returning whether it may use the server: how the app checks
its project API tokens; raising ``Unavailable`` gets 503).
Engine steps run on the event loop (a step is well under a millisecond); images a view
tool shows are read in a worker thread (``ImageURLs.show``: a slow storage stalls only the
session viewing), the last 32 kept. JSON is read and
written with ``orjson`` when it is installed (the ``server`` extra has it), else the standard
library; ``serve`` turns WebSocket compression (permessage-deflate) off: on loopback or a
cluster network it costs more CPU per step than the bytes it saves.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from .attachments import Resolver
from .body_limit import BodyLimit
from .mcp_server import McpFace
from .protocol import (
    ACTION_SCHEMA,
    OBSERVATION_SCHEMA,
    REFUSED,
    STATE_SCHEMA,
    VERSION,
    Catalog,
    ImageURLs,
    ProtocolError,
    SessionStore,
    Slot,
    Unavailable,
    invalid,
    parse_action,
    state_of,
    wire,
)
from .session import EpisodeSession, SessionError
from .spec import EnvironmentSpec

logger = logging.getLogger(__name__)

try:  # the per-step path: decode the action, encode the observation
    import orjson

    def _dumps(value: Any) -> bytes:
        return orjson.dumps(value)

    _loads = orjson.loads
except ImportError:  # pragma: no cover - the server extra installs orjson

    def _dumps(value: Any) -> bytes:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()

    _loads = json.loads


class _JSON(JSONResponse):
    def render(self, content: Any) -> bytes:
        return _dumps(content)


# --------------------------------------------------------------------------- app

HTTP_STATUS = {"VALIDATION_ERROR": 422, "NOT_FOUND": 404, "CAPACITY_REACHED": 503}


def create_app(
    specs: Sequence[EnvironmentSpec | dict[str, Any]],
    *,
    token: str | None = None,
    authorise: Callable[[str, str], Awaitable[bool]] | None = None,
    listing_extra: Mapping[str, Mapping[str, Any]] | None = None,
    refresh: Callable[[], Awaitable[tuple[Sequence[Any], Mapping[str, Any]]]] | None = None,
    refresh_interval: float = 60.0,
    allow_empty: bool = False,
    attachments: Resolver | None = None,
    max_sessions: int = 256,
    max_sessions_per_token: int | None = None,
    idle_timeout: float = 600.0,
    max_lifetime: float = 3600.0,
    reap_interval: float = 5.0,
    clock: Callable[[], float] = time.monotonic,
) -> Starlette:
    """``listing_extra``: fields added to an environment's entry in ``GET /tasks``, by
    environment name (the app adds its database id, revision and spec hash).
    ``refresh``: an async callable returning ``(specs, listing_extra)``, awaited every
    ``refresh_interval`` seconds to replace the catalogue (new resets see it; running
    sessions keep the spec they started with; a refresh that fails keeps the old one).
    ``allow_empty``: start with no environment (a catalogue a refresh fills later).
    ``attachments``: where image bytes come from (sha256 -> bytes); view tools' images are
    then sent as ``image_url`` parts with ``data:`` URLs (without it, as the transcript's
    ``attachment:sha256:<hex>`` URLs)."""
    if token and authorise is not None:
        raise ValueError("give a token or an authorise callable, not both")
    current = _Current(Catalog(specs, listing_extra=listing_extra, allow_empty=allow_empty))
    store = SessionStore(max_sessions, idle_timeout, max_lifetime, clock, max_sessions_per_token)
    images = ImageURLs(attachments) if attachments is not None else None

    async def authorised(request_or_ws: Request | WebSocket) -> bool:
        """Whether the presented token opens the server. Its owner digest (whose sessions it
        may use) goes to ``state.owner`` and the holder it counts against for the session
        share to ``state.group``: the name ``authorise`` answered with (the app: the token's
        user), else the owner itself. Both None on an open server."""
        request_or_ws.state.owner = request_or_ws.state.group = None
        if not token and authorise is None:
            return True
        given = request_or_ws.path_params.get("token")
        if given is None:
            header = request_or_ws.headers.get("authorization", "")
            scheme, _, value = header.partition(" ")
            given = value.strip() if scheme.lower() == "bearer" else ""
        if authorise is not None:
            client = request_or_ws.client
            verdict = await authorise(given, client.host if client else "")
        else:
            verdict = hmac.compare_digest(given.encode(), token.encode())
        if verdict:
            owner = hashlib.sha256(given.encode()).hexdigest()
            request_or_ws.state.owner = owner
            request_or_ws.state.group = verdict if isinstance(verdict, str) else owner
        return bool(verdict)

    def error(exc: ProtocolError | SessionError) -> _JSON:
        if isinstance(exc, SessionError):
            return _JSON({"detail": str(exc), "code": "EXECUTION_ERROR"}, 409)
        status = HTTP_STATUS.get(exc.code, 400)
        detail: Any = exc.errors if exc.code == "VALIDATION_ERROR" else str(exc)
        return _JSON({"detail": detail, "code": exc.code}, status)

    async def body(request: Request) -> dict[str, Any]:
        raw = await request.body()
        if not raw:
            return {}
        try:
            data = _loads(raw)
        except ValueError as exc:
            raise ProtocolError("INVALID_JSON", "the body is not JSON") from exc
        if not isinstance(data, dict):
            raise invalid("body", "the body must be an object")
        return data

    def guarded(handler):
        async def endpoint(request: Request) -> _JSON:
            try:
                if not await authorised(request):
                    return _JSON(REFUSED, 401)
            except Unavailable as exc:
                return _JSON({"detail": str(exc), "code": "UNAVAILABLE"}, 503)
            try:
                return await handler(request)
            except (ProtocolError, SessionError) as exc:
                return error(exc)

        return endpoint

    def start(slot: Slot, kwargs: dict[str, Any]) -> dict[str, Any]:
        catalog = current.catalog
        spec, task_key, seed, faults = catalog.resolve(kwargs)
        slot.session = EpisodeSession(
            spec,
            task_key,
            seed,
            faults=faults,
            tools=catalog.tools[spec.name],
            evidence=kwargs.get("evidence", False),
        )  # image parts keep their attachment: URLs; ``shown`` gives them data: URLs
        slot.episode_id = slot.id  # server-chosen, whatever the client asked
        store.touch(slot)
        obs = slot.session.start()
        obs["episode_id"] = slot.episode_id
        return wire(obs)

    async def step(slot: Slot, data: Any) -> dict[str, Any]:
        reply, calls = parse_action(data)
        if slot.session is None:
            raise SessionError("call reset first")
        store.touch(slot)
        session = slot.session
        obs = session.act(reply, calls)
        obs["episode_id"] = slot.episode_id
        if images is not None:  # images read off the event loop (a slow storage)
            obs = await images.show(obs, session.spec)
        return wire(obs)

    async def health(request: Request) -> _JSON:
        return _JSON({"status": "healthy"})

    async def metadata(request: Request) -> _JSON:
        names = ", ".join(current.catalog.specs)
        return _JSON(
            {
                "name": "coworkenv",
                "description": f"CoworkEnv environments: {names}",
                "readme_content": None,
                "version": VERSION,
                "author": "CoworkEnv",
                "documentation_url": None,
            }
        )

    async def schema(request: Request) -> _JSON:
        return _JSON(
            {"action": ACTION_SCHEMA, "observation": OBSERVATION_SCHEMA, "state": STATE_SCHEMA}
        )

    async def tasks(request: Request) -> _JSON:
        return _JSON(current.catalog.listing())

    async def reset(request: Request) -> _JSON:
        """A new HTTP session (its id chosen here), or a restart of the caller's own one
        named by ``episode_id`` (anyone else's, or none, is not found)."""
        kwargs = await body(request)
        current.catalog.resolve(kwargs)  # refuse bad input before taking a slot
        episode_id = kwargs.get("episode_id")
        owner = request.state.owner
        if episode_id is not None:
            slot = http_slot(episode_id, owner)
        else:
            slot = store.open(owner, request.state.group)
        return _JSON(start(slot, kwargs))

    def http_slot(episode_id: Any, owner: str | None) -> Slot:
        if not isinstance(episode_id, str):
            raise invalid("episode_id", "episode_id (from the reset observation) must be a string")
        slot = store.get(episode_id, owner)
        if slot.websocket is not None:
            raise ProtocolError("NOT_FOUND", f"no HTTP session {episode_id!r}")
        return slot

    async def http_step(request: Request) -> _JSON:
        data = await body(request)
        extra = sorted(set(data) - {"action", "episode_id", "timeout_s", "request_id"})
        if extra:
            raise invalid(extra[0], f"unknown field {extra[0]!r}")
        if "action" not in data:
            raise invalid("action", "field required")
        if "episode_id" not in data:
            raise invalid("episode_id", "episode_id (from the reset observation) is required")
        slot = http_slot(data["episode_id"], request.state.owner)
        return _JSON(await step(slot, data["action"]))

    async def http_state(request: Request) -> _JSON:
        episode_id = request.query_params.get("episode_id")
        if not episode_id:
            raise invalid("episode_id", "episode_id is required")
        return _JSON(state_of(store.get(episode_id, request.state.owner)))

    async def close(request: Request) -> _JSON:
        data = await body(request)
        episode_id = data.get("episode_id")
        if not isinstance(episode_id, str):
            raise invalid("episode_id", "episode_id is required")
        slot = store.get(episode_id, request.state.owner)
        store.drop(slot.id)
        return _JSON({"episode_id": episode_id, "closed": True})

    async def ws_send_error(ws: WebSocket, code: str, message: str, **extra: Any) -> None:
        reply = {"type": "error", "data": {"message": message, "code": code, **extra}}
        await ws.send_text(_dumps(reply).decode())

    async def ws_endpoint(ws: WebSocket) -> None:
        try:
            denial = None if await authorised(ws) else _JSON(REFUSED, 401)
        except Unavailable as exc:
            denial = _JSON({"detail": str(exc), "code": "UNAVAILABLE"}, 503)
        if denial is not None:
            # the same answer as the HTTP routes where the ASGI server can send it
            if "websocket.http.response" in ws.scope.get("extensions", {}):
                await ws.send_denial_response(denial)
            else:  # a bare refusal of the handshake (the client sees 403)
                await ws.close(code=1008)
            return
        await ws.accept()
        try:
            slot = store.open(ws.state.owner, ws.state.group)
        except ProtocolError as exc:
            await ws_send_error(ws, exc.code, str(exc), **store.status())
            await ws.close()
            return
        slot.websocket = ws
        try:
            while True:
                try:
                    raw = await ws.receive_text()
                except WebSocketDisconnect:
                    return
                if store.slots.get(slot.id) is not slot or store.expired(slot):
                    await ws_send_error(ws, "SESSION_ERROR", "the session expired")
                    await ws.close()
                    return
                reply = await ws_message(slot, raw)
                if reply is None:  # close
                    await ws.close()
                    return
                await ws.send_text(_dumps(reply).decode())
        finally:
            store.drop(slot.id)

    async def ws_message(slot: Slot, raw: str) -> dict[str, Any] | None:
        try:
            msg = _loads(raw)
        except ValueError:
            return _ws_error("INVALID_JSON", "the message is not JSON")
        if not isinstance(msg, dict):
            return _ws_error("VALIDATION_ERROR", "a message must be an object")
        kind = msg.get("type")
        if kind not in ("reset", "step", "state", "close"):
            return _ws_error("UNKNOWN_TYPE", f"unknown message type {kind!r}")
        allowed = {"type", "data"} if kind in ("reset", "step") else {"type"}
        extra = sorted(set(msg) - allowed)
        if extra:
            return _ws_error("VALIDATION_ERROR", f"unknown key {extra[0]!r}")
        if kind == "close":
            return None
        if kind == "state":
            return {"type": "state", "data": state_of(slot)}
        try:
            if kind == "reset":
                data = msg.get("data") or {}
                if not isinstance(data, dict):
                    raise invalid("data", "reset data must be an object")
                return {"type": "observation", "data": start(slot, data)}
            if "data" not in msg:
                raise invalid("data", "field required")
            return {"type": "observation", "data": await step(slot, msg["data"])}
        except ProtocolError as exc:
            code = (
                exc.code if exc.code in ("VALIDATION_ERROR", "INVALID_JSON") else "EXECUTION_ERROR"
            )
            return _ws_error(code, str(exc), errors=exc.errors)
        except SessionError as exc:
            return _ws_error("EXECUTION_ERROR", str(exc))

    face = McpFace(
        store=store, start=start, step=step, authorised=authorised, idle_timeout=idle_timeout
    )

    async def reaper() -> None:
        while True:
            await asyncio.sleep(reap_interval)
            for slot in store.reap():
                if slot.websocket is not None:
                    with contextlib.suppress(Exception):
                        await ws_send_error(slot.websocket, "SESSION_ERROR", "the session expired")
                        await slot.websocket.close()

    async def refresher() -> None:
        assert refresh is not None
        while True:
            await asyncio.sleep(refresh_interval)
            try:
                new_specs, extra = await refresh()
                current.catalog = Catalog(new_specs, listing_extra=extra, allow_empty=True)
            except Exception:  # a failed refresh keeps serving the catalogue it has
                logger.exception("The environment catalogue could not be refreshed.")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        tasks = [asyncio.create_task(reaper())]
        tasks.append(await face.running())
        if refresh is not None:
            tasks.append(asyncio.create_task(refresher()))
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    routes = [
        Route("/metadata", guarded(metadata)),
        Route("/schema", guarded(schema)),
        Route("/tasks", guarded(tasks)),
        Route("/reset", guarded(reset), methods=["POST"]),
        Route("/step", guarded(http_step), methods=["POST"]),
        Route("/state", guarded(http_state)),
        Route("/close", guarded(close), methods=["POST"]),
        WebSocketRoute("/ws", ws_endpoint),
        Route("/mcp", face, methods=["GET", "POST", "DELETE"]),
    ]
    app = Starlette(
        routes=[Route("/health", health), *routes, Mount("/t/{token}", routes=routes)],
        lifespan=lifespan,
    )
    app.state.store = store
    app.state.current = current
    return app


class _Current:
    """The catalogue being served (replaced whole by a refresh)."""

    def __init__(self, catalog: Catalog):
        self.catalog = catalog


def _ws_error(code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"type": "error", "data": {"message": message, "code": code, **extra}}


def serve(
    specs: Sequence[EnvironmentSpec | dict[str, Any]],
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    max_body_bytes: int = 4 * 1024 * 1024,
    **options: Any,
) -> None:
    """``max_body_bytes``: the limit on a request body or WebSocket message (``BodyLimit``)."""
    import uvicorn

    uvicorn.run(
        BodyLimit(create_app(specs, **options), max_body_bytes),
        host=host,
        port=port,
        log_level="warning",
        ws_per_message_deflate=False,
    )
