"""Teacher runs become demonstrations: the promotion rule, idempotency, promotion by hand."""

import pytest

from apps.core.exceptions import ApplicationError
from apps.curation.models import Demonstration, DemonstrationStatus, DemonstrationVersion
from apps.curation.services import (
    curation_settings_get,
    curation_settings_update,
    demonstration_from_run,
    demonstrations_from_batch,
)
from apps.runs.models import Run, RunRole, RunStatus
from tests.curation.conftest import teacher_batch_run

pytestmark = pytest.mark.django_db


def test_finished_teacher_batch_offers_every_passing_run(teacher_batch, curation_environment):
    runs = list(Run.objects.filter(batch=teacher_batch).order_by("id"))
    demos = list(Demonstration.objects.order_by("id"))
    assert len(runs) == curation_environment.tasks.count() == 3
    assert [d.run_id for d in demos] == [r.pk for r in runs]
    for demo, run in zip(demos, runs, strict=True):
        assert demo.status == DemonstrationStatus.PENDING
        assert (demo.project_id, demo.task_id, demo.environment_id) == (
            run.project_id,
            run.task_id,
            curation_environment.pk,
        )
        assert (demo.task_key, demo.environment_name, demo.run_ref) == (
            run.task_key,
            curation_environment.name,
            run.pk,
        )
        assert demo.split == run.task.split
        assert demo.capability_slugs == run.capabilities
        assert sorted(demo.capabilities.values_list("slug", flat=True)) == sorted(run.capabilities)
        assert (demo.model_name, demo.policy, demo.score) == ("oracle", "oracle", 1.0)
        assert demo.reviews_required == 1
        version = demo.current_version
        assert version.number == 1
        assert version.transcript == run.transcript
        assert version.tools == run.tools
        assert (version.score, version.passed, version.strict) == (1.0, True, True)
        assert version.grading["verdicts"] == run.verdicts
        assert version.environment_revision == curation_environment.revision
        assert version.created_by is None


def test_promotion_is_idempotent(teacher_batch):
    assert Demonstration.objects.count() == 3
    assert demonstrations_from_batch(batch=teacher_batch) == 0
    run = Run.objects.filter(batch=teacher_batch).first()
    first = Demonstration.objects.get(run=run)
    assert demonstration_from_run(run=run) == first
    assert Demonstration.objects.count() == 3
    assert DemonstrationVersion.objects.count() == 3


def test_eval_and_student_batches_are_not_promoted(project, author, curation_environment):
    teacher_batch_run(project, author, curation_environment, role=RunRole.EVAL)
    batch = teacher_batch_run(project, author, curation_environment, role=RunRole.STUDENT)
    assert demonstrations_from_batch(batch=batch) == 0
    assert Demonstration.objects.count() == 0


def test_threshold_and_strict_only(project, author, curation_environment):
    batch = teacher_batch_run(project, author, curation_environment, role=RunRole.EVAL)
    low, strict_fail, good = list(Run.objects.filter(batch=batch).order_by("id"))
    Run.objects.filter(pk=low.pk).update(score=0.5, passed=False, strict=False)
    Run.objects.filter(pk=strict_fail.pk).update(score=0.9, passed=True, strict=False)
    batch.role = RunRole.TEACHER
    batch.save(update_fields=["role"])

    curation_settings_update(
        project=project, pass_threshold=0.8, strict_only=True, reviews_required=2
    )
    assert demonstrations_from_batch(batch=batch) == 1
    assert list(Demonstration.objects.values_list("run_id", "reviews_required")) == [(good.pk, 2)]

    curation_settings_update(
        project=project, pass_threshold=0.8, strict_only=False, reviews_required=1
    )
    assert demonstrations_from_batch(batch=batch) == 1
    assert set(Demonstration.objects.values_list("run_id", flat=True)) == {good.pk, strict_fail.pk}

    curation_settings_update(
        project=project, pass_threshold=0.5, strict_only=False, reviews_required=1
    )
    assert demonstrations_from_batch(batch=batch) == 1
    assert Demonstration.objects.count() == 3


def test_settings_defaults_and_seeded_tags(project):
    settings = curation_settings_get(project=project)
    assert (settings.pass_threshold, settings.strict_only, settings.reviews_required) == (
        0.75,
        False,
        1,
    )
    assert list(project.review_reason_tags.values_list("name", flat=True))[:4] == [
        "wrong tool",
        "hallucinated fact",
        "policy violation",
        "unnatural reply",
    ]


def test_settings_refuse_out_of_range(project):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError):
        curation_settings_update(
            project=project, pass_threshold=1.5, strict_only=False, reviews_required=1
        )
    with pytest.raises(ValidationError):
        curation_settings_update(
            project=project, pass_threshold=0.5, strict_only=False, reviews_required=0
        )
    assert curation_settings_get(project=project).pass_threshold == 0.75


def test_any_graded_run_can_be_promoted_by_hand(project, author, reviewer, curation_environment):
    batch = teacher_batch_run(project, author, curation_environment, role=RunRole.EVAL)
    run = Run.objects.filter(batch=batch).first()
    Run.objects.filter(pk=run.pk).update(score=0.2, passed=False, strict=False)
    run.refresh_from_db()
    demo = demonstration_from_run(run=run, user=reviewer)
    assert (demo.status, demo.promoted_by, demo.score) == ("pending", reviewer, 0.2)
    assert demo.current_version.passed is False


def test_errored_run_cannot_be_promoted(project, author, curation_environment):
    batch = teacher_batch_run(project, author, curation_environment, role=RunRole.EVAL)
    run = Run.objects.filter(batch=batch).first()
    Run.objects.filter(pk=run.pk).update(status=RunStatus.ERRORED)
    run.refresh_from_db()
    with pytest.raises(ApplicationError, match="Only a graded run"):
        demonstration_from_run(run=run)
    assert Demonstration.objects.count() == 0


def test_deleting_the_batch_keeps_the_demonstration(teacher_batch):
    demo = Demonstration.objects.first()
    teacher_batch.delete()
    demo.refresh_from_db()
    assert demo.run_id is None
    assert demo.current_version.transcript


# --------------------------------------------------------------------------- eval tasks


@pytest.fixture
def with_eval_task(project, author):
    """The reference example as written: its third task (notice-moved-dentist) is eval."""
    from tests.curation.conftest import import_valid, spec_document

    return import_valid(project, author, spec_document(eval_tasks=True))


def test_a_teacher_batch_offers_only_its_train_tasks(project, author, with_eval_task):
    batch = teacher_batch_run(project, author, with_eval_task)
    assert Run.objects.filter(batch=batch, passed=True).count() == 3
    demos = Demonstration.objects.order_by("id")
    assert [(d.task_key, d.split) for d in demos] == [
        ("book-q3-review", "train"),
        ("budget-figure-clarify", "train"),
    ]
    assert demonstrations_from_batch(batch=batch) == 0  # the eval run stays a run


def test_an_eval_task_run_cannot_be_promoted_by_hand(project, author, reviewer, with_eval_task):
    batch = teacher_batch_run(project, author, with_eval_task, role=RunRole.EVAL)
    run = Run.objects.get(batch=batch, task_key="notice-moved-dentist")
    with pytest.raises(ApplicationError) as refused:
        demonstration_from_run(run=run, user=reviewer)
    assert refused.value.message == (
        f"Run #{run.pk} is of an eval task (notice-moved-dentist): eval tasks measure models "
        "and never become demonstrations or dataset rows. To train on this task, move it to "
        "the train split in its environment first."
    )
    assert not Demonstration.objects.exists()
    # The task's current split decides: moved to train, the same run can be promoted.
    run.task.split = "train"
    run.task.save(update_fields=["split"])
    run.refresh_from_db()
    assert demonstration_from_run(run=run, user=reviewer).split == "train"


def test_a_run_whose_task_is_gone_goes_by_its_recorded_split(project, author, with_eval_task):
    batch = teacher_batch_run(project, author, with_eval_task, role=RunRole.EVAL)
    run = Run.objects.get(batch=batch, task_key="notice-moved-dentist")
    Run.objects.filter(pk=run.pk).update(task=None)
    run.refresh_from_db()
    with pytest.raises(ApplicationError):
        demonstration_from_run(run=run)
    assert not Demonstration.objects.exists()


def test_eval_task_demonstrations_stay_out_of_the_queue_and_cannot_be_approved(
    project, reviewer, demonstrations
):
    from apps.curation.selectors import pending_count, queue_queryset
    from apps.curation.services import demonstration_review

    first, second, third = demonstrations
    # One recorded as eval (made before the rule), one whose task became eval since.
    Demonstration.objects.filter(pk=first.pk).update(split="eval")
    second.task.split = "eval"
    second.task.save(update_fields=["split"])
    assert list(queue_queryset(project=project)) == [third]
    assert pending_count(project=project) == 1
    for demo in (first, second):
        with pytest.raises(ApplicationError) as refused:
            demonstration_review(demonstration=demo, user=reviewer, decision="approved")
        assert refused.value.message == (
            "This demonstration is of an eval task: eval tasks never enter a dataset, so it "
            "cannot be approved. Reject it, or move the task to the train split first."
        )
    assert set(Demonstration.objects.values_list("status", flat=True)) == {"pending"}
    review = demonstration_review(
        demonstration=first, user=reviewer, decision="rejected", comment="eval task"
    )
    assert review.decision == "rejected"
    first.refresh_from_db()
    assert first.status == DemonstrationStatus.REJECTED


# --------------------------------------------------------------------------- in bulk


def _finished_eval_batch_made_teacher(project, author, environment, *, trials=1):
    """A finished batch whose runs are not promoted yet (made as EVAL, then TEACHER)."""
    batch = teacher_batch_run(project, author, environment, role=RunRole.EVAL, trials=trials)
    batch.role = RunRole.TEACHER
    batch.save(update_fields=["role"])
    return batch


def _queries_of_promotion(batch) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        created = demonstrations_from_batch(batch=batch)
    assert created == Run.objects.filter(batch=batch).count()
    return len(queries)


def test_a_batch_is_promoted_in_a_number_of_queries_independent_of_its_runs(
    project, author, curation_environment
):
    small = _finished_eval_batch_made_teacher(project, author, curation_environment, trials=1)
    big = _finished_eval_batch_made_teacher(project, author, curation_environment, trials=4)
    curation_settings_get(project=project)  # created on first use: not part of the count
    assert Run.objects.filter(batch=big).count() == 12
    assert _queries_of_promotion(small) == _queries_of_promotion(big)
    # Every demonstration is whole: its version 1 and its capability links.
    for demo in Demonstration.objects.filter(run__batch=big).select_related("run"):
        assert demo.current_version.number == 1
        assert demo.current_version.transcript == demo.run.transcript
        assert sorted(demo.capabilities.values_list("slug", flat=True)) == sorted(
            set(demo.run.capabilities)
        )
    assert DemonstrationVersion.objects.count() == Demonstration.objects.count() == 15


def test_a_batch_is_promoted_in_chunks(project, author, curation_environment, monkeypatch):
    from apps.curation.services import demonstrations as module

    monkeypatch.setattr(module, "PROMOTE_CHUNK", 2)
    batch = _finished_eval_batch_made_teacher(project, author, curation_environment, trials=3)
    assert demonstrations_from_batch(batch=batch) == 9
    assert demonstrations_from_batch(batch=batch) == 0
    assert sorted(Demonstration.objects.values_list("run_id", flat=True)) == sorted(
        Run.objects.filter(batch=batch).values_list("pk", flat=True)
    )
    assert all(demo.current_version.number == 1 for demo in Demonstration.objects.all())


def test_a_run_that_does_not_validate_is_refused_alone(
    project, author, curation_environment, caplog
):
    """A run ``full_clean`` refuses (here a blank task key) is refused by hand as before; a
    batch leaves it out, with a warning, and promotes the others."""
    from django.core.exceptions import ValidationError

    batch = _finished_eval_batch_made_teacher(project, author, curation_environment)
    broken, *others = Run.objects.filter(batch=batch).order_by("id")
    Run.objects.filter(pk=broken.pk).update(task_key="")
    broken.refresh_from_db()
    with pytest.raises(ValidationError) as refused:
        demonstration_from_run(run=broken)
    assert "task_key" in refused.value.message_dict
    with caplog.at_level("WARNING"):
        assert demonstrations_from_batch(batch=batch) == 2
    assert f"run {broken.pk} not promoted" in caplog.text
    assert "task_key" in caplog.text
    assert set(Demonstration.objects.values_list("run_id", flat=True)) == {r.pk for r in others}


def test_settings_out_of_range_are_refused_by_both_paths(
    project, author, curation_environment, monkeypatch
):
    from django.core.exceptions import ValidationError

    from apps.curation.models import CurationSettings
    from apps.curation.services import demonstrations as module

    batch = _finished_eval_batch_made_teacher(project, author, curation_environment)
    monkeypatch.setattr(
        module,
        "curation_settings_get",
        lambda project: CurationSettings(project=project, reviews_required=9),
    )
    with pytest.raises(ValidationError):
        demonstration_from_run(run=Run.objects.filter(batch=batch).first())
    assert demonstrations_from_batch(batch=batch) == 0
    assert not Demonstration.objects.exists()


@pytest.mark.parametrize(
    "broken",
    [
        {"status": "lost"},
        {"claimed_by_id": 1, "claim_expires_at": None},
    ],
)
def test_the_batch_path_checks_every_constraint(project, broken):
    """The batch path checks the constraints once per distinct set of the values they read:
    a row with other values is checked again, and refused as ``full_clean`` would."""
    from django.core.exceptions import ValidationError

    from apps.curation.services.demonstrations import _constraints_validate

    checked: set = set()
    fine = Demonstration(project=project, run_ref=1, task_key="t", reviews_required=1)
    _constraints_validate(fine, checked)
    assert checked
    for name, value in broken.items():
        setattr(fine, name, value)
    with pytest.raises(ValidationError):
        _constraints_validate(fine, checked)


def test_runs_promoted_meanwhile_are_left_out(project, author, curation_environment, monkeypatch):
    """Another promotion (by hand here, or a second worker finishing the same batch) takes
    a run between the batch's read and its insert: the batch inserts the others."""
    from apps.curation.services import demonstrations as module

    batch = _finished_eval_batch_made_teacher(project, author, curation_environment)
    first = Run.objects.filter(batch=batch).order_by("id").first()
    validate, insert = module._row_validated, module.demonstrations_insert
    inserts = []

    def promoted_by_hand_after_the_read(run, **kw):
        if run.pk == first.pk:
            assert demonstration_from_run(run=first).run_id == first.pk
        return validate(run, **kw)

    def counted(rows):
        inserts.append(len(rows))
        return insert(rows)

    monkeypatch.setattr(module, "_row_validated", promoted_by_hand_after_the_read)
    monkeypatch.setattr(module, "demonstrations_insert", counted)
    assert demonstrations_from_batch(batch=batch) == 2
    assert inserts == [1, 3, 2]  # the run by hand, the batch's rows, the batch's rows again
    assert Demonstration.objects.count() == DemonstrationVersion.objects.count() == 3


@pytest.mark.django_db(transaction=True)
def test_two_workers_finishing_the_same_batch_promote_each_run_once(
    project, author, curation_environment, monkeypatch
):
    """On PostgreSQL, two threads: both read the same runs, then both insert; one waits
    for the other's commit on the unique run, then leaves those runs out."""
    import threading

    from django.db import connection

    from apps.curation.services import demonstrations as module

    if connection.vendor != "postgresql":
        pytest.skip("needs a database with concurrent writers (DATABASE_URL=postgres://…)")
    batch = _finished_eval_batch_made_teacher(project, author, curation_environment)
    both_read = threading.Barrier(2, timeout=20)
    insert = module.demonstrations_insert
    first_call = threading.local()

    def after_both_read(rows):
        if not getattr(first_call, "done", False):
            first_call.done = True
            both_read.wait()
        return insert(rows)

    monkeypatch.setattr(module, "demonstrations_insert", after_both_read)
    created, errors = [], []

    def worker():
        try:
            created.append(demonstrations_from_batch(batch=batch))
        except Exception as error:
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors
    assert sorted(created) == [0, 3]
    assert Demonstration.objects.count() == DemonstrationVersion.objects.count() == 3


def test_a_promoted_demonstration_holds_plain_values(project, author, curation_environment):
    batch = _finished_eval_batch_made_teacher(project, author, curation_environment)
    demo = demonstration_from_run(run=Run.objects.filter(batch=batch).first())
    assert demo.current_version.note == "The run's transcript as recorded."
    demo.current_version.refresh_from_db()
    assert demo.current_version.note == "The run's transcript as recorded."
