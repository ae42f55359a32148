"""GRPO jobs: what a launch must name (environments, split, GRPO hyperparameters), and the
files the local backend hands to ``apps.training.grpo`` (each environment's spec as the
engine reads it)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from apps.core.exceptions import ApplicationError
from apps.environments.models import Environment, EnvironmentStatus, Task, ToolSchema
from apps.environments.specs import environment_spec
from apps.training.hyperparameters import (
    GRPO_PRESETS,
    TEXT_PRESET_MODELS,
    HyperparameterError,
    validate_grpo_hyperparameters,
)
from apps.training.models import Backend, TrainingJob

MAX_ENVIRONMENTS = 20
RUNNABLE = (EnvironmentStatus.VALID, EnvironmentStatus.APPROVED)
RESERVED_TOOLS = ("reset", "get_reward", "reply_to_user")
SPLITS = ("", "train", "eval")


def _field_error(field: str, message: str) -> ApplicationError:
    return ApplicationError(message, {"fields": {field: [message]}})


def grpo_job_check(
    *,
    project,
    backend: str,
    base_model: str,
    preset: str,
    hyperparameters: dict[str, Any] | None,
    environments,
    task_split: str,
) -> dict[str, Any]:
    """The checked inputs of a GRPO launch (base model, hyperparameters, environments) or an
    ``ApplicationError`` naming the field."""
    if backend != Backend.LOCAL:
        raise _field_error(
            "backend", "GRPO runs on the local backend (TRL with the environment in process)."
        )
    if preset and preset not in GRPO_PRESETS:
        raise _field_error(
            "preset", f"Unknown GRPO preset “{preset}”: choose one of {', '.join(GRPO_PRESETS)}."
        )
    base_model = (base_model or "").strip() or (
        GRPO_PRESETS[preset]["base_model"] if preset else ""
    )
    if not base_model:
        raise _field_error("base_model", "Name a base model (a hub id, a local path or a preset).")
    if base_model.startswith("preset:") and base_model not in TEXT_PRESET_MODELS:
        raise _field_error(
            "base_model",
            f"Unknown preset model; the built-in ones are {', '.join(TEXT_PRESET_MODELS)}.",
        )
    try:
        hp = validate_grpo_hyperparameters(hyperparameters or {}, preset=preset)
    except HyperparameterError as exc:
        raise ApplicationError(
            "The hyperparameters are not valid.", {"fields": exc.errors}
        ) from None
    environments = list(environments or [])
    if not environments:
        raise _field_error("environments", "Choose at least one environment to roll out.")
    if len(environments) > MAX_ENVIRONMENTS:
        raise _field_error(
            "environments", f"Choose at most {MAX_ENVIRONMENTS} environments for one job."
        )
    for environment in environments:
        if not isinstance(environment, Environment) or environment.project_id != project.pk:
            raise _field_error("environments", "Choose environments of this project.")
        if environment.status not in RUNNABLE:
            raise _field_error(
                "environments",
                f"“{environment.name}” is {environment.get_status_display().lower()}; "
                "only valid or approved environments can be rolled out.",
            )
    if task_split not in SPLITS:
        raise _field_error("task_split", "The task split is train, eval or every task.")
    tasks = Task.objects.filter(environment__in=environments)
    if task_split:
        tasks = tasks.filter(split=task_split)
    if not tasks.exists():
        raise _field_error(
            "task_split", f"These environments have no {task_split or 'any'} task to train on."
        )
    clash = (
        ToolSchema.objects.filter(environment__in=environments, name__in=RESERVED_TOOLS)
        .select_related("environment")
        .first()
    )
    if clash is not None:
        raise _field_error(
            "environments",
            f"“{clash.environment.name}” has a tool named {clash.name}, which TRL's "
            "environment interface reserves.",
        )
    return {"base_model": base_model, "hyperparameters": hp, "environments": environments}


def grpo_environment_files(training_job: TrainingJob) -> dict[str, Any]:
    """Each environment's spec written under ``output_dir/environments/`` (the engine's
    document, as rebuilt from the rows now), with its sha256: ``{"environments":
    [{"id", "name", "spec_file"}], "spec_sha256": {name: hex}}``."""
    directory = Path(training_job.output_dir) / "environments"
    directory.mkdir(parents=True, exist_ok=True)
    entries, digests = [], {}
    names: set[str] = set()
    for environment in training_job.environments.order_by("pk"):
        # TRL routes rows by name: two environments of the same name get the id appended.
        name = (
            environment.name
            if environment.name not in names
            else f"{environment.name} #{environment.pk}"
        )
        names.add(name)
        data = json.dumps(environment_spec(environment), ensure_ascii=False, indent=1).encode()
        path = directory / f"{environment.pk}.json"
        temp = path.with_name(f".{path.name}.part")
        temp.write_bytes(data)
        temp.replace(path)
        entries.append({"id": environment.pk, "name": name, "spec_file": str(path)})
        digests[name] = hashlib.sha256(data).hexdigest()
    return {"environments": entries, "spec_sha256": digests}
