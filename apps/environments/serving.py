"""The environment server served from the app: the engine's OpenEnv-protocol server
(``engine/server.py``) over one project's validated environments, read from the database,
and opened with the API tokens of that project's members.

``python manage.py envserver --project SLUG --port 8000`` (see the command). The catalogue is
read when the server starts and again every ``--refresh`` seconds (60 by default): an
environment validated since is served, one edited back to draft or archived is withdrawn
(new resets only; a running episode keeps the spec it started with). ``GET /tasks`` adds
each environment's database ``id``, ``revision`` and ``spec_hash`` to the engine's listing,
so a trainer can record which revision it trained on.

Tokens: a personal API token (``cwe_…``, Account → API tokens) whose user is a member of the
project, any role; sent as ``Authorization: Bearer <token>`` or as the ``/t/<token>`` path
prefix (OpenEnv's client cannot send headers: ``GenericEnvClient(base_url=
"http://host:8000/t/<token>")``). A missing, wrong, revoked or another project's token gets
the same 401 ``missing or wrong token``.

Served from the web app too: ``ProjectEnvServers`` wraps the ASGI application
(``coworkenv_web/asgi.py``) so that ``/envs/<project-slug>/…`` (HTTP and the ``/ws``
WebSocket) reaches that project's server, built on its first request and kept, with the
session limits and catalogue refresh of the ``ENVSERVER_*`` settings (``envserver_options``;
the command's flags default to them too); everything else goes to Django. An unknown
project gets the same answers as a wrong token (401 on every route but ``/health``), so
that a slug tells nothing; the ``/t/<token>`` form never reaches the access log.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import (
    DatabaseError,
    InterfaceError,
    OperationalError,
    close_old_connections,
    connection,
)

from apps.accounts.models import Membership, Project
from apps.accounts.services import api_token_authenticate
from apps.environments.attachments import attachment_bytes
from apps.environments.models import Environment, EnvironmentStatus
from apps.environments.serving_gate import TokenGate
from apps.environments.serving_scope import without_path_token
from apps.environments.specs import environment_spec
from coworkenv_engine import spec as engine_spec
from coworkenv_engine.body_limit import BodyLimit

SERVED_STATUSES = (EnvironmentStatus.VALID, EnvironmentStatus.APPROVED)


@dataclass
class ProjectCatalogue:
    """What a project's server offers: loaded engine specs (named uniquely), the listing's
    extra fields by served name, and the environments left out with the reason."""

    specs: list[Any] = field(default_factory=list)
    extra: dict[str, dict[str, Any]] = field(default_factory=dict)
    skipped: list[tuple[Environment, str]] = field(default_factory=list)


def project_catalogue(*, project: Project, loaded: dict | None = None) -> ProjectCatalogue:
    """The project's validated (valid or approved) environments as engine specs, oldest
    first. Two environments with the same name are served as ``"<name> #<id>"`` (the
    protocol names an environment by its name). ``loaded``: a cache of engine specs by
    (id, revision, spec hash, served name), kept by a caller that refreshes (every edit
    bumps the revision, so an unchanged environment is not rebuilt)."""
    environments = list(
        Environment.objects.filter(project=project, status__in=SERVED_STATUSES).order_by(
            "created_at", "pk"
        )
    )
    names = [e.name for e in environments]
    catalogue = ProjectCatalogue()
    cache = loaded if loaded is not None else {}
    for environment in environments:
        name = environment.name
        if names.count(name) > 1:
            name = f"{environment.name} #{environment.pk}"
        key = (environment.pk, environment.revision, environment.spec_hash, name)
        spec = cache.get(key)
        if spec is None:
            try:
                document = environment_spec(environment)
                spec = engine_spec.load_spec({**document, "name": name})
            except ValueError as exc:  # SpecError: rows a validation would not pass
                catalogue.skipped.append((environment, f"its spec does not load: {exc}"))
                continue
            cache[key] = spec
        catalogue.specs.append(spec)
        catalogue.extra[spec.name] = {
            "id": environment.pk,
            "revision": environment.revision,
            "spec_hash": environment.spec_hash,
        }
    return catalogue


def project_token_allowed(*, project_id: int, raw: str) -> str | bool:
    """For an active API token of an active member of the project, the holder it counts
    against for the per-user share of sessions (``"user:<id>"``); False for anything else."""
    if not raw:
        return False
    return healthy(_token_allowed, project_id, raw)


def _token_allowed(project_id: int, raw: str) -> str | bool:
    token = api_token_authenticate(raw)
    if token is None:
        return False
    member = Membership.objects.filter(project_id=project_id, user_id=token.user_id).exists()
    return f"user:{token.user_id}" if member else False


def healthy(read: Callable[..., Any], *args: Any) -> Any:
    """``read(*args)`` on a healthy connection, as Django gives each request one: what the
    mount's database reads run through (they are no Django requests, so nothing else closes
    a connection the database dropped). Unusable or obsolete connections are closed first
    (``close_old_connections``: the health check of ``CONN_HEALTH_CHECKS`` runs on the next
    query); a read that meets a connection dropped since is tried once more on a new one.
    Inside a transaction (tests) the connection is left alone."""
    if connection.in_atomic_block:
        return read(*args)
    close_old_connections()
    try:
        return read(*args)
    except (InterfaceError, OperationalError):
        connection.close()
        return read(*args)


def project_envserver_app(
    *,
    project: Project,
    refresh_interval: float | None = 60.0,
    allow_empty: bool = False,
    **options,
):
    """The engine's starlette app over ``project_catalogue(project)``, opened by the
    project's tokens, the catalogue read again every ``refresh_interval`` seconds (None:
    never). ``options`` go to ``engine.server.create_app`` (session limits). Raises
    ValueError when the project has no servable environment at start, unless
    ``allow_empty`` (the app's mount: environments validated later appear at a refresh)."""
    from coworkenv_engine.server import create_app  # the envserver extra

    loaded: dict = {}
    catalogue = project_catalogue(project=project, loaded=loaded)
    if not catalogue.specs and not allow_empty:
        raise ValueError(f"Project “{project.slug}” has no valid or approved environment to serve.")
    check = sync_to_async(project_token_allowed)
    project_id = project.pk

    async def allowed(raw: str) -> str | bool:
        return await check(project_id=project_id, raw=raw)

    authorise = TokenGate(allowed)

    def reread() -> tuple[list, dict]:
        fresh = healthy(lambda: project_catalogue(project=project, loaded=loaded))
        served = {id(spec) for spec in fresh.specs}
        for key in [k for k, spec in loaded.items() if id(spec) not in served]:
            del loaded[key]  # withdrawn or edited environments
        return fresh.specs, fresh.extra

    app = create_app(
        catalogue.specs,
        authorise=authorise,
        listing_extra=catalogue.extra,
        refresh=sync_to_async(reread) if refresh_interval else None,
        refresh_interval=refresh_interval or 60.0,
        allow_empty=allow_empty,
        attachments=attachment_bytes,  # view tools' images as data: URLs
        **options,
    )
    app.state.catalogue = catalogue
    return app


PREFIX = "/envs/"


class ProjectEnvServers:
    """ASGI middleware: ``/envs/<slug>/<route>`` (HTTP and WebSocket) to the environment
    server of the project ``slug``, anything else to ``app`` (Django).

    A project's server is built on its first request (``project_envserver_app``, empty
    catalogues allowed) and kept for the life of the process; its lifespan (session reaper,
    catalogue refresh every ``ENVSERVER_REFRESH_S`` seconds) starts with it and ends at the
    ASGI server's shutdown, which also forgets the servers. The lifespan protocol is answered
    here (Django's handler does not speak it). An unknown slug gets what a wrong token gets
    (``closed_server``); a ``/t/<token>`` path prefix is taken out of the path, and out of
    the access log (``without_path_token``). Request bodies and
    WebSocket messages are limited (``BodyLimit``: 413, or close 1009) to
    ``ENVSERVER_MAX_BODY_BYTES`` under the mount, ``ASGI_MAX_BODY_BYTES`` elsewhere."""

    def __init__(self, app, *, prefix: str = PREFIX):
        self.app = app
        self.prefix = prefix
        self.servers: dict[str, Any] = {}
        self._lock: asyncio.Lock | None = None
        self._stack: contextlib.AsyncExitStack | None = None
        self._closed = None

    async def __call__(self, scope, receive, send) -> None:
        kind = scope["type"]
        if kind == "lifespan":
            await self._lifespan(receive, send)
            return
        path = scope.get("path", "")
        if kind in ("http", "websocket") and path.startswith(self.prefix):
            slug, slash, _ = path[len(self.prefix) :].partition("/")
            if slug and slash:
                LIVE_MOUNTS.add(self)  # an ASGI server without the lifespan protocol
                try:
                    server = await self.server(slug) or self.closed_server()
                except DatabaseError:  # the project could not be read: try again
                    await _unavailable(scope, receive, send)
                    return
                base = self.prefix + slug
                inner = without_path_token(scope, base)
                inner["root_path"] = scope.get("root_path", "") + base
                limited = BodyLimit(server, settings.ENVSERVER_MAX_BODY_BYTES)
                await limited(inner, receive, send)
                return
        if kind in ("http", "websocket"):
            await BodyLimit(self.app, settings.ASGI_MAX_BODY_BYTES)(scope, receive, send)
            return
        await self.app(scope, receive, send)

    async def server(self, slug: str):
        """The project's server, built (and its lifespan entered) on first use; None for a
        slug no project has."""
        server = self.servers.get(slug)
        if server is not None:
            return server
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            server = self.servers.get(slug)
            if server is None:
                server = await sync_to_async(healthy)(_project_server, slug)
                if server is None:
                    return None
                if self._stack is None:
                    self._stack = contextlib.AsyncExitStack()
                await self._stack.enter_async_context(server.router.lifespan_context(server))
                self.servers[slug] = server
        return server

    def closed_server(self):
        """What an unknown slug reaches: a server no token opens, so that it answers as a
        project's server does a wrong token (``/health``, 401 everywhere else), and a slug
        tells nothing of which projects exist."""
        if self._closed is None:
            from coworkenv_engine.server import create_app

            async def nobody(raw: str, client: str) -> bool:
                return False

            self._closed = create_app([], authorise=nobody, allow_empty=True)
        return self._closed

    async def close(self) -> None:
        """End every project server's lifespan and forget them."""
        stack, self._stack = self._stack, None
        self.servers.clear()
        self._lock = None
        if stack is not None:
            await stack.aclose()

    async def _lifespan(self, receive, send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                LIVE_MOUNTS.add(self)
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                LIVE_MOUNTS.discard(self)
                await self.close()
                await send({"type": "lifespan.shutdown.complete"})
                return


# The mounts serving in this process (between their ASGI server's start and shutdown): none
# under ``manage.py runserver``, a WSGI server or a worker.
LIVE_MOUNTS: weakref.WeakSet[ProjectEnvServers] = weakref.WeakSet()


@dataclass(frozen=True)
class EnvServerStatus:
    """A project's server in this process's mount: ``started`` once a request built it."""

    started: bool
    active_sessions: int
    max_sessions: int


def envserver_status(*, project: Project) -> EnvServerStatus | None:
    """What this process's ``/envs/`` mount serves for ``project``; None when no mount is
    live in this process (the web app runs without its ASGI application). Sessions count
    HTTP and WebSocket ones, expired ones until the reaper (every 5 s) drops them. Read from
    the request thread: lengths and lookups of dicts the event loop changes."""
    mounts = list(LIVE_MOUNTS)
    if not mounts:
        return None
    for mount in mounts:
        server = mount.servers.get(project.slug)
        if server is not None:
            status = server.state.store.status()
            return EnvServerStatus(True, status["active_sessions"], status["max_sessions"])
    return EnvServerStatus(False, 0, settings.ENVSERVER_MAX_SESSIONS)


def _project_server(slug: str):
    project = Project.objects.filter(slug=slug).first()
    if project is None:
        return None
    return project_envserver_app(project=project, allow_empty=True, **envserver_options(settings))


def envserver_options(settings) -> dict[str, Any]:
    """The session limits and refresh interval of ``settings`` (``ENVSERVER_*``), as
    ``project_envserver_app`` takes them: what the mount uses and the command's defaults."""
    per_token = settings.ENVSERVER_MAX_SESSIONS_PER_TOKEN or settings.ENVSERVER_MAX_SESSIONS // 4
    return {
        "max_sessions": settings.ENVSERVER_MAX_SESSIONS,
        "max_sessions_per_token": max(1, min(per_token, settings.ENVSERVER_MAX_SESSIONS)),
        "idle_timeout": settings.ENVSERVER_IDLE_TIMEOUT_S,
        "max_lifetime": settings.ENVSERVER_MAX_LIFETIME_S,
        "refresh_interval": settings.ENVSERVER_REFRESH_S or None,
    }


async def _unavailable(scope, receive, send) -> None:
    from starlette.responses import JSONResponse
    from starlette.websockets import WebSocket

    detail = {"detail": "the database is unavailable; try again", "code": "UNAVAILABLE"}
    response = JSONResponse(detail, 503)
    if scope["type"] == "http":
        await response(scope, receive, send)
        return
    websocket = WebSocket(scope, receive, send)
    if "websocket.http.response" in scope.get("extensions", {}):
        await websocket.send_denial_response(response)
    else:
        await websocket.close(code=1011)
