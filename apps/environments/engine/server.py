"""An environment server speaking OpenEnv's protocol (openenv-core 0.3.0 wire format).

Optional extra ``envserver`` (starlette + uvicorn); the rest of the engine does not import
this module. ``python -m apps.environments.engine serve samples/*.json --port 8000``.

Routes (each also under ``/t/<token>/…`` for clients that cannot send headers, such as
OpenEnv's ``EnvClient``, whose base URL may then be ``http://host:port/t/<token>``):

    GET  /health          {"status": "healthy"}   (never needs the token)
    GET  /metadata        EnvironmentMetadata (name, description, readme_content, version, …)
    GET  /schema          {"action", "observation", "state"} JSON Schemas
    GET  /tasks           environments with their tasks, splits and capabilities
    POST /reset           {seed?, episode_id?, environment?, task_key?, split?, capability?,
                           faults?} -> {"observation", "reward", "done"}; starts (or restarts)
                           the HTTP session ``observation.episode_id``
    POST /step            {"action": {...}, "episode_id": "..."} -> {"observation", "reward",
                           "done"}
    GET  /state           ?episode_id=... -> State (episode_id, step_count, extra fields)
    POST /close           {"episode_id": "..."} -> {"episode_id", "closed": true}
    WS   /ws              OpenEnv's session protocol: reset / step / state / close messages

OpenEnv 0.3.0's HTTP routes are stateless; here an HTTP episode is kept under its
``episode_id`` (our extension) so that plain HTTP clients can run whole episodes, while the
WebSocket session (one connection = one session) is what OpenEnv clients and TRL use.

Action: ``{"tool_calls": [{"id"?, "name", "arguments"}], "reply": str | null, "metadata"?}``
(an entry may also be OpenAI-shaped: ``{"id", "type": "function", "function": {"name",
"arguments"}}``). Tool calls are run in order; an action without tool calls is the assistant's
reply and ends the turn. Observation fields: see ``session.py``.

Sessions: at most ``max_sessions`` at once (HTTP and WebSocket together; a WebSocket over the
limit gets ``CAPACITY_REACHED`` and is closed, an HTTP reset gets 503), each dropped after
``idle_timeout`` seconds without a reset/step or ``max_lifetime`` seconds after it began.
Bearer-token auth when a token is set (``Authorization: Bearer <token>`` or the ``/t/<token>``
prefix). Engine steps run on the event loop (a step is well under a millisecond).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import random
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from .policies import ToolCall
from .session import EpisodeSession, SessionError
from .spec import EnvironmentSpec, load_spec

VERSION = "1.0.0"
RESET_KEYS = {"seed", "episode_id", "environment", "task_key", "split", "capability", "faults"}
ACTION_KEYS = {"tool_calls", "reply", "metadata"}


class ProtocolError(ValueError):
    """A request that does not fit the protocol: (code, message, errors)."""

    def __init__(self, code: str, message: str, errors: list[dict[str, Any]] | None = None):
        super().__init__(message)
        self.code = code
        self.errors = errors or []


def _invalid(loc: str, msg: str) -> ProtocolError:
    return ProtocolError("VALIDATION_ERROR", msg, [{"loc": [loc], "msg": msg}])


# --------------------------------------------------------------------------- catalogue


class Catalog:
    """The environment specs a server offers, by name."""

    def __init__(self, specs: Sequence[EnvironmentSpec | dict[str, Any]]):
        loaded = [s if isinstance(s, EnvironmentSpec) else load_spec(s) for s in specs]
        if not loaded:
            raise ValueError("a server needs at least one environment spec")
        self.specs: dict[str, EnvironmentSpec] = {}
        for spec in loaded:
            if spec.name in self.specs:
                raise ValueError(f"two environments are named {spec.name!r}")
            self.specs[spec.name] = spec

    def listing(self) -> dict[str, Any]:
        return {
            "environments": [
                {
                    "name": spec.name,
                    "domain": spec.domain,
                    "description": spec.description,
                    "splits": sorted({t.split for t in spec.tasks}),
                    "capabilities": sorted({c for t in spec.tasks for c in t.capabilities}),
                    "tasks": [
                        {
                            "key": t.key,
                            "title": t.title,
                            "split": t.split,
                            "capabilities": list(t.capabilities),
                            "turns": len(t.turns),
                        }
                        for t in spec.tasks
                    ],
                }
                for spec in self.specs.values()
            ]
        }

    def resolve(self, kwargs: dict[str, Any]) -> tuple[EnvironmentSpec, str, int, bool]:
        """(spec, task key, seed, faults) for the reset kwargs; a task is named by
        ``environment`` + ``task_key`` or drawn (seeded) from those matching ``split`` /
        ``capability``; ``environment`` may be left out when the server has one."""
        unknown = sorted(set(kwargs) - RESET_KEYS)
        if unknown:
            raise _invalid(unknown[0], f"unknown reset argument {unknown[0]!r}")
        seed = kwargs.get("seed", 0)
        if seed is None:
            seed = 0
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise _invalid("seed", "seed must be an integer >= 0")
        faults = kwargs.get("faults", True)
        if not isinstance(faults, bool):
            raise _invalid("faults", "faults must be true or false")
        for key in ("environment", "task_key", "split", "capability", "episode_id"):
            value = kwargs.get(key)
            if value is not None and not isinstance(value, str):
                raise _invalid(key, f"{key} must be a string")
        name = kwargs.get("environment")
        if name is not None and name not in self.specs:
            raise ProtocolError("NOT_FOUND", f"no environment named {name!r}")
        specs = [self.specs[name]] if name else list(self.specs.values())
        task_key = kwargs.get("task_key")
        if task_key is not None:
            owners = [s for s in specs if any(t.key == task_key for t in s.tasks)]
            if not owners:
                raise ProtocolError("NOT_FOUND", f"no task {task_key!r}")
            if len(owners) > 1:
                raise _invalid("environment", f"task {task_key!r} is in several environments")
            return owners[0], task_key, seed, faults
        split, capability = kwargs.get("split"), kwargs.get("capability")
        matching = [
            (s, t.key)
            for s in specs
            for t in s.tasks
            if (split is None or t.split == split)
            and (capability is None or capability in t.capabilities)
        ]
        if not matching:
            raise ProtocolError("NOT_FOUND", "no task matches the given split/capability")
        spec, key = random.Random(seed).choice(matching)
        return spec, key, seed, faults


# --------------------------------------------------------------------------- sessions


@dataclass
class Slot:
    id: str
    created: float
    last_used: float
    session: EpisodeSession | None = None
    episode_id: str | None = None
    websocket: WebSocket | None = field(default=None, repr=False)


class SessionStore:
    def __init__(
        self,
        max_sessions: int,
        idle_timeout: float,
        max_lifetime: float,
        clock: Callable[[], float],
    ):
        self.max_sessions = max_sessions
        self.idle_timeout = idle_timeout
        self.max_lifetime = max_lifetime
        self.clock = clock
        self.slots: dict[str, Slot] = {}

    def expired(self, slot: Slot) -> bool:
        now = self.clock()
        return now - slot.last_used > self.idle_timeout or now - slot.created > self.max_lifetime

    def open(self, slot_id: str | None = None) -> Slot:
        self.reap()
        if len(self.slots) >= self.max_sessions:
            raise ProtocolError("CAPACITY_REACHED", "session limit reached")
        now = self.clock()
        slot = Slot(slot_id or uuid.uuid4().hex, now, now)
        self.slots[slot.id] = slot
        return slot

    def get(self, slot_id: str) -> Slot:
        slot = self.slots.get(slot_id)
        if slot is None:
            raise ProtocolError("NOT_FOUND", f"no session {slot_id!r} (closed or expired)")
        if self.expired(slot):
            self.drop(slot_id)
            raise ProtocolError("NOT_FOUND", f"session {slot_id!r} expired")
        return slot

    def touch(self, slot: Slot) -> None:
        slot.last_used = self.clock()

    def drop(self, slot_id: str) -> Slot | None:
        return self.slots.pop(slot_id, None)

    def reap(self) -> list[Slot]:
        gone = [s for s in list(self.slots.values()) if self.expired(s)]
        for s in gone:
            self.drop(s.id)
        return gone

    def status(self) -> dict[str, int]:
        return {"active_sessions": len(self.slots), "max_sessions": self.max_sessions}


# --------------------------------------------------------------------------- actions


def _tool_call(entry: Any, i: int) -> ToolCall:
    if not isinstance(entry, dict):
        raise _invalid(f"tool_calls.{i}", "a tool call must be an object")
    if "function" in entry:
        fn = entry["function"]
        if not isinstance(fn, dict) or set(entry) - {"id", "type", "function"}:
            raise _invalid(f"tool_calls.{i}", "an OpenAI tool call has id, type, function")
        name, arguments = fn.get("name"), fn.get("arguments", {})
    else:
        extra = sorted(set(entry) - {"id", "name", "arguments"})
        if extra:
            raise _invalid(f"tool_calls.{i}.{extra[0]}", f"unknown key {extra[0]!r}")
        name, arguments = entry.get("name"), entry.get("arguments", {})
    if not isinstance(name, str) or not name:
        raise _invalid(f"tool_calls.{i}.name", "a tool call needs a name")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict | str):
        raise _invalid(f"tool_calls.{i}.arguments", "arguments must be an object or a string")
    call_id = entry.get("id")
    if call_id is not None and not isinstance(call_id, str):
        raise _invalid(f"tool_calls.{i}.id", "id must be a string")
    return ToolCall(name, arguments, call_id)


def parse_action(data: Any) -> tuple[str | None, list[ToolCall]]:
    if not isinstance(data, dict):
        raise _invalid("action", "the action must be an object")
    extra = sorted(set(data) - ACTION_KEYS)
    if extra:
        raise _invalid(extra[0], f"unknown action field {extra[0]!r}")
    reply = data.get("reply")
    if reply is not None and not isinstance(reply, str):
        raise _invalid("reply", "reply must be a string or null")
    calls = data.get("tool_calls") or []
    if not isinstance(calls, list):
        raise _invalid("tool_calls", "tool_calls must be a list")
    return reply, [_tool_call(c, i) for i, c in enumerate(calls)]


def _wire(obs: dict[str, Any]) -> dict[str, Any]:
    inner = {k: v for k, v in obs.items() if k not in ("reward", "done")}
    return {"observation": inner, "reward": obs["reward"], "done": obs["done"]}


def _state(slot: Slot) -> dict[str, Any]:
    base = {"episode_id": slot.episode_id, "step_count": 0}
    if slot.session is not None:
        base.update(slot.session.state())
    return base


# --------------------------------------------------------------------------- schemas

_TOOL_CALL = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "name": {"type": "string"},
        "arguments": {"anyOf": [{"type": "object"}, {"type": "string"}]},
    },
    "required": ["name"],
}
ACTION_SCHEMA = {
    "title": "CoworkEnvAction",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "tool_calls": {"type": "array", "items": _TOOL_CALL},
        "reply": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "metadata": {"type": "object"},
    },
}
OBSERVATION_SCHEMA = {
    "title": "CoworkEnvObservation",
    "type": "object",
    "properties": {
        "episode_id": {"type": "string"},
        "episode": {"type": "object"},
        "turn": {"type": "integer"},
        "turn_ended": {"type": "boolean"},
        "messages": {"type": "array", "items": {"type": "object"}},
        "tool_results": {"type": "array", "items": {"type": "object"}},
        "user_message": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "turn_reward": {"anyOf": [{"type": "number"}, {"type": "null"}]},
        "system_prompt": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "tools": {"type": "array", "items": {"type": "object"}},
        "grading": {"anyOf": [{"type": "object"}, {"type": "null"}]},
        "turn_rewards": {"anyOf": [{"type": "array"}, {"type": "null"}]},
        "stop_reason": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "done": {"type": "boolean"},
        "reward": {"anyOf": [{"type": "number"}, {"type": "null"}]},
    },
}
STATE_SCHEMA = {
    "title": "State",
    "type": "object",
    "additionalProperties": True,
    "properties": {
        "episode_id": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "step_count": {"type": "integer", "minimum": 0},
    },
}


# --------------------------------------------------------------------------- app

HTTP_STATUS = {"VALIDATION_ERROR": 422, "NOT_FOUND": 404, "CAPACITY_REACHED": 503}


def create_app(
    specs: Sequence[EnvironmentSpec | dict[str, Any]],
    *,
    token: str | None = None,
    max_sessions: int = 256,
    idle_timeout: float = 600.0,
    max_lifetime: float = 3600.0,
    reap_interval: float = 5.0,
    clock: Callable[[], float] = time.monotonic,
) -> Starlette:
    catalog = Catalog(specs)
    store = SessionStore(max_sessions, idle_timeout, max_lifetime, clock)

    def authorised(request_or_ws: Request | WebSocket) -> bool:
        if not token:
            return True
        given = request_or_ws.path_params.get("token")
        if given is None:
            header = request_or_ws.headers.get("authorization", "")
            scheme, _, value = header.partition(" ")
            given = value.strip() if scheme.lower() == "bearer" else ""
        return hmac.compare_digest(given.encode(), token.encode())

    def error(exc: ProtocolError | SessionError) -> JSONResponse:
        if isinstance(exc, SessionError):
            return JSONResponse({"detail": str(exc), "code": "EXECUTION_ERROR"}, 409)
        status = HTTP_STATUS.get(exc.code, 400)
        detail: Any = exc.errors if exc.code == "VALIDATION_ERROR" else str(exc)
        return JSONResponse({"detail": detail, "code": exc.code}, status)

    async def body(request: Request) -> dict[str, Any]:
        raw = await request.body()
        if not raw:
            return {}
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise ProtocolError("INVALID_JSON", "the body is not JSON") from exc
        if not isinstance(data, dict):
            raise _invalid("body", "the body must be an object")
        return data

    def guarded(handler):
        async def endpoint(request: Request) -> JSONResponse:
            if not authorised(request):
                return JSONResponse({"detail": "missing or wrong token"}, 401)
            try:
                return await handler(request)
            except (ProtocolError, SessionError) as exc:
                return error(exc)

        return endpoint

    def start(slot: Slot, kwargs: dict[str, Any]) -> dict[str, Any]:
        spec, task_key, seed, faults = catalog.resolve(kwargs)
        slot.session = EpisodeSession(spec, task_key, seed, faults=faults)
        slot.episode_id = kwargs.get("episode_id") or slot.id
        store.touch(slot)
        obs = slot.session.start()
        obs["episode_id"] = slot.episode_id
        return _wire(obs)

    def step(slot: Slot, data: Any) -> dict[str, Any]:
        reply, calls = parse_action(data)
        if slot.session is None:
            raise SessionError("call reset first")
        store.touch(slot)
        obs = slot.session.act(reply, calls)
        obs["episode_id"] = slot.episode_id
        return _wire(obs)

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "healthy"})

    async def metadata(request: Request) -> JSONResponse:
        names = ", ".join(catalog.specs)
        return JSONResponse(
            {
                "name": "coworkenv",
                "description": f"CoworkEnv environments: {names}",
                "readme_content": None,
                "version": VERSION,
                "author": "CoworkEnv",
                "documentation_url": None,
            }
        )

    async def schema(request: Request) -> JSONResponse:
        return JSONResponse(
            {"action": ACTION_SCHEMA, "observation": OBSERVATION_SCHEMA, "state": STATE_SCHEMA}
        )

    async def tasks(request: Request) -> JSONResponse:
        return JSONResponse(catalog.listing())

    async def reset(request: Request) -> JSONResponse:
        kwargs = await body(request)
        catalog.resolve(kwargs)  # refuse bad input before taking a slot
        episode_id = kwargs.get("episode_id")
        slot = store.slots.get(episode_id) if episode_id else None
        if slot is not None and store.expired(slot):
            store.drop(slot.id)
            slot = None
        if slot is None or slot.websocket is not None:
            slot = store.open(uuid.uuid4().hex if slot is not None else episode_id)
        return JSONResponse(start(slot, kwargs))

    async def http_step(request: Request) -> JSONResponse:
        data = await body(request)
        extra = sorted(set(data) - {"action", "episode_id", "timeout_s", "request_id"})
        if extra:
            raise _invalid(extra[0], f"unknown field {extra[0]!r}")
        if "action" not in data:
            raise _invalid("action", "field required")
        episode_id = data.get("episode_id")
        if not isinstance(episode_id, str):
            raise _invalid("episode_id", "episode_id (from the reset observation) is required")
        slot = store.get(episode_id)
        if slot.websocket is not None:
            raise ProtocolError("NOT_FOUND", f"no HTTP session {episode_id!r}")
        return JSONResponse(step(slot, data["action"]))

    async def http_state(request: Request) -> JSONResponse:
        episode_id = request.query_params.get("episode_id")
        if not episode_id:
            raise _invalid("episode_id", "episode_id is required")
        return JSONResponse(_state(store.get(episode_id)))

    async def close(request: Request) -> JSONResponse:
        data = await body(request)
        episode_id = data.get("episode_id")
        if not isinstance(episode_id, str):
            raise _invalid("episode_id", "episode_id is required")
        slot = store.get(episode_id)
        store.drop(slot.id)
        return JSONResponse({"episode_id": episode_id, "closed": True})

    async def ws_send_error(ws: WebSocket, code: str, message: str, **extra: Any) -> None:
        await ws.send_json({"type": "error", "data": {"message": message, "code": code, **extra}})

    async def ws_endpoint(ws: WebSocket) -> None:
        if not authorised(ws):
            await ws.close(code=1008)
            return
        await ws.accept()
        try:
            slot = store.open()
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
                reply = ws_message(slot, raw)
                if reply is None:  # close
                    await ws.close()
                    return
                await ws.send_json(reply)
        finally:
            store.drop(slot.id)

    def ws_message(slot: Slot, raw: str) -> dict[str, Any] | None:
        try:
            msg = json.loads(raw)
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
            return {"type": "state", "data": _state(slot)}
        try:
            if kind == "reset":
                data = msg.get("data") or {}
                if not isinstance(data, dict):
                    raise _invalid("data", "reset data must be an object")
                return {"type": "observation", "data": start(slot, data)}
            if "data" not in msg:
                raise _invalid("data", "field required")
            return {"type": "observation", "data": step(slot, msg["data"])}
        except ProtocolError as exc:
            code = (
                exc.code if exc.code in ("VALIDATION_ERROR", "INVALID_JSON") else "EXECUTION_ERROR"
            )
            return _ws_error(code, str(exc), errors=exc.errors)
        except SessionError as exc:
            return _ws_error("EXECUTION_ERROR", str(exc))

    async def reaper() -> None:
        while True:
            await asyncio.sleep(reap_interval)
            for slot in store.reap():
                if slot.websocket is not None:
                    with contextlib.suppress(Exception):
                        await ws_send_error(slot.websocket, "SESSION_ERROR", "the session expired")
                        await slot.websocket.close()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        task = asyncio.create_task(reaper())
        try:
            yield
        finally:
            task.cancel()
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
    ]
    app = Starlette(
        routes=[Route("/health", health), *routes, Mount("/t/{token}", routes=routes)],
        lifespan=lifespan,
    )
    app.state.store = store
    app.state.catalog = catalog
    return app


def _ws_error(code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"type": "error", "data": {"message": message, "code": code, **extra}}


def serve(
    specs: Sequence[EnvironmentSpec | dict[str, Any]],
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    **options: Any,
) -> None:
    import uvicorn

    uvicorn.run(create_app(specs, **options), host=host, port=port, log_level="warning")
