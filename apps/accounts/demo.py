"""The demo workplace that `make run` opens with: a user, a project and real content."""

import json
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from apps.accounts.models import Membership, Project, Role
from apps.accounts.services import project_create
from apps.capabilities.services import capability_catalogue_seed

DEMO_USERNAME = "demo"
DEMO_PASSWORD = "cowork-demo"
DEMO_PROJECT_SLUG = "demo"
SAMPLES_DIR = Path(settings.BASE_DIR) / "samples"


@dataclass
class DemoSummary:
    project: Project
    imported: list[str] = field(default_factory=list)
    validated: list[str] = field(default_factory=list)


def demo_seed() -> DemoSummary:
    """Create the demo user and project and fill them; running it again adds only what is
    missing and never overwrites what a person changed."""
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
        # Before the samples, so that their tasks link to catalogue entries; a demo project
        # made before the catalogue existed gets the missing ones.
        capability_catalogue_seed(project=project, user=user)
    summary = DemoSummary(project=project)
    _seed_sample_environments(summary, user)
    # One small template synthesis job (inline, no worker): its slots, attempts and results.
    from apps.synthesis.services import synthesis_demo_seed

    synthesis_demo_seed(project=project, user=user)
    # The runs pages open with data: an oracle batch over the samples, run in-process.
    from apps.runs.demo import demo_oracle_batch

    demo_oracle_batch(project=project, user=user)
    # The review queue opens with work: a teacher batch whose passing runs await review.
    from apps.curation.demo import demo_teacher_batch

    demo_teacher_batch(project=project, user=user)
    return summary


def _seed_sample_environments(summary: DemoSummary, user) -> None:
    from apps.environments.services import environment_import, environment_validate

    existing = set(summary.project.environments.values_list("name", flat=True))
    for path in sorted(SAMPLES_DIR.glob("*.json")):
        spec = json.loads(path.read_text())
        if spec.get("name") in existing:
            continue
        environment = environment_import(project=summary.project, spec=spec, user=user)
        summary.imported.append(environment.name)
        # Validated inline: the worker may not be running yet when the demo is seeded.
        if environment_validate(environment=environment).valid:
            summary.validated.append(environment.name)
