"""python manage.py envserver --project SLUG [--host 127.0.0.1] [--port 8000]"""

import math

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from apps.accounts.models import Project
from apps.environments.serving import envserver_options, project_envserver_app
from coworkenv_engine.body_limit import BodyLimit


class Command(BaseCommand):
    help = (
        "Serve a project's valid and approved environments over OpenEnv's protocol (HTTP "
        "reset/step/state, WebSocket sessions at /ws, GET /tasks), opened by the API tokens "
        "of the project's members. The catalogue is read at start and every --refresh "
        "seconds. Session limits default to the ENVSERVER_* settings."
    )

    def add_arguments(self, parser):
        parser.add_argument("--project", required=True, help="Project slug.")
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument(
            "--max-sessions", type=int, help="Sessions at once (ENVSERVER_MAX_SESSIONS)."
        )
        parser.add_argument(
            "--idle-timeout",
            type=float,
            help="Seconds without a reset/step (ENVSERVER_IDLE_TIMEOUT_S).",
        )
        parser.add_argument(
            "--max-lifetime",
            type=float,
            help="Seconds a session may last (ENVSERVER_MAX_LIFETIME_S).",
        )
        parser.add_argument(
            "--refresh",
            type=float,
            help="Seconds between reads of the catalogue from the database, 0: never "
            "(ENVSERVER_REFRESH_S).",
        )

    def handle(self, *args, **opts):
        project = Project.objects.filter(slug=opts["project"]).first()
        if project is None:
            raise CommandError(f"No project with the slug “{opts['project']}”.")
        options = server_options(opts)
        try:
            import uvicorn
        except ImportError:
            raise CommandError(
                "The environment server needs the envserver extra: pip install '.[envserver]'."
            ) from None
        try:
            app = project_envserver_app(project=project, **options)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        catalogue = app.state.catalogue
        tasks = sum(len(spec.tasks) for spec in catalogue.specs)
        self.stdout.write(
            f"Serving {len(catalogue.specs)} environments ({tasks} tasks) of “{project.slug}” "
            f"on http://{opts['host']}:{opts['port']} — token: a project member's API token "
            f"(Authorization: Bearer … or the /t/<token> prefix)."
        )
        for environment, reason in catalogue.skipped:
            self.stderr.write(f"Left out environment {environment.pk} “{environment}”: {reason}")
        uvicorn.run(
            BodyLimit(app, settings.ENVSERVER_MAX_BODY_BYTES),
            host=opts["host"],
            port=opts["port"],
            log_level="warning",
            ws_per_message_deflate=False,  # more CPU per step than the bytes it saves
        )


def server_options(opts: dict) -> dict:
    """``project_envserver_app``'s session limits and refresh interval: the ``ENVSERVER_*``
    settings, each overridden by its flag when given."""
    options = envserver_options(settings)
    for name in ("max_sessions", "idle_timeout", "max_lifetime"):
        if opts.get(name) is not None:
            if not (opts[name] > 0 and math.isfinite(opts[name])):
                raise CommandError(f"--{name.replace('_', '-')} must be positive.")
            options[name] = opts[name]
    if opts.get("refresh") is not None:
        if not (opts["refresh"] >= 0 and math.isfinite(opts["refresh"])):
            raise CommandError("--refresh must be 0 (never) or positive.")
        options["refresh_interval"] = opts["refresh"] or None
    return options
