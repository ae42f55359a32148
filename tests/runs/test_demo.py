import pytest

from apps.runs.demo import DEMO_BATCH_NAME, demo_oracle_batch
from apps.runs.models import Run, RunBatch, RunStatus

pytestmark = pytest.mark.django_db


def test_demo_batch_runs_the_oracle_over_the_samples_once(project, admin, sample_environments):
    environments = [env.pk for env in sample_environments]
    batch = demo_oracle_batch(project=project, user=admin, environments=environments)

    tasks = sum(env.tasks.count() for env in sample_environments)
    assert (batch.name, batch.trials, batch.slot_count) == (DEMO_BATCH_NAME, 3, tasks * 3)
    assert batch.job.status == "succeeded"
    runs = Run.objects.filter(batch=batch)
    assert runs.count() == tasks * 3
    assert set(runs.values_list("status", "passed", "strict", "score")) == {
        (RunStatus.SUCCEEDED, True, True, 1.0)
    }
    assert demo_oracle_batch(project=project, user=admin, environments=environments) is None
    assert RunBatch.objects.count() == 1


def test_demo_batch_needs_environments(project, admin):
    assert demo_oracle_batch(project=project, user=admin, environments=()) is None
    assert RunBatch.objects.count() == 0
