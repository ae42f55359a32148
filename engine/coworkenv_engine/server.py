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
                          (every HTTP route also takes the id as ``?episode_id=`` or an
                          ``X-Episode-Id`` header, what a proxy routes on; copies that
                          differ are refused, 422)
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

Several worker processes (``worker_id``, ``workers.py``): an HTTP request for an episode id
of another worker's ``wK-`` prefix is 421 ``MISDIRECTED``.

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
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute

from . import workers
from .attachments import Resolver
from .body_limit import BodyLimit
from .mcp_server import McpFace
from .protocol import Catalog, ImageURLs, SessionStore
from .protocol import Unavailable as Unavailable  # the app's gate raises it
from .server_routes import ServedCatalog, ServerRoutes, ws_send_error
from .spec import EnvironmentSpec

logger = logging.getLogger(__name__)

Background = Callable[[], Coroutine[Any, Any, None]]
Refresh = Callable[[], Awaitable[tuple[Sequence[Any], Mapping[str, Any]]]]  # (specs, extra)


# --------------------------------------------------------------------------- app


def create_app(
    specs: Sequence[EnvironmentSpec | dict[str, Any]],
    *,
    token: str | None = None,
    authorise: Callable[[str, str], Awaitable[bool]] | None = None,
    listing_extra: Mapping[str, Mapping[str, Any]] | None = None,
    refresh: Refresh | None = None,
    refresh_interval: float = 60.0,
    allow_empty: bool = False,
    attachments: Resolver | None = None,
    max_sessions: int = 256,
    max_sessions_per_token: int | None = None,
    idle_timeout: float = 600.0,
    max_lifetime: float = 3600.0,
    reap_interval: float = 5.0,
    clock: Callable[[], float] = time.monotonic,
    worker_id: int | None = None,
) -> Starlette:
    """``listing_extra``: fields added to an environment's entry in ``GET /tasks``, by
    environment name (the app adds its database id, revision and spec hash).
    ``refresh``: an async callable returning ``(specs, listing_extra)``, awaited every
    ``refresh_interval`` seconds to replace the catalogue (new resets see it; running
    sessions keep the spec they started with; a refresh that fails keeps the old one).
    ``allow_empty``: start with no environment (a catalogue a refresh fills later).
    ``attachments``: where image bytes come from (sha256 -> bytes); view tools' images are
    then sent as ``image_url`` parts with ``data:`` URLs (without it, as the transcript's
    ``attachment:sha256:<hex>`` URLs). ``worker_id``: this process is worker K of several
    (``workers.py``): its episode ids begin with ``wK-`` and an HTTP request for another
    worker's id is answered 421."""
    if token and authorise is not None:
        raise ValueError("give a token or an authorise callable, not both")
    current = ServedCatalog(Catalog(specs, listing_extra=listing_extra, allow_empty=allow_empty))
    store = SessionStore(
        max_sessions,
        idle_timeout,
        max_lifetime,
        clock,
        max_sessions_per_token,
        prefix=workers.prefix(worker_id) if worker_id is not None else "",
    )
    images = ImageURLs(attachments) if attachments is not None else None
    handlers = ServerRoutes(
        current, store, images=images, token=token, authorise=authorise, worker=worker_id
    )
    face = McpFace(
        store=store,
        start=handlers.start,
        step=handlers.step,
        authorised=handlers.authorised,
        idle_timeout=idle_timeout,
    )
    reaper = functools.partial(_reap_expired, store, reap_interval)
    refresher = (
        functools.partial(_refresh_catalog, current, refresh, refresh_interval)
        if refresh is not None
        else None
    )
    app = Starlette(routes=_routes(handlers, face), lifespan=_lifespan(face, reaper, refresher))
    app.state.store = store
    app.state.current = current
    return app


def _routes(handlers: ServerRoutes, face: McpFace) -> list[BaseRoute]:
    """Every route at the root and again under ``/t/<token>`` (``/health`` only at the root,
    never behind the token)."""
    guarded = handlers.guarded
    routes: list[BaseRoute] = [
        Route("/metadata", guarded(handlers.metadata)),
        Route("/schema", guarded(handlers.schema)),
        Route("/tasks", guarded(handlers.tasks)),
        Route("/reset", guarded(handlers.reset), methods=["POST"]),
        Route("/step", guarded(handlers.http_step), methods=["POST"]),
        Route("/state", guarded(handlers.http_state)),
        Route("/close", guarded(handlers.close), methods=["POST"]),
        WebSocketRoute("/ws", handlers.ws_endpoint),
        Route("/mcp", face, methods=["GET", "POST", "DELETE"]),
    ]
    return [Route("/health", handlers.health), *routes, Mount("/t/{token}", routes=routes)]


def _lifespan(face: McpFace, reaper: Background, refresher: Background | None):
    """Run the reaper, the MCP face and the refresher (if any) while the app serves."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        tasks = [asyncio.create_task(reaper())]
        tasks.append(await face.running())
        if refresher is not None:
            tasks.append(asyncio.create_task(refresher()))
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    return lifespan


async def _reap_expired(store: SessionStore, interval: float) -> None:
    """Every ``interval`` seconds drop the expired sessions, telling their WebSockets."""
    while True:
        await asyncio.sleep(interval)
        for slot in store.reap():
            if slot.websocket is not None:
                with contextlib.suppress(Exception):
                    await ws_send_error(slot.websocket, "SESSION_ERROR", "the session expired")
                    await slot.websocket.close()


async def _refresh_catalog(
    current: ServedCatalog,
    refresh: Refresh,
    interval: float,
) -> None:
    """Every ``interval`` seconds replace the catalogue with what ``refresh`` returns."""
    while True:
        await asyncio.sleep(interval)
        try:
            new_specs, extra = await refresh()
            current.catalog = Catalog(new_specs, listing_extra=extra, allow_empty=True)
        except Exception:  # a failed refresh keeps serving the catalogue it has
            logger.exception("The environment catalogue could not be refreshed.")


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
