"""`manage.py experiment --recipe FILE --project SLUG`: start an experiment from a recipe."""

import json
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from apps.accounts.models import Project
from apps.core.exceptions import ApplicationError
from apps.experiments.advance import experiment_advance
from apps.experiments.services import experiment_create


class Command(BaseCommand):
    help = "Start an experiment (the same recipe as the web form and the API)."

    def add_arguments(self, parser):
        parser.add_argument("--recipe", required=True, help="The recipe's JSON file.")
        parser.add_argument("--project", required=True, help="Project slug.")
        parser.add_argument("--user", help="Username recorded as the author (default: none).")
        parser.add_argument(
            "--sync",
            action="store_true",
            help="Work every stage in this process (no worker) as far as it goes.",
        )

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
            recipe = json.loads(Path(options["recipe"]).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise CommandError(f"Cannot read the recipe: {exc}") from None
        try:
            experiment = experiment_create(
                project=project, user=user, recipe=recipe, enqueue=not options["sync"]
            )
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(f"Experiment #{experiment.pk} “{experiment.name}” started.")
        if options["sync"]:
            experiment = experiment_advance(experiment_id=experiment.pk, inline=True)
            for stage in experiment.stages.order_by("position"):
                self.stdout.write(f"{stage.stage:<11} {stage.status:<10} {stage.message}")
            self.stdout.write(f"Experiment: {experiment.status}. {experiment.message}".strip())
