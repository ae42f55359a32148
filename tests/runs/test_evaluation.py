"""pass@k, pass^k and the other figures on a batch with known outcomes, by hand."""

from decimal import Decimal

import pytest

from apps.runs.evaluation import DAY_BUCKETS, horizon_stats, task_horizon
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


# --------------------------------------------------------------------------- by horizon


@pytest.mark.parametrize(
    ("turns", "clock", "expected"),
    [
        ([], {}, {"turns": 0, "days": 1}),
        ([{"message": "a"}], {"start": "2026-03-02T09:00:00Z"}, {"turns": 1, "days": 1}),
        (
            [{"message": "a"}, {"message": "b", "time": "2026-03-02T17:00:00Z"}],
            {"start": "2026-03-02T09:00:00Z"},
            {"turns": 2, "days": 1},
        ),
        (
            # Monday to the next Wednesday: 10 calendar days, both counted.
            [
                {"message": "a", "time": "2026-03-03T09:00:00Z"},
                {"message": "b", "time": "2026-03-05T09:30:00Z"},
                {"message": "c", "time": "2026-03-11T10:00:00Z"},
            ],
            {"start": "2026-03-02T09:00:00Z"},
            {"turns": 3, "days": 10},
        ),
        # No clock: the span of the turn times; a broken time is left out.
        (
            [{"message": "a", "time": "2026-03-03T09:00:00Z"}, {"message": "b", "time": "x"}],
            None,
            {"turns": 2, "days": 1},
        ),
    ],
)
def test_task_horizon_counts_turns_and_calendar_days(turns, clock, expected):
    assert task_horizon(turns, clock) == expected


def _row(task, trial, passed, turns, days, status="succeeded"):
    return {
        "id": task * 10 + trial,
        "task_ref": task,
        "task_key": f"t{task}",
        "status": status,
        "score": 1.0 if passed else 0.25,
        "passed": passed,
        "strict": passed,
        "turns": turns,
        "days": days,
    }


def test_horizon_stats_by_hand():
    """Task 1: 1 turn, 1 day, passes 2 of 2; task 2: 6 turns over 8 days, passes 1 of 2;
    task 3: 10 turns over 12 days, passes 0 of 2; task 4 was deleted (unknown horizon)."""
    rows = [
        _row(1, 0, True, 1, 1),
        _row(1, 1, True, 1, 1),
        _row(2, 0, True, 6, 8),
        _row(2, 1, False, 6, 8),
        _row(3, 0, False, 10, 12),
        _row(3, 1, False, 10, 12),
        _row(4, 0, True, None, None),
        _row(3, 2, False, 10, 12, status="errored"),
    ]
    by_turns = horizon_stats(rows, "turns", k_max=2)
    assert [(r["name"], r["tasks"], r["graded"]) for r in by_turns] == [
        ("1 turn", 1, 2),
        ("5-8 turns", 1, 2),
        ("9+ turns", 1, 2),
        ("(unknown)", 1, 1),
    ]
    scores = [r["average_score"] for r in by_turns]
    assert scores == [1.0, pytest.approx(0.625), 0.25, 1.0]
    # Task 2 (n=2, c=1): pass@1 = 1/2, pass@2 = 1, pass^2 = 1/4.
    assert by_turns[1]["pass_at_k"] == pytest.approx({1: 0.5, 2: 1.0})
    assert by_turns[1]["pass_hat_k"] == pytest.approx({1: 0.5, 2: 0.25})
    assert by_turns[2]["pass_at_k"] == {1: 0.0, 2: 0.0}
    by_days = horizon_stats(rows, "days", k_max=2)
    assert [r["name"] for r in by_days] == ["1 day", "6-10 days", "11+ days", "(unknown)"]
    assert [b for b, _ in DAY_BUCKETS] == ["1 day", "2 days", "3-5 days", "6-10 days", "11+ days"]


def test_batch_metrics_group_by_the_tasks_horizon(known_batch):
    batch, tasks = known_batch
    # Task A becomes a 6-turn project over three days; B and C keep their turns.
    a = tasks[0]
    a.turns = [{"message": f"m{i}", "time": f"2026-03-0{2 + i // 2}T10:00:00Z"} for i in range(6)]
    a.save()
    env = a.environment
    env.clock = {"start": "2026-03-02T09:00:00Z", "step_seconds": 60}
    env.save()
    metrics = batch_metrics(batch=batch)
    short = {len(tasks[1].turns), len(tasks[2].turns)}
    assert max(short) < 5
    by_turns = {r["name"]: r for r in metrics["by_turns"]}
    assert by_turns["5-8 turns"]["tasks"] == 1
    assert by_turns["5-8 turns"]["graded"] == 3
    assert by_turns["5-8 turns"]["pass_at_k"] == pytest.approx({1: 2 / 3, 2: 1.0, 3: 1.0})
    assert task_horizon(a.turns, env.clock) == {"turns": 6, "days": 3}
    days = {t.pk: task_horizon(t.turns, env.clock)["days"] for t in tasks}
    graded = {tasks[0].pk: 3, tasks[1].pk: 3, tasks[2].pk: 2}
    expected: dict[str, int] = {}
    for pk, n in graded.items():
        label = next(b for b, low in reversed(DAY_BUCKETS) if days[pk] >= low)
        expected[label] = expected.get(label, 0) + n
    assert {r["name"]: r["graded"] for r in metrics["by_days"]} == expected
