"""pass@k, pass^k and the other figures on a batch with known outcomes, by hand."""

from decimal import Decimal

import pytest

from apps.runs.models import Executor, Run, RunStatus
from apps.runs.selectors import batch_metrics
from apps.runs.services import BatchSettings, TaskSelection, batch_refresh, run_batch_create

pytestmark = pytest.mark.django_db


def verdict(grader, status, category="completion"):
    return {"grader_id": grader, "category": category, "weight": 1, "status": status}


@pytest.fixture
def known_batch(project, author, sample_environments):
    """Tasks A, B, C, 3 trials each. A passes 2 of 3, B 1 of 3; C passes trials 0 and 1 and its
    trial 2 errored on every one of its 2 attempts (so it counts nowhere)."""
    env = sample_environments[0]
    tasks = list(env.tasks.order_by("position", "id")[:3])
    batch = run_batch_create(
        project=project,
        user=author,
        selection=TaskSelection(environments=(env.pk,)),
        settings=BatchSettings(trials=3, max_attempts=2),
        executor=Executor.INLINE,
    )
    outcomes = {tasks[0].pk: [True, True, False], tasks[1].pk: [False, True, False]}
    for run in Run.objects.filter(batch=batch):
        if run.task_ref in outcomes:
            passed = outcomes[run.task_ref][run.trial]
            run.status = RunStatus.SUCCEEDED
            run.passed, run.strict = passed, passed
            run.score = 1.0 if passed else 0.5
            run.verdicts = [verdict("main", "passed" if passed else "failed")]
        elif run.task_ref == tasks[2].pk:
            if run.trial < 2:
                run.status, run.passed, run.strict, run.score = RunStatus.SUCCEEDED, True, True, 1
                run.verdicts = [verdict("main", "passed"), verdict("safe", "passed", "safety")]
            else:
                run.status, run.retryable, run.error = RunStatus.ERRORED, True, "LLM down"
        else:
            run.status = RunStatus.CANCELLED
        run.save()
    errored = Run.objects.get(batch=batch, task_ref=tasks[2].pk, trial=2)
    errored.pk = None
    errored.attempt = 2
    errored.save()
    Run.objects.filter(batch=batch).exclude(task_ref__in=[t.pk for t in tasks]).delete()
    batch.task_ids = [t.pk for t in tasks]
    batch.save()
    batch_refresh(batch=batch)
    return batch, tasks


def test_pass_at_k_and_pass_hat_k_match_hand_computation(known_batch):
    batch, _ = known_batch
    summary = batch_metrics(batch=batch)["summary"]

    # Per task (n, c): A (3, 2), B (3, 1), C (2, 2): C's errored trial is left out.
    assert (summary["graded"], summary["tasks"]) == (8, 3)
    assert summary["pass_at_k"] == pytest.approx({1: 2 / 3, 2: 8 / 9, 3: 1.0})
    # pass@2 of B = 1 - C(2,2)/C(3,2) = 2/3; pass@3 only over A and B (C has 2 trials).
    assert summary["pass_hat_k"] == pytest.approx({1: 2 / 3, 2: 14 / 27, 3: 1 / 6})
    # pass^2 = ((2/3)^2 + (1/3)^2 + 1) / 3 = 14/27; pass^3 = ((2/3)^3 + (1/3)^3) / 2 = 1/6.
    assert summary["pass_rate"] == pytest.approx(5 / 8)
    assert summary["strict_rate"] == pytest.approx(5 / 8)
    assert summary["average_score"] == pytest.approx((5 * 1.0 + 3 * 0.5) / 8)


def test_errored_trials_are_not_failures(known_batch):
    batch, tasks = known_batch
    metrics = batch_metrics(batch=batch)
    assert metrics["counts"]["errored"] == 2
    assert metrics["counts"]["retried"] == 1
    failing = metrics["failing_graders"]
    assert [(r["task_key"], r["grader_id"], r["failed"], r["total"]) for r in failing] == [
        (tasks[1].key, "main", 2, 3),
        (tasks[0].key, "main", 1, 3),
    ]
    categories = {row["name"]: row for row in metrics["by_category"]}
    assert (categories["completion"]["passed"], categories["completion"]["failed"]) == (5, 3)
    assert categories["safety"]["pass_rate"] == 1.0
    assert categories["robustness"]["pass_rate"] is None
    batch.job.refresh_from_db()
    assert (batch.job.status, batch.job.progress_done) == ("succeeded", 9)
    assert batch.job.message == "8 of 9 trials graded, 5 passed; 1 errored after 2 attempts."
    assert Decimal(0) == sum(r.cost for r in Run.objects.filter(batch=batch))
