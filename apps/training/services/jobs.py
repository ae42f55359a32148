"""Training jobs: create, cancel, and the sweep that sends lost jobs again and fails silent
command jobs (what the trainer reports is stored by ``apps.training.services.reports``)."""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from apps.core.exceptions import ApplicationError
from apps.core.models import Job, JobStatus
from apps.core.services import JOBS, job_cancel, job_create, job_finish
from apps.datasets.models import (
    DatasetExport,
    DatasetKind,
    ExportStatus,
    VersionStatus,
)
from apps.training.command_templates import command_template_get
from apps.training.hyperparameters import (
    PRESET_MODELS,
    PRESETS,
    TEXT_PRESET_MODELS,
    TINY_VLM_PRESET_MODEL,
    HyperparameterError,
    planned_steps,
    validate_hyperparameters,
)
from apps.training.models import Backend, TrainingJob, TrainingMethod

logger = logging.getLogger(__name__)

JOB_KIND = "training"
EXPORT_FORMAT = {Backend.LOCAL: "trl", Backend.COMMAND: "trl", Backend.OPENAI: "openai"}


def training_stale_after() -> timedelta:
    return timedelta(seconds=settings.TRAINING_STALE_S)


def training_queue(backend: str) -> str:
    """Local training needs the GPU node; the others only talk to a remote service."""
    return "gpu" if backend == Backend.LOCAL else "llm"


def _send(job_id: int, backend: str) -> bool:
    """Send the job to its backend's queue; a broker that is down is logged, not raised."""
    from apps.training.tasks import run_training_task

    try:
        run_training_task.apply_async((job_id,), queue=training_queue(backend))
    except Exception:
        logger.exception("Could not send training job %s; the sweeper will retry.", job_id)
        return False
    return True


def _enqueue(job_id: int, backend: str) -> None:
    """Launch: send the job and note when. If the broker is down the job stays pending with
    no send time, and the sweeper sends it once the broker is back (``training_jobs_sweep``)."""
    if _send(job_id, backend):
        Job.objects.filter(pk=job_id).update(enqueued_at=timezone.now())


def training_jobs_sweep(*, now=None) -> dict:
    """What Celery beat runs every JOB_SWEEP_EVERY_S for training (the core sweeper skips
    jobs that route their own messages):

    - a pending job whose message never left (the broker was down at launch) is sent;
    - a running local or openai job whose worker went silent for TRAINING_STALE_S is sent
      again: the claim takes it over and local training resumes from its last checkpoint.

    Two sweepers send a job once (``Claimable.sweep``). Command jobs report through their
    callback and are never re-sent; one whose script has not reported for
    TRAINING_COMMAND_SILENT_S is failed (``failed``)."""
    now = now or timezone.now()
    failed = _silent_command_jobs_fail(now)
    candidates = Job.objects.filter(training_job__isnull=False).filter(
        Q(status=JobStatus.PENDING, enqueued_at__isnull=True)
        | Q(status=JobStatus.RUNNING, training_job__backend__in=[Backend.LOCAL, Backend.OPENAI])
    )

    def send(job_id: int) -> bool:
        backend = TrainingJob.objects.filter(job_id=job_id).values_list("backend", flat=True)
        return _send(job_id, backend.get())

    sent = JOBS.sweep(candidates, send=send, now=now, before=now - training_stale_after())
    return {"sent": sent, "failed": failed}


def _silent_command_jobs_fail(now) -> list[int]:
    """Fail the running command jobs whose script has not reported (nor been submitted)
    for TRAINING_COMMAND_SILENT_S; their next report is answered "gone, stop"."""
    silent_s = settings.TRAINING_COMMAND_SILENT_S
    before = now - timedelta(seconds=silent_s)
    silent = Job.objects.filter(
        training_job__backend=Backend.COMMAND, status=JobStatus.RUNNING
    ).filter(
        Q(heartbeat_at__lt=before)
        | Q(heartbeat_at__isnull=True, started_at__lt=before)
        | Q(heartbeat_at__isnull=True, started_at__isnull=True, created_at__lt=before)
    )
    message = (
        f"No report from the training script for more than {silent_s} s "
        "(TRAINING_COMMAND_SILENT_S): failed. Its scheduler may still hold it; cancel it there."
    )
    failed = []
    for job_id in silent.values_list("pk", flat=True):
        # conditional: a report that closes the job meanwhile wins
        if Job.objects.filter(pk=job_id, status=JobStatus.RUNNING).update(
            status=JobStatus.FAILED, message=message, finished_at=now
        ):
            failed.append(job_id)
    return failed


def _field_error(field: str, message: str) -> ApplicationError:
    return ApplicationError(message, {"fields": {field: [message]}})


def _export_ready(version, fmt: str, split: str) -> bool:
    return DatasetExport.objects.filter(
        version=version, format=fmt, split=split, status=ExportStatus.READY
    ).exists()


@transaction.atomic
def training_job_create(
    *,
    project,
    user=None,
    dataset_version=None,
    backend: str,
    base_model: str = "",
    preset: str = "",
    hyperparameters: dict[str, Any] | None = None,
    name: str = "",
    eval_split: str = "validation",
    endpoint=None,
    command_template: str = "",
    command_parameters: dict[str, Any] | None = None,
    method: str = TrainingMethod.SFT,
    environments=(),
    task_split: str = "train",
    enqueue: bool = True,
) -> TrainingJob:
    """A pending training job, queued once the transaction commits (``local`` on the ``gpu``
    queue; ``openai`` and ``command`` on ``llm``). ``sft`` trains on a ready dataset version;
    ``grpo`` rolls out the tasks of ``environments`` (``task_split``: train, eval or "" for
    all) on the local backend. ``enqueue=False`` leaves it for the caller to run in process
    (``training_job_execute``)."""
    if method not in TrainingMethod.values:
        raise _field_error("method", f"Unknown method “{method}”: use sft or grpo.")
    if method == TrainingMethod.GRPO:
        return _grpo_job_create(
            project=project,
            user=user,
            backend=backend,
            base_model=base_model,
            preset=preset,
            hyperparameters=hyperparameters,
            name=name,
            environments=environments,
            task_split=task_split,
            enqueue=enqueue,
        )
    _check_sft_version(project, dataset_version)
    if backend not in Backend.values:
        raise _field_error("backend", f"Unknown backend “{backend}”: use local, openai or command.")
    base_model = _sft_base_model(base_model, preset)
    try:
        hp = validate_hyperparameters(hyperparameters or {}, preset=preset)
    except HyperparameterError as exc:
        raise ApplicationError(
            "The hyperparameters are not valid.", {"fields": exc.errors}
        ) from None
    endpoint = _sft_endpoint(project, backend, endpoint, base_model)
    command_template, command_parameters = _command_choice(
        backend, command_template, command_parameters
    )
    if eval_split not in ("", "validation"):
        raise _field_error("eval_split", "The eval split is “validation” or none.")
    if not dataset_version.validation_rows:
        eval_split = ""
    fmt = EXPORT_FORMAT[backend]
    _check_images_trainable(dataset_version, backend, base_model)
    if not _export_ready(dataset_version, fmt, "train"):
        raise _field_error(
            "dataset_version", f"This version has no {fmt} export of its train split to train on."
        )
    if eval_split and not _export_ready(dataset_version, fmt, eval_split):
        eval_split = ""
    total = planned_steps(hp, dataset_version.train_rows, settings.TRAINING_NUM_PROCESSES)
    if backend == Backend.OPENAI:
        total = 0  # the provider decides; its metrics events report steps
    name = (name or "").strip() or f"{base_model.split('/')[-1]} on {dataset_version}"
    return _training_job_save(
        project=project,
        user=user,
        name=name,
        method=method,
        backend=backend,
        base_model=base_model,
        preset=preset,
        hyperparameters=hp,
        total=total,
        dataset_version=dataset_version,
        eval_split=eval_split,
        endpoint=endpoint,
        command_template=command_template,
        command_parameters=command_parameters,
        enqueue=enqueue,
    )


def _grpo_job_create(
    *,
    project,
    user,
    backend,
    base_model,
    preset,
    hyperparameters,
    name,
    environments,
    task_split,
    enqueue,
) -> TrainingJob:
    from apps.training.services.grpo import grpo_job_check

    checked = grpo_job_check(
        project=project,
        backend=backend,
        base_model=base_model,
        preset=preset,
        hyperparameters=hyperparameters,
        environments=environments,
        task_split=task_split,
    )
    name = (name or "").strip() or (
        f"{checked['base_model'].split('/')[-1].removeprefix('preset:')} GRPO on "
        + ", ".join(e.name for e in checked["environments"])
    )
    return _training_job_save(
        project=project,
        user=user,
        name=name,
        method=TrainingMethod.GRPO,
        backend=Backend.LOCAL,
        base_model=checked["base_model"],
        preset=preset,
        hyperparameters=checked["hyperparameters"],
        total=checked["hyperparameters"]["max_steps"],
        task_split=task_split,
        environments=checked["environments"],
        enqueue=enqueue,
    )


def _check_sft_version(project, dataset_version) -> None:
    """A ready version of this project's demonstrations."""
    if dataset_version is None or dataset_version.dataset.project_id != project.pk:
        raise _field_error("dataset_version", "Choose a dataset version of this project.")
    if dataset_version.status != VersionStatus.READY:
        raise _field_error(
            "dataset_version", "This dataset version is not ready (still building or failed)."
        )
    if dataset_version.dataset.kind != DatasetKind.SFT:
        raise _field_error(
            "dataset_version",
            "Supervised training takes a version of demonstrations, not RL prompts or scored "
            "rollouts (for RL, launch a grpo job on environments).",
        )


def _sft_base_model(base_model: str, preset: str) -> str:
    """The named base model, else the preset's; a ``preset:`` name must be a built-in one."""
    if preset and preset not in PRESETS:
        raise _field_error("preset", f"Unknown preset “{preset}”.")
    base_model = (base_model or "").strip() or (PRESETS[preset]["base_model"] if preset else "")
    if not base_model:
        raise _field_error("base_model", "Name a base model (a hub id, a local path or a preset).")
    if base_model.startswith("preset:") and base_model not in PRESET_MODELS:
        raise _field_error(
            "base_model",
            f"Unknown preset model; the built-in ones are {', '.join(PRESET_MODELS)}.",
        )
    return base_model


def _sft_endpoint(project, backend: str, endpoint, base_model: str):
    """The openai backend's endpoint (of this project, for a provider's model); the other
    backends take none."""
    if backend != Backend.OPENAI:
        return None
    if endpoint is None or endpoint.project_id != project.pk:
        raise _field_error("endpoint", "Choose this project's endpoint of the fine-tuning API.")
    if base_model in PRESET_MODELS:
        raise _field_error(
            "base_model", "The tiny preset trains locally; name the provider's model."
        )
    return endpoint


def _check_images_trainable(dataset_version, backend: str, base_model: str) -> None:
    """A version whose demonstrations show images needs a model that sees them."""
    multimodal = DatasetExport.objects.filter(  # a split with images exports a TRL bundle
        version=dataset_version, format="trl", split="train", path__endswith=".zip"
    ).exists()
    # The local trainer writes the images beside its data file and trains a vision-language
    # model on them (apps.training.vision); a command's script gets them too: beside its
    # data files, or as the split's image bundle by URL ({train_bundle_url}).
    if backend != Backend.OPENAI and multimodal and base_model in TEXT_PRESET_MODELS:
        raise _field_error(
            "base_model",
            f"This version's demonstrations show images and {base_model} is a text "
            f"model: train {TINY_VLM_PRESET_MODEL} (preset tiny-vlm-cpu) or a vision-language "
            "model on it.",
        )


def _command_choice(backend: str, name: str, parameters) -> tuple[str, dict]:
    """A command job's operator template (by name) and its parameters, checked; other
    backends take none."""
    if backend != Backend.COMMAND:
        return "", {}
    template = command_template_get(name)
    if template is None:
        raise _field_error(
            "command_template", "Choose one of the command templates the operator offers."
        )
    return template.name, template.clean_parameters(parameters)


def _training_job_save(
    *,
    project,
    user,
    name: str,
    method: str,
    backend: str,
    base_model: str,
    preset: str,
    hyperparameters: dict[str, Any],
    total: int,
    dataset_version=None,
    eval_split: str = "",
    endpoint=None,
    command_template: str = "",
    command_parameters: dict[str, Any] | None = None,
    task_split: str = "",
    environments=(),
    enqueue: bool = True,
) -> TrainingJob:
    job = job_create(
        project=project,
        kind=JOB_KIND,
        title=f"Training “{name}”"[:200],
        started_by=user,
        params={"backend": backend, "base_model": base_model},
        total=total,
        enqueue=(lambda job_id: _enqueue(job_id, backend)) if enqueue else None,
    )
    training_job = TrainingJob(
        project=project,
        job=job,
        name=name[:200],
        dataset_version=dataset_version,
        eval_split=eval_split,
        method=method,
        backend=backend,
        base_model=base_model,
        preset=preset,
        hyperparameters=hyperparameters,
        endpoint=endpoint,
        command_template=command_template,
        command_parameters=command_parameters or {},
        task_split=task_split,
        total_steps=total,
        created_by=user,
    )
    try:
        training_job.full_clean(exclude=["job"])
    except ValidationError as exc:
        raise ApplicationError(
            "The training job is not valid.", {"fields": exc.message_dict}
        ) from None
    training_job.save()
    if environments:
        training_job.environments.set(environments)
    training_job.output_dir = str(
        Path(settings.TRAINING_ROOT) / str(project.pk) / str(training_job.pk)
    )
    training_job.save(update_fields=["output_dir"])
    job.result = {
        "links": [{"label": f"Open “{training_job.name}”", "url": training_job_url(training_job)}],
        "training_job": training_job.pk,
    }
    job.save(update_fields=["result"])
    return training_job


def training_job_url(training_job: TrainingJob) -> str:
    return reverse("training:detail", args=[training_job.pk])


def training_job_cancel(*, training_job: TrainingJob) -> TrainingJob:
    """Ask a job to stop. Local: the supervising worker kills the process group at its next
    look; openai: the provider's job is cancelled at the next poll; command: the job ends now,
    and the script's next report is answered with ``cancel`` (it stops)."""
    job_cancel(job=training_job.job)
    if training_job.backend == Backend.COMMAND and training_job.job.status == JobStatus.RUNNING:
        job_finish(job=training_job.job, status=JobStatus.CANCELLED, message="Cancelled.")
    training_job.job.refresh_from_db()
    return training_job
