from django.core.management.base import BaseCommand

from apps.workspace.demo import DEMO_PASSWORD, DEMO_USERNAME, demo_seed


class Command(BaseCommand):
    help = "Create (or complete) the demo user and demo project. Safe to run again."

    def add_arguments(self, parser):
        parser.add_argument("--url", default="http://127.0.0.1:8000/", help="URL to print.")

    def handle(self, *args, url, **options):
        summary = demo_seed()
        for name in summary.imported:
            state = "valid" if name in summary.validated else "INVALID"
            self.stdout.write(f"  imported sample environment “{name}” ({state})")
        version = summary.dataset_version
        if version is not None:
            self.stdout.write(
                f"  built dataset “{version.dataset.name}” v{version.number}: "
                f"{version.train_rows} train and {version.validation_rows} validation rows"
            )
        self.stdout.write(self.style.SUCCESS(f"Demo ready: project “{summary.project.name}”."))
        self.stdout.write(f"  URL:      {url}")
        self.stdout.write(f"  User:     {DEMO_USERNAME}")
        self.stdout.write(f"  Password: {DEMO_PASSWORD}")
