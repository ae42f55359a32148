"""Writes for run batches and runs. Import from here: ``from apps.runs.services import …``."""

from apps.runs.services.batches import (
    BatchSettings,
    TaskSelection,
    run_batch_cancel,
    run_batch_create,
    run_batch_execute_inline,
    run_batch_resume,
    tasks_select,
)
from apps.runs.services.execution import run_claim, run_execute
from apps.runs.services.groups import rollout_group_score, rollout_groups_score
from apps.runs.services.progress import batch_dispatch, batch_refresh, runs_sweep

__all__ = [
    "BatchSettings",
    "TaskSelection",
    "batch_dispatch",
    "batch_refresh",
    "rollout_group_score",
    "rollout_groups_score",
    "run_batch_cancel",
    "run_batch_create",
    "run_batch_execute_inline",
    "run_batch_resume",
    "run_claim",
    "run_execute",
    "runs_sweep",
    "tasks_select",
]
