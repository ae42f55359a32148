"""`manage.py synthesize_receipts`: a multimodal environment from the receipts family."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from apps.accounts.models import Project
from apps.core.exceptions import ApplicationError
from apps.synthesis.services.receipts import receipts_environment_create


class Command(BaseCommand):
    help = (
        "Generate an environment whose receipts are images (drawn locally with Pillow), store "
        "the images, import and validate it. Offline: no LLM, no download."
    )

    def add_arguments(self, parser):
        parser.add_argument("--project", required=True, help="Project slug.")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--tasks", type=int, default=3)
        parser.add_argument("--user", help="Username recorded as the creator.")

    def handle(self, *args, **options):
        project = Project.objects.filter(slug=options["project"]).first()
        if project is None:
            raise CommandError(f"No project with the slug {options['project']!r}.")
        user = None
        if options["user"]:
            user = get_user_model().objects.filter(username=options["user"]).first()
            if user is None:
                raise CommandError(f"No user {options['user']!r}.")
        try:
            environment = receipts_environment_create(
                project=project, user=user, seed=options["seed"], tasks=options["tasks"]
            )
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(
            f"{environment.name} (#{environment.pk}): {environment.status}, "
            f"{len(environment.attachments)} attachments."
        )
