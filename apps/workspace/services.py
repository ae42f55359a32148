"""What the workspace composes across apps: starting a project, and the follow-up work one
app's outcome asks of another (``settings.FOLLOW_UPS`` names these services, so the lower
app calls them without importing anything above it)."""

from django.db import transaction

from apps.accounts.models import Project
from apps.accounts.services import project_create
from apps.capabilities.services import capability_catalogue_seed
from apps.curation.services import demonstrations_from_batch, regrade_start_if_stale


@transaction.atomic
def project_start(*, name: str, creator, description: str = "", slug: str = "") -> Project:
    """A new project (its creator as admin) with the standard capability catalogue."""
    project = project_create(name=name, creator=creator, description=description, slug=slug)
    capability_catalogue_seed(project=project, user=creator)
    return project


def teacher_batch_finished(*, batch) -> None:
    """A TEACHER batch's job just finished: its passing runs are offered for review.

    Runs in the transaction that finishes the job, so an error rolls the finish back and
    the next refresh (the sweeper's, at the latest) finishes the batch and offers again;
    the promotion is idempotent."""
    demonstrations_from_batch(batch=batch)


def environment_validated(*, environment) -> None:
    """A new revision of ``environment`` was found valid: demonstrations graded on an older
    one are re-graded in a job (flips go back to the review queue). The job row is created
    in the validation's transaction; the jobs sweeper sends it again if its message is
    lost."""
    regrade_start_if_stale(environment=environment)
