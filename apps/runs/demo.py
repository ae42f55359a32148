"""The demo's run batch: the oracle over every sample task, executed in-process (the worker
may not be up yet when ``make run`` seeds the demo)."""

from apps.core.exceptions import ApplicationError
from apps.runs.models import Executor, PolicyKind, RunBatch, RunRole
from apps.runs.services import (
    BatchSettings,
    TaskSelection,
    run_batch_create,
    run_batch_execute_inline,
)

DEMO_BATCH_NAME = "Oracle · sample environments"


def _oracle_batch(*, project, user, environments, name, role, settings) -> RunBatch | None:
    """The oracle over ``environments``' valid tasks, executed in-process; None when there is
    no environment or no valid task (e.g. the samples failed validation)."""
    if not environments:
        return None
    try:
        batch = run_batch_create(
            project=project,
            user=user,
            name=name,
            policy_kind=PolicyKind.ORACLE,
            role=role,
            selection=TaskSelection(environments=environments),
            settings=settings,
            executor=Executor.INLINE,
        )
    except ApplicationError:
        return None
    return run_batch_execute_inline(batch=batch)


def demo_oracle_batch(*, project, user, environments) -> RunBatch | None:
    """Run the oracle over the sample environments' valid tasks, three trials each, once
    (idempotent: a project that has any batch already is left alone). Returns the batch, or
    None if nothing was run."""
    if RunBatch.objects.filter(project=project).exists():
        return None
    return _oracle_batch(
        project=project,
        user=user,
        environments=tuple(environments),
        name=DEMO_BATCH_NAME,
        role=RunRole.EVAL,
        settings=BatchSettings(trials=3, concurrency=1),
    )


DEMO_STUDENT_BATCH_NAME = "Student (oracle) · rollout groups"
DEMO_GROUP_SIZE = 4


def demo_student_batch(*, project, user, environments) -> RunBatch | None:
    """A student batch with a group size over the first of ``environments``, so that the
    rollout groups page and scored-rollout datasets have something to show, once (a project
    with a student batch already is left alone). The oracle scores every sample alike, so
    its advantages are 0: a model endpoint makes them differ. Returns the batch, or None."""
    if RunBatch.objects.filter(project=project, role=RunRole.STUDENT).exists():
        return None
    return _oracle_batch(
        project=project,
        user=user,
        environments=tuple(environments)[:1],
        name=DEMO_STUDENT_BATCH_NAME,
        role=RunRole.STUDENT,
        settings=BatchSettings(group_size=DEMO_GROUP_SIZE, concurrency=1),
    )
