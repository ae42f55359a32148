"""python manage.py claw_eval_import --project SLUG PATH  (a task directory, a directory of
them, or a .zip/.tar.gz)"""

from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from apps.accounts.models import Project
from apps.core.exceptions import ApplicationError
from apps.environments.services.interop import (
    claw_eval_checks_propose,
    claw_eval_import_directory,
    claw_eval_import_upload,
)
from apps.llm.models import ModelEndpoint


class Command(BaseCommand):
    help = (
        "Import Claw-Eval tasks as draft environments (one per task; nothing from the task "
        "is executed). All or nothing."
    )

    def add_arguments(self, parser):
        parser.add_argument("path")
        parser.add_argument("--project", required=True, help="Project slug.")
        parser.add_argument("--user", help="Username recorded as the creator.")
        parser.add_argument(
            "--propose-checks-with",
            metavar="ENDPOINT",
            help="Name of a model endpoint of the project that proposes each task's checks "
            "from its grader.py (read as text, never run).",
        )

    def handle(self, *args, **opts):
        project = Project.objects.filter(slug=opts["project"]).first()
        if project is None:
            raise CommandError(f"No project {opts['project']!r}.")
        user = None
        if opts["user"]:
            user = get_user_model().objects.filter(username=opts["user"]).first()
            if user is None:
                raise CommandError(f"No user {opts['user']!r}.")
        endpoint = None
        if opts["propose_checks_with"]:
            endpoint = ModelEndpoint.objects.filter(
                project=project, name=opts["propose_checks_with"]
            ).first()
            if endpoint is None:
                raise CommandError(f"No model endpoint {opts['propose_checks_with']!r}.")
        path = Path(opts["path"])
        try:
            if path.is_dir():
                environments = claw_eval_import_directory(project=project, user=user, path=path)
            elif path.is_file():
                environments = claw_eval_import_upload(
                    project=project, user=user, filename=path.name, content=path.read_bytes()
                )
            else:
                raise CommandError(f"{path} does not exist.")
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        for environment in environments:
            if endpoint is not None:
                try:
                    environment = claw_eval_checks_propose(
                        environment=environment, endpoint=endpoint
                    )
                except ApplicationError as exc:
                    self.stderr.write(f"#{environment.pk}: {exc.message}")
            task_id = environment.metadata.get("claw_eval", {}).get("task_id", "")
            self.stdout.write(f"Imported #{environment.pk} {environment.name} (from {task_id})")
