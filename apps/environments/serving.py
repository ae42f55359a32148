"""The environment server served from the app: the engine's OpenEnv-protocol server
(``engine/server.py``) over one project's validated environments, read from the database,
and opened with the API tokens of that project's members.

``python manage.py envserver --project SLUG --port 8000`` (see the command). The catalogue is
read once, when the server starts: an environment validated (or edited back to draft) later
is served (or withdrawn) after a restart. ``GET /tasks`` adds each environment's database
``id``, ``revision`` and ``spec_hash`` to the engine's listing, so a trainer can record which
revision it trained on.

Tokens: a personal API token (``cwe_…``, Account → API tokens) whose user is a member of the
project, any role; sent as ``Authorization: Bearer <token>`` or as the ``/t/<token>`` path
prefix (OpenEnv's client cannot send headers: ``GenericEnvClient(base_url=
"http://host:8000/t/<token>")``). A missing, wrong, revoked or another project's token gets
the same 401 ``missing or wrong token``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async

from apps.accounts.models import Membership, Project
from apps.accounts.services import api_token_authenticate
from apps.environments.engine import spec as engine_spec
from apps.environments.models import Environment, EnvironmentStatus
from apps.environments.specs import environment_spec

SERVED_STATUSES = (EnvironmentStatus.VALID, EnvironmentStatus.APPROVED)


@dataclass
class ProjectCatalogue:
    """What a project's server offers: loaded engine specs (named uniquely), the listing's
    extra fields by served name, and the environments left out with the reason."""

    specs: list[Any] = field(default_factory=list)
    extra: dict[str, dict[str, Any]] = field(default_factory=dict)
    skipped: list[tuple[Environment, str]] = field(default_factory=list)


def project_catalogue(*, project: Project) -> ProjectCatalogue:
    """The project's validated (valid or approved) environments as engine specs, oldest
    first. Two environments with the same name are served as ``"<name> #<id>"`` (the
    protocol names an environment by its name)."""
    environments = list(
        Environment.objects.filter(project=project, status__in=SERVED_STATUSES).order_by(
            "created_at", "pk"
        )
    )
    names = [e.name for e in environments]
    catalogue = ProjectCatalogue()
    for environment in environments:
        try:
            document = environment_spec(environment)
            if names.count(environment.name) > 1:
                document = {**document, "name": f"{environment.name} #{environment.pk}"}
            spec = engine_spec.load_spec(document)
        except ValueError as exc:  # SpecError: rows a validation would not pass
            catalogue.skipped.append((environment, f"its spec does not load: {exc}"))
            continue
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


def project_envserver_app(*, project: Project, **options: Any):
    """The engine's starlette app over ``project_catalogue(project)``, opened by the
    project's tokens. ``options`` go to ``engine.server.create_app`` (session limits).
    Raises ValueError when the project has no servable environment."""
    from apps.environments.engine.server import create_app  # the envserver extra

    catalogue = project_catalogue(project=project)
    if not catalogue.specs:
        raise ValueError(f"Project “{project.slug}” has no valid or approved environment to serve.")
    check = sync_to_async(project_token_allowed)
    project_id = project.pk

    async def authorise(raw: str) -> bool:
        return await check(project_id=project_id, raw=raw)

    app = create_app(catalogue.specs, authorise=authorise, listing_extra=catalogue.extra, **options)
    app.state.catalogue = catalogue
    return app
