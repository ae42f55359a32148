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


def demo_oracle_batch(*, project, user, environments) -> RunBatch | None:
    """Run the oracle over the sample environments' valid tasks, three trials each, once
    (idempotent: a project that has any batch already is left alone). Returns the batch, or
    None if nothing was run."""
    if RunBatch.objects.filter(project=project).exists():
        return None
    environments = tuple(environments)
    if not environments:
        return None
    try:
        batch = run_batch_create(
            project=project,
            user=user,
            name=DEMO_BATCH_NAME,
            policy_kind=PolicyKind.ORACLE,
            role=RunRole.EVAL,
            selection=TaskSelection(environments=environments),
            settings=BatchSettings(trials=3, concurrency=1),
            executor=Executor.INLINE,
        )
    except ApplicationError:
        return None  # no valid task (e.g. the samples failed validation): nothing to show
    return run_batch_execute_inline(batch=batch)
