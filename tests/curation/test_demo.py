import pytest

from apps.curation.demo import DEMO_TEACHER_BATCH_NAME, demo_teacher_batch
from apps.curation.models import Demonstration
from apps.runs.models import Run, RunBatch

pytestmark = pytest.mark.django_db


def test_demo_teacher_batch_fills_the_review_queue_once(project, admin, sample_environments):
    batch = demo_teacher_batch(project=project, user=admin)
    tasks = sum(env.tasks.count() for env in sample_environments)
    assert (batch.name, batch.role, batch.slot_count) == (DEMO_TEACHER_BATCH_NAME, "teacher", tasks)
    assert batch.job.status == "succeeded"
    demos = Demonstration.objects.filter(project=project)
    assert demos.count() == Run.objects.filter(batch=batch, passed=True).count() == tasks
    assert set(demos.values_list("status", flat=True)) == {"pending"}
    assert demo_teacher_batch(project=project, user=admin) is None
    assert RunBatch.objects.count() == 1
    assert demos.count() == tasks


def test_demo_teacher_batch_needs_the_samples(project, admin):
    assert demo_teacher_batch(project=project, user=admin) is None
    assert Demonstration.objects.count() == 0
