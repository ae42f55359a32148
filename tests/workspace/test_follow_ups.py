"""The follow-up work the workspace starts after another app's outcome: offered
demonstrations after a teacher batch, a re-grade job after a validation. A follow-up that
fails is not swallowed: it undoes the outcome it followed, which is then reached again."""

import pytest

from apps.core.models import Job, JobStatus
from apps.curation.models import Demonstration
from apps.environments.models import Grader, ValidationReport
from apps.environments.services import environment_validate, grader_update
from apps.runs.models import RunBatch
from apps.runs.services import batch_refresh
from apps.workspace import services as workspace
from tests.curation.conftest import import_valid, spec_document, teacher_batch_run

pytestmark = pytest.mark.django_db


class Outage(Exception):
    pass


def _fail(**kwargs):
    raise Outage("curation is unavailable")


@pytest.fixture
def environment(project, author):
    return import_valid(project, author, spec_document())


def test_a_finished_teacher_batch_offers_its_passing_runs(project, author, environment):
    batch = teacher_batch_run(project, author, environment)
    assert batch.job.status == JobStatus.SUCCEEDED
    assert Demonstration.objects.filter(run__batch=batch).count() == 3


def test_a_failed_offer_leaves_the_batch_to_finish_again(project, author, environment, monkeypatch):
    monkeypatch.setattr(workspace, "demonstrations_from_batch", _fail)
    with pytest.raises(Outage):
        teacher_batch_run(project, author, environment)
    batch = RunBatch.objects.get()
    assert batch.job.status in {JobStatus.PENDING, JobStatus.RUNNING}  # not finished
    assert not Demonstration.objects.exists()

    monkeypatch.undo()
    assert batch_refresh(batch=batch).status == JobStatus.SUCCEEDED  # the sweeper's call
    assert Demonstration.objects.filter(run__batch=batch).count() == 3


def _edit_a_grader(environment):
    batch = teacher_batch_run(environment.project, environment.created_by, environment)
    assert Demonstration.objects.filter(run__batch=batch).exists()
    grader = Grader.objects.filter(task__environment=environment).first()
    grader_update(grader=grader, data={"weight": 3.0})
    environment.refresh_from_db()
    return environment


def test_a_valid_new_revision_starts_a_regrade(environment):
    environment = _edit_a_grader(environment)
    assert environment_validate(environment=environment).valid
    assert Job.objects.filter(kind="curation.regrade").count() == 1


def test_a_failed_regrade_start_keeps_no_report(environment, monkeypatch):
    environment = _edit_a_grader(environment)
    monkeypatch.setattr(workspace, "regrade_start_if_stale", _fail)
    with pytest.raises(Outage):
        environment_validate(environment=environment)
    # No report, so a redelivered validation job validates the environment again.
    assert not ValidationReport.objects.filter(environment=environment).exists()
    assert not Job.objects.filter(kind="curation.regrade").exists()
