from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from apps.accounts.models import Membership, Project, Role
from apps.accounts.services import project_create

DEMO_USERNAME = "demo"
DEMO_PASSWORD = "cowork-demo"
DEMO_PROJECT_SLUG = "demo"


class Command(BaseCommand):
    help = "Create (or refresh) the demo user and demo project. Safe to run again."

    def add_arguments(self, parser):
        parser.add_argument("--url", default="http://127.0.0.1:8000/", help="URL to print.")

    def handle(self, *args, url, **options):
        with transaction.atomic():
            user, created = get_user_model().objects.get_or_create(
                username=DEMO_USERNAME, defaults={"email": "demo@coworkenv.test"}
            )
            if created or not user.check_password(DEMO_PASSWORD):
                user.set_password(DEMO_PASSWORD)
                user.save()
            project = Project.objects.filter(slug=DEMO_PROJECT_SLUG).first()
            if project is None:
                project = project_create(
                    name="Demo workplace",
                    slug=DEMO_PROJECT_SLUG,
                    description="Sample environments, runs and datasets to explore CoworkEnv.",
                    creator=user,
                )
            Membership.objects.update_or_create(
                project=project, user=user, defaults={"role": Role.ADMIN}
            )
        self.stdout.write(self.style.SUCCESS("Demo ready."))
        self.stdout.write(f"  URL:      {url}")
        self.stdout.write(f"  User:     {DEMO_USERNAME}")
        self.stdout.write(f"  Password: {DEMO_PASSWORD}")
