"""python manage.py envserver --project SLUG [--host 127.0.0.1] [--port 8000]"""

from django.core.management.base import BaseCommand, CommandError

from apps.accounts.models import Project
from apps.environments.serving import project_envserver_app


class Command(BaseCommand):
    help = (
        "Serve a project's valid and approved environments over OpenEnv's protocol (HTTP "
        "reset/step/state, WebSocket sessions at /ws, GET /tasks), opened by the API tokens "
        "of the project's members. The catalogue is read at start and every --refresh "
        "seconds."
    )

    def add_arguments(self, parser):
        parser.add_argument("--project", required=True, help="Project slug.")
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--max-sessions", type=int, default=256)
        parser.add_argument(
            "--idle-timeout", type=float, default=600.0, help="Seconds without a reset/step."
        )
        parser.add_argument(
            "--max-lifetime", type=float, default=3600.0, help="Seconds a session may last."
        )
        parser.add_argument(
            "--refresh",
            type=float,
            default=60.0,
            help="Seconds between reads of the catalogue from the database (0: never).",
        )

    def handle(self, *args, **opts):
        project = Project.objects.filter(slug=opts["project"]).first()
        if project is None:
            raise CommandError(f"No project with the slug “{opts['project']}”.")
        for name in ("max_sessions", "idle_timeout", "max_lifetime"):
            if opts[name] <= 0:
                raise CommandError(f"--{name.replace('_', '-')} must be positive.")
        if opts["refresh"] < 0:
            raise CommandError("--refresh must be 0 (never) or positive.")
        try:
            import uvicorn
        except ImportError:
            raise CommandError(
                "The environment server needs the envserver extra: pip install '.[envserver]'."
            ) from None
        try:
            app = project_envserver_app(
                project=project,
                max_sessions=opts["max_sessions"],
                idle_timeout=opts["idle_timeout"],
                max_lifetime=opts["max_lifetime"],
                refresh_interval=opts["refresh"] or None,
            )
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
            app,
            host=opts["host"],
            port=opts["port"],
            log_level="warning",
            ws_per_message_deflate=False,  # more CPU per step than the bytes it saves
        )
