import pytest

from apps.curation.demo import DEMO_TEACHER_BATCH_NAME, demo_teacher_batch
from apps.curation.models import Demonstration
from apps.runs.models import Run, RunBatch

pytestmark = pytest.mark.django_db


def test_demo_teacher_batch_fills_the_review_queue_once(project, admin, sample_environments):
    environments = [env.pk for env in sample_environments]
    batch = demo_teacher_batch(project=project, user=admin, environments=environments)
    tasks = sum(env.tasks.count() for env in sample_environments)
    train_tasks = sum(env.tasks.filter(split="train").count() for env in sample_environments)
    assert (tasks, train_tasks) == (9, 6)
    assert (batch.name, batch.role, batch.slot_count) == (DEMO_TEACHER_BATCH_NAME, "teacher", tasks)
    assert batch.job.status == "succeeded"
    assert Run.objects.filter(batch=batch, passed=True).count() == tasks
    # Only the train tasks' runs are offered for review: eval tasks never become demonstrations.
    demos = Demonstration.objects.filter(project=project)
    assert demos.count() == train_tasks
    assert set(demos.values_list("status", "split")) == {("pending", "train")}
    assert demo_teacher_batch(project=project, user=admin, environments=environments) is None
    assert RunBatch.objects.count() == 1
    assert demos.count() == train_tasks


def test_demo_teacher_batch_needs_environments(project, admin):
    assert demo_teacher_batch(project=project, user=admin, environments=()) is None
    assert Demonstration.objects.count() == 0
