"""The demo workplace that `make run` opens with: a user, a project and real content in every
part of the pipeline — sample and synthesized environments, an oracle batch, a review queue
with work left in it, a built dataset version with every export format offered and a student
batch's rollout groups.

Each step is idempotent (it runs once per project and never overwrites what a person
changed); everything runs in-process, since the worker may not be up yet."""

import json
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from apps.accounts.models import Membership, Project, Role
from apps.capabilities.services import capability_catalogue_seed
from apps.curation.demo import demo_teacher_batch
from apps.curation.models import Demonstration, DemonstrationStatus
from apps.curation.services import demonstration_review
from apps.datasets.models import Dataset
from apps.datasets.services import (
    VersionFilter,
    dataset_create,
    dataset_version_build_job,
    dataset_version_create,
)
from apps.environments.models import EnvironmentStatus
from apps.environments.services import environment_import, environment_validate
from apps.runs.demo import demo_oracle_batch, demo_student_batch
from apps.synthesis.services import synthesis_demo_seed
from apps.workspace.services import project_start

DEMO_USERNAME = "demo"
DEMO_PASSWORD = "cowork-demo"
DEMO_PROJECT_SLUG = "demo"
SAMPLES_DIR = Path(settings.BASE_DIR) / "samples"
# Template environments synthesized for the demo: with the samples, enough distinct train
# tasks for an OpenAI export (10 train rows at least) and a validation split.
DEMO_SYNTHESIZED = 6
# Train-task demonstrations left pending, so that the review queue opens with work.
DEMO_LEFT_FOR_REVIEW = 3
DEMO_DATASET_NAME = "Demo SFT"


@dataclass
class DemoSummary:
    project: Project
    imported: list[str] = field(default_factory=list)
    validated: list[str] = field(default_factory=list)
    dataset_version: object = None


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
            project = project_start(
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
    synthesis_demo_seed(project=project, user=user, count=DEMO_SYNTHESIZED)
    samples = _sample_environment_ids(project)
    # The runs pages open with data: an oracle batch over the samples.
    demo_oracle_batch(project=project, user=user, environments=samples)
    # The review queue opens with work: the oracle as a teacher over every valid environment.
    valid = tuple(
        project.environments.filter(status=EnvironmentStatus.VALID)
        .order_by("id")
        .values_list("pk", flat=True)
    )
    if demo_teacher_batch(project=project, user=user, environments=valid) is not None:
        summary.dataset_version = _seed_dataset(project, user)
    # The rollout groups page opens with groups: a student batch with a group size.
    demo_student_batch(project=project, user=user, environments=samples)
    return summary


def _sample_environment_ids(project) -> tuple[int, ...]:
    names = {json.loads(path.read_text()).get("name") for path in SAMPLES_DIR.glob("*.json")}
    return tuple(
        project.environments.filter(name__in=names).order_by("id").values_list("pk", flat=True)
    )


def _seed_sample_environments(summary: DemoSummary, user) -> None:
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


def _seed_dataset(project, user):
    """Approve the teacher's train-task demonstrations (all but the last few, left for the
    review queue) and build a dataset version from them, once."""
    if Dataset.objects.filter(project=project).exists():
        return None
    pending = list(
        Demonstration.objects.filter(
            project=project, status=DemonstrationStatus.PENDING, split="train"
        ).order_by("id")
    )
    for demonstration in pending[: max(len(pending) - DEMO_LEFT_FOR_REVIEW, 0)]:
        demonstration_review(
            demonstration=demonstration,
            user=user,
            decision=DemonstrationStatus.APPROVED,
            reason_tags=[],
            comment="Approved by the demo seed.",
        )
    dataset = dataset_create(
        project=project,
        name=DEMO_DATASET_NAME,
        description="Approved teacher demonstrations of the demo's train tasks.",
        user=user,
    )
    version = dataset_version_create(
        dataset=dataset,
        user=user,
        filters=VersionFilter(),
        seed=0,
        validation_fraction=0.2,
        enqueue=False,
    )
    dataset_version_build_job(version.job_id)
    version.refresh_from_db()
    return version
