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
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async

from apps.accounts.models import Membership, Project
from apps.accounts.services import api_token_authenticate
from apps.environments.models import Environment, EnvironmentStatus
from apps.environments.specs import environment_spec
from coworkenv_engine import spec as engine_spec

SERVED_STATUSES = (EnvironmentStatus.VALID, EnvironmentStatus.APPROVED)
TOKEN_CACHE_S = 30.0
FAILURES_PER_MINUTE = 30


class TokenGate:
    """The server's token check in front of the database.

    A token found valid is remembered (by its sha256) for ``TOKEN_CACHE_S`` seconds, so a
    trainer's steps do not each cost a query; a revoked token stops working within that
    time. After ``FAILURES_PER_MINUTE`` wrong tokens within a minute, unknown tokens are
    refused without a lookup until the minute has passed: guessing gets the same 401,
    faster, and costs the database nothing. Known tokens keep working meanwhile."""

    def __init__(
        self,
        check: Callable[[str], Awaitable[bool]],
        *,
        ttl: float = TOKEN_CACHE_S,
        failures_per_minute: int = FAILURES_PER_MINUTE,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.check = check
        self.ttl = ttl
        self.failures_per_minute = failures_per_minute
        self.clock = clock
        self.valid_until: dict[str, float] = {}
        self.failures: list[float] = []

    async def __call__(self, raw: str) -> bool:
        now = self.clock()
        key = hashlib.sha256(raw.encode()).hexdigest()
        if self.valid_until.get(key, 0.0) > now:
            return True
        self.failures = [at for at in self.failures if at > now - 60.0]
        if len(self.failures) >= self.failures_per_minute:
            return False
        if await self.check(raw):
            self.valid_until = {k: t for k, t in self.valid_until.items() if t > now}
            self.valid_until[key] = now + self.ttl
            return True
        self.failures.append(now)
        return False


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


def project_token_allowed(*, project_id: int, raw: str) -> bool:
    """Whether ``raw`` is an active API token of an active member of the project."""
    token = api_token_authenticate(raw) if raw else None
    if token is None:
        return False
    return Membership.objects.filter(project_id=project_id, user_id=token.user_id).exists()


def project_envserver_app(*, project: Project, refresh_interval: float | None = 60.0, **options):
    """The engine's starlette app over ``project_catalogue(project)``, opened by the
    project's tokens, the catalogue read again every ``refresh_interval`` seconds (None:
    never). ``options`` go to ``engine.server.create_app`` (session limits). Raises
    ValueError when the project has no servable environment at start."""
    from coworkenv_engine.server import create_app  # the envserver extra

    loaded: dict = {}
    catalogue = project_catalogue(project=project, loaded=loaded)
    if not catalogue.specs:
        raise ValueError(f"Project “{project.slug}” has no valid or approved environment to serve.")
    check = sync_to_async(project_token_allowed)
    project_id = project.pk

    async def allowed(raw: str) -> bool:
        return await check(project_id=project_id, raw=raw)

    authorise = TokenGate(allowed)

    def reread() -> tuple[list, dict]:
        fresh = project_catalogue(project=project, loaded=loaded)
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
        **options,
    )
    app.state.catalogue = catalogue
    return app
