"""The demo's review queue: a TEACHER batch of the oracle over the sample environments, run
in-process, whose passing runs become pending demonstrations (the oracle stands in for a
teacher model so that the demo needs no LLM)."""

from apps.core.exceptions import ApplicationError
from apps.runs.models import Executor, PolicyKind, RunBatch, RunRole
from apps.runs.services import (
    BatchSettings,
    TaskSelection,
    run_batch_create,
    run_batch_execute_inline,
)

DEMO_TEACHER_BATCH_NAME = "Teacher (oracle) · sample environments"


def demo_teacher_batch(*, project, user, environments) -> RunBatch | None:
    """Run the teacher batch once (idempotent: a project that has it already is left alone).
    Finishing it offers every passing run for review. Returns the batch, or None."""
    if RunBatch.objects.filter(project=project, role=RunRole.TEACHER).exists():
        return None
    environments = tuple(environments)
    if not environments:
        return None
    try:
        batch = run_batch_create(
            project=project,
            user=user,
            name=DEMO_TEACHER_BATCH_NAME,
            policy_kind=PolicyKind.ORACLE,
            role=RunRole.TEACHER,
            selection=TaskSelection(environments=environments),
            settings=BatchSettings(trials=1, concurrency=1),
            executor=Executor.INLINE,
        )
    except ApplicationError:
        return None
    return run_batch_execute_inline(batch=batch)
