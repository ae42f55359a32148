"""The environment server's route handlers (``server.py`` wires them into the app and says
what each route answers): the token check, the OpenEnv HTTP routes and the WebSocket
session protocol, over one catalogue and one session store."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.websockets import WebSocket, WebSocketDisconnect

from . import workers
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


HTTP_STATUS = {
    "VALIDATION_ERROR": 422,
    "NOT_FOUND": 404,
    "MISDIRECTED": 421,
    "CAPACITY_REACHED": 503,
}
WS_MESSAGE_TYPES = ("reset", "step", "state", "close")
STEP_FIELDS = {"action", "episode_id", "timeout_s", "request_id"}

Handler = Callable[[Request], Awaitable[_JSON]]


class ServedCatalog:
    """The catalogue being served (replaced whole by a refresh)."""

    def __init__(self, catalog: Catalog):
        self.catalog = catalog


class ServerRoutes:
    """The handlers of one server: ``token`` or ``authorise`` (neither: an open server) say
    who may use it; ``images``, when set, turns the images a view tool shows into ``data:``
    URLs; ``worker``: this process's worker id, when it is one of several (``workers.py``)."""

    def __init__(
        self,
        current: ServedCatalog,
        store: SessionStore,
        *,
        images: ImageURLs | None = None,
        token: str | None = None,
        authorise: Callable[[str, str], Awaitable[bool]] | None = None,
        worker: int | None = None,
    ):
        self.worker = worker
        self.current = current
        self.store = store
        self.images = images
        self.token = token
        self.authorise = authorise

    # ------------------------------------------------------------------ the token check

    async def authorised(self, request_or_ws: Request | WebSocket) -> bool:
        """Whether the presented token opens the server. Its owner digest (whose sessions it
        may use) goes to ``state.owner`` and the holder it counts against for the session
        share to ``state.group``: the name ``authorise`` answered with (the app: the token's
        user), else the owner itself. Both None on an open server."""
        request_or_ws.state.owner = request_or_ws.state.group = None
        if not self.token and self.authorise is None:
            return True
        given = _presented_token(request_or_ws)
        if self.authorise is not None:
            client = request_or_ws.client
            verdict = await self.authorise(given, client.host if client else "")
        else:
            verdict = hmac.compare_digest(given.encode(), self.token.encode())
        if verdict:
            owner = hashlib.sha256(given.encode()).hexdigest()
            request_or_ws.state.owner = owner
            request_or_ws.state.group = verdict if isinstance(verdict, str) else owner
        return bool(verdict)

    def guarded(self, handler: Handler) -> Handler:
        """``handler`` behind the token check, its protocol and session errors answered."""

        async def endpoint(request: Request) -> _JSON:
            try:
                if not await self.authorised(request):
                    return _JSON(REFUSED, 401)
            except Unavailable as exc:
                return _unavailable(exc)
            try:
                return await handler(request)
            except (ProtocolError, SessionError) as exc:
                return _error(exc)

        return endpoint

    # ------------------------------------------------------------------ episodes

    def start(self, slot: Slot, kwargs: dict[str, Any]) -> dict[str, Any]:
        catalog = self.current.catalog
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
        self.store.touch(slot)
        obs = slot.session.start()
        obs["episode_id"] = slot.episode_id
        return wire(obs)

    async def step(self, slot: Slot, data: Any) -> dict[str, Any]:
        reply, calls = parse_action(data)
        if slot.session is None:
            raise SessionError("call reset first")
        self.store.touch(slot)
        session = slot.session
        obs = session.act(reply, calls)
        obs["episode_id"] = slot.episode_id
        if self.images is not None:  # images read off the event loop (a slow storage)
            obs = await self.images.show(obs, session.spec)
        return wire(obs)

    # ------------------------------------------------------------------ HTTP routes

    async def health(self, request: Request) -> _JSON:
        return _JSON({"status": "healthy"})

    async def metadata(self, request: Request) -> _JSON:
        names = ", ".join(self.current.catalog.specs)
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

    async def schema(self, request: Request) -> _JSON:
        return _JSON(
            {"action": ACTION_SCHEMA, "observation": OBSERVATION_SCHEMA, "state": STATE_SCHEMA}
        )

    async def tasks(self, request: Request) -> _JSON:
        return _JSON(self.current.catalog.listing())

    async def reset(self, request: Request) -> _JSON:
        """A new HTTP session (its id chosen here), or a restart of the caller's own one
        named by ``episode_id`` (anyone else's, or none, is not found)."""
        kwargs = await _body(request)
        episode_id = _episode_id(request, kwargs)
        self.current.catalog.resolve(kwargs)  # refuse bad input before taking a slot
        owner = request.state.owner
        if episode_id is not None:
            slot = self._http_slot(episode_id, owner)
        else:
            slot = self.store.open(owner, request.state.group)
        return _JSON(self.start(slot, kwargs))

    async def http_step(self, request: Request) -> _JSON:
        data = await _body(request)
        extra = sorted(set(data) - STEP_FIELDS)
        if extra:
            raise invalid(extra[0], f"unknown field {extra[0]!r}")
        if "action" not in data:
            raise invalid("action", "field required")
        episode_id = _episode_id(request, data)
        if episode_id is None:
            raise invalid("episode_id", "episode_id (from the reset observation) is required")
        slot = self._http_slot(episode_id, request.state.owner)
        return _JSON(await self.step(slot, data["action"]))

    async def http_state(self, request: Request) -> _JSON:
        episode_id = _episode_id(request, {})
        if not episode_id:
            raise invalid("episode_id", "episode_id is required")
        return _JSON(state_of(self._held(episode_id, request.state.owner)))

    async def close(self, request: Request) -> _JSON:
        episode_id = _episode_id(request, await _body(request))
        if not isinstance(episode_id, str):
            raise invalid("episode_id", "episode_id is required")
        slot = self._held(episode_id, request.state.owner)
        self.store.drop(slot.id)
        return _JSON({"episode_id": episode_id, "closed": True})

    def _http_slot(self, episode_id: Any, owner: str | None) -> Slot:
        if not isinstance(episode_id, str):
            raise invalid("episode_id", "episode_id (from the reset observation) must be a string")
        slot = self._held(episode_id, owner)
        if slot.websocket is not None:
            raise ProtocolError("NOT_FOUND", f"no HTTP session {episode_id!r}")
        return slot

    def _held(self, episode_id: str, owner: str | None) -> Slot:
        """The live session ``episode_id`` of ``owner``; another worker's id is refused
        unlooked-at (421), a missing or another owner's one is not found (404)."""
        elsewhere = workers.misdirected(episode_id, self.worker)
        if elsewhere is not None:
            raise ProtocolError("MISDIRECTED", elsewhere)
        return self.store.get(episode_id, owner)

    # ------------------------------------------------------------------ WebSocket

    async def ws_endpoint(self, ws: WebSocket) -> None:
        if not await self._ws_admitted(ws):
            return
        await ws.accept()
        try:
            slot = self.store.open(ws.state.owner, ws.state.group)
        except ProtocolError as exc:
            await ws_send_error(ws, exc.code, str(exc), **self.store.status())
            await ws.close()
            return
        slot.websocket = ws
        try:
            await self._ws_session(ws, slot)
        finally:
            self.store.drop(slot.id)

    async def _ws_admitted(self, ws: WebSocket) -> bool:
        """Whether the handshake's token opens the server; a refusal is answered here."""
        try:
            denial = None if await self.authorised(ws) else _JSON(REFUSED, 401)
        except Unavailable as exc:
            denial = _unavailable(exc)
        if denial is None:
            return True
        # the same answer as the HTTP routes where the ASGI server can send it
        if "websocket.http.response" in ws.scope.get("extensions", {}):
            await ws.send_denial_response(denial)
        else:  # a bare refusal of the handshake (the client sees 403)
            await ws.close(code=1008)
        return False

    async def _ws_session(self, ws: WebSocket, slot: Slot) -> None:
        """Answer the connection's messages until it closes, asks to close or expires."""
        while True:
            try:
                raw = await ws.receive_text()
            except WebSocketDisconnect:
                return
            if self.store.slots.get(slot.id) is not slot or self.store.expired(slot):
                await ws_send_error(ws, "SESSION_ERROR", "the session expired")
                await ws.close()
                return
            reply = await self.ws_message(slot, raw)
            if reply is None:  # close
                await ws.close()
                return
            await ws.send_text(_dumps(reply).decode())

    async def ws_message(self, slot: Slot, raw: str) -> dict[str, Any] | None:
        """The reply to one message, None for ``close``."""
        try:
            msg = _loads(raw)
        except ValueError:
            return _ws_error("INVALID_JSON", "the message is not JSON")
        malformed = _ws_malformed(msg)
        if malformed is not None:
            return malformed
        kind = msg.get("type")
        if kind == "close":
            return None
        if kind == "state":
            return {"type": "state", "data": state_of(slot)}
        try:
            return {"type": "observation", "data": await self._ws_observation(slot, kind, msg)}
        except ProtocolError as exc:
            code = (
                exc.code if exc.code in ("VALIDATION_ERROR", "INVALID_JSON") else "EXECUTION_ERROR"
            )
            return _ws_error(code, str(exc), errors=exc.errors)
        except SessionError as exc:
            return _ws_error("EXECUTION_ERROR", str(exc))

    async def _ws_observation(self, slot: Slot, kind: str, msg: dict[str, Any]) -> dict[str, Any]:
        """The observation a ``reset`` or ``step`` message gets."""
        if kind == "reset":
            data = msg.get("data") or {}
            if not isinstance(data, dict):
                raise invalid("data", "reset data must be an object")
            return self.start(slot, data)
        if "data" not in msg:
            raise invalid("data", "field required")
        return await self.step(slot, msg["data"])


def _presented_token(request_or_ws: Request | WebSocket) -> str:
    """The ``/t/<token>`` prefix's token, else the bearer token, else empty."""
    given = request_or_ws.path_params.get("token")
    if given is not None:
        return given
    header = request_or_ws.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" else ""


def _unavailable(exc: Unavailable) -> _JSON:
    return _JSON({"detail": str(exc), "code": "UNAVAILABLE"}, 503)


def _error(exc: ProtocolError | SessionError) -> _JSON:
    if isinstance(exc, SessionError):
        return _JSON({"detail": str(exc), "code": "EXECUTION_ERROR"}, 409)
    status = HTTP_STATUS.get(exc.code, 400)
    detail: Any = exc.errors if exc.code == "VALIDATION_ERROR" else str(exc)
    return _JSON({"detail": detail, "code": exc.code}, status)


async def _body(request: Request) -> dict[str, Any]:
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


def _episode_id(request: Request, body: dict[str, Any]) -> Any:
    """The episode id the body, the query string or the ``X-Episode-Id`` header names (a
    proxy routes on the latter two), None when none does; copies that differ are refused."""
    given = [
        value
        for value in (
            body.get("episode_id"),
            request.query_params.get("episode_id"),
            request.headers.get("x-episode-id"),
        )
        if value is not None
    ]
    if any(value != given[0] for value in given[1:]):
        raise invalid("episode_id", "the episode ids of the body, query and header differ")
    return given[0] if given else None


def _ws_malformed(msg: Any) -> dict[str, Any] | None:
    """The error a message that is no object of a known type with known keys gets."""
    if not isinstance(msg, dict):
        return _ws_error("VALIDATION_ERROR", "a message must be an object")
    kind = msg.get("type")
    if kind not in WS_MESSAGE_TYPES:
        return _ws_error("UNKNOWN_TYPE", f"unknown message type {kind!r}")
    allowed = {"type", "data"} if kind in ("reset", "step") else {"type"}
    extra = sorted(set(msg) - allowed)
    if extra:
        return _ws_error("VALIDATION_ERROR", f"unknown key {extra[0]!r}")
    return None


def _ws_error(code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"type": "error", "data": {"message": message, "code": code, **extra}}


async def ws_send_error(ws: WebSocket, code: str, message: str, **extra: Any) -> None:
    await ws.send_text(_dumps(_ws_error(code, message, **extra)).decode())
