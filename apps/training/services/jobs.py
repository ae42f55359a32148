"""Training jobs: create, cancel, and record what the trainer reports (metrics, log, status).

The entry point reports events (``apps.training.reporting``); whichever way they arrive —
the local backend tails a file, the command backend's script POSTs them to the callback —
``training_events_apply`` stores them: one metrics row per step (train and eval values of
the same step merged, so a replayed step after a resume overwrites instead of duplicating),
the bounded log tail, the checkpoints, the attempts (with the step each resumed from).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import math
import secrets
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
from apps.core.safeinput import INT32_MAX, storable
from apps.core.services import job_cancel, job_create, job_finish
from apps.datasets.models import (
    DatasetExport,
    DatasetKind,
    ExportStatus,
    VersionStatus,
)
from apps.training.hyperparameters import (
    PRESET_MODELS,
    PRESETS,
    TINY_PRESET_MODEL,
    TINY_VLM_PRESET_MODEL,
    HyperparameterError,
    planned_steps,
    validate_hyperparameters,
)
from apps.training.models import (
    LOG_TAIL_CHARS,
    Backend,
    CommandTemplate,
    ModelKind,
    TemplateKind,
    TrainedModel,
    TrainingJob,
    TrainingMethod,
    TrainingMetric,
)

logger = logging.getLogger(__name__)

JOB_KIND = "training"
METRIC_FIELDS = (
    "epoch",
    "loss",
    "eval_loss",
    "learning_rate",
    "grad_norm",
    "tokens_per_second",
    # GRPO
    "reward",
    "reward_std",
    "group_reward_std",
    "pass_rate",
    "strict_rate",
    "score",
    "kl",
    "completion_length",
)
MAX_CHECKPOINTS_LISTED = 50
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

    Each send is claimed by a conditional UPDATE of ``enqueued_at``, so two sweepers send a
    job once. Command jobs report through their callback and are never re-sent."""
    now = now or timezone.now()
    stale_before = now - training_stale_after()
    never_sent = Q(job__status=JobStatus.PENDING, job__enqueued_at__isnull=True)
    silent = Q(
        job__status=JobStatus.RUNNING,
        backend__in=[Backend.LOCAL, Backend.OPENAI],
    ) & (Q(job__heartbeat_at__isnull=True) | Q(job__heartbeat_at__lt=stale_before))
    candidates = TrainingJob.objects.filter(never_sent | silent).values_list(
        "job_id", "backend", "job__enqueued_at"
    )
    sent = []
    for job_id, backend, enqueued_at in candidates:
        if enqueued_at is not None and enqueued_at >= stale_before:
            continue  # sent again recently: its worker has had no time to take it
        claimed = Job.objects.filter(pk=job_id, enqueued_at=enqueued_at).update(enqueued_at=now)
        if claimed and _send(job_id, backend):
            sent.append(job_id)
        elif claimed:
            Job.objects.filter(pk=job_id, enqueued_at=now).update(enqueued_at=enqueued_at)
    return {"sent": sent}


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
    command_template=None,
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
            method=method,
            backend=Backend.LOCAL,
            base_model=checked["base_model"],
            preset=preset,
            hyperparameters=checked["hyperparameters"],
            total=checked["hyperparameters"]["max_steps"],
            task_split=task_split,
            environments=checked["environments"],
            enqueue=enqueue,
        )
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
    if backend not in Backend.values:
        raise _field_error("backend", f"Unknown backend “{backend}”: use local, openai or command.")
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
    try:
        hp = validate_hyperparameters(hyperparameters or {}, preset=preset)
    except HyperparameterError as exc:
        raise ApplicationError(
            "The hyperparameters are not valid.", {"fields": exc.errors}
        ) from None
    if backend == Backend.OPENAI:
        if endpoint is None or endpoint.project_id != project.pk:
            raise _field_error("endpoint", "Choose this project's endpoint of the fine-tuning API.")
        if base_model in PRESET_MODELS:
            raise _field_error(
                "base_model", "The tiny preset trains locally; name the provider's model."
            )
    else:
        endpoint = None
    if backend == Backend.COMMAND:
        if command_template is None or command_template.project_id != project.pk:
            raise _field_error(
                "command_template", "Choose one of this project's command templates."
            )
    else:
        command_template = None
    if eval_split not in ("", "validation"):
        raise _field_error("eval_split", "The eval split is “validation” or none.")
    if not dataset_version.validation_rows:
        eval_split = ""
    fmt = EXPORT_FORMAT[backend]
    multimodal = DatasetExport.objects.filter(  # a split with images exports a TRL bundle
        version=dataset_version, format="trl", split="train", path__endswith=".zip"
    ).exists()
    # The local trainer writes the images beside its data file and trains a vision-language
    # model on them (apps.training.vision); a command's script gets them too: beside its
    # data files, or as the split's image bundle by URL ({train_bundle_url}).
    if backend != Backend.OPENAI and multimodal and base_model == TINY_PRESET_MODEL:
        raise _field_error(
            "base_model",
            f"This version's demonstrations show images and {TINY_PRESET_MODEL} is a text "
            f"model: train {TINY_VLM_PRESET_MODEL} (preset tiny-vlm-cpu) or a vision-language "
            "model on it.",
        )
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
        enqueue=enqueue,
    )


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
    command_template=None,
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


# --- what the trainer reports ---------------------------------------------------------------


def training_log_append(*, training_job: TrainingJob, text: str) -> None:
    """Append to the bounded log tail (the oldest lines drop out); text that cannot be
    stored (NUL, lone surrogates: a trainer may print anything) is kept as U+FFFD."""
    if not text:
        return
    text = storable(text)
    tail = (training_job.log_tail + text)[-LOG_TAIL_CHARS:]
    if len(training_job.log_tail) + len(text) > LOG_TAIL_CHARS and "\n" in tail:
        tail = tail[tail.index("\n") + 1 :]
    training_job.log_tail = tail
    TrainingJob.objects.filter(pk=training_job.pk).update(log_tail=tail)


def _finite(value) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _apply_metrics(training_job: TrainingJob, event: dict[str, Any]) -> str:
    step = event.get("step")
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise ApplicationError("A metrics event needs a whole, non-negative step.")
    if step > INT32_MAX:
        raise ApplicationError(f"A metrics event's step is at most {INT32_MAX}.")
    values = {k: _finite(event.get(k)) for k in METRIC_FIELDS if event.get(k) is not None}
    values = {k: v for k, v in values.items() if v is not None}
    metric, created = TrainingMetric.objects.get_or_create(
        training_job=training_job, step=step, defaults=values
    )
    if not created and values:
        for key, value in values.items():
            setattr(metric, key, value)
        metric.save(update_fields=[*values, "recorded_at"])
    fields: dict[str, Any] = {"current_step": step}
    training_job.current_step = step
    if values.get("loss") is not None:
        training_job.last_loss = fields["last_loss"] = values["loss"]
    if values.get("reward") is not None:
        training_job.last_reward = fields["last_reward"] = values["reward"]
    TrainingJob.objects.filter(pk=training_job.pk).update(**fields)
    parts = [f"step {step}"]
    parts += [
        f"{k} {values[k]:.4g}"
        for k in ("loss", "eval_loss", "learning_rate", "reward", "pass_rate", "kl")
        if k in values
    ]
    return " · ".join(parts)


@transaction.atomic
def training_events_apply(
    *, training_job: TrainingJob, events: list[dict[str, Any]]
) -> dict | None:
    """Store a batch of reported events; returns the ``finished`` event if there was one.
    The trainer's text (log lines, messages, paths) is data from elsewhere: a NUL or a lone
    surrogate in it is kept as U+FFFD, never a database error. All or nothing: an event out
    of shape (ApplicationError) saves none of the batch."""
    events = storable(events)
    finished = None
    artifacts = dict(training_job.artifacts or {})
    lines: list[str] = []
    changed = False
    for event in events:
        if not isinstance(event, dict):
            raise ApplicationError("Each event is an object with a type.")
        kind = event.get("type")
        if kind == "metrics":
            lines.append(_apply_metrics(training_job, event))
        elif kind == "started":
            resumed = event.get("resumed_from_step") or 0
            attempts = artifacts.setdefault("attempts", [])
            attempts.append(
                {
                    "resumed_from_step": resumed,
                    "data_sha256": event.get("data_sha256") or {},
                    "processes": event.get("processes"),
                    "excluded_tokens": event.get("excluded_tokens"),
                    "truncated_rows": event.get("truncated_rows"),
                    "dropped_rows": event.get("dropped_rows"),
                    "at": timezone.now().isoformat(),
                }
            )
            artifacts["trained_on_sha256"] = event.get("data_sha256") or {}
            total = event.get("total_steps")
            if isinstance(total, int) and total > INT32_MAX:
                raise ApplicationError(f"total_steps is at most {INT32_MAX}.")
            if isinstance(total, int) and total > 0 and total != training_job.total_steps:
                training_job.total_steps = total
                TrainingJob.objects.filter(pk=training_job.pk).update(total_steps=total)
                Job.objects.filter(pk=training_job.job_id).update(progress_total=total)
            lines.append(
                f"started (resumed from step {resumed})" if resumed else "started from step 0"
            )
            changed = True
        elif kind == "checkpoint":
            listed = [
                c for c in artifacts.get("checkpoints", []) if c.get("step") != event.get("step")
            ]
            listed.append({"step": event.get("step"), "path": str(event.get("path", ""))[:500]})
            artifacts["checkpoints"] = listed[-MAX_CHECKPOINTS_LISTED:]
            lines.append(f"checkpoint at step {event.get('step')}")
            changed = True
        elif kind == "log":
            lines.append(str(event.get("line", ""))[:2000])
        elif kind == "finished":
            if not isinstance(event.get("artifacts") or {}, dict):
                raise ApplicationError("A finished event's artifacts is an object (final, kind).")
            finished = event
            if event.get("artifacts"):
                artifacts["final"] = event["artifacts"]
                changed = True
            if isinstance(event.get("data"), dict) and artifacts.get("attempts"):
                # counted as the rows were trained on (the vision path): the attempt's figures
                artifacts["attempts"][-1].update(_data_counts(event["data"]))
                changed = True
            lines.append(f"finished: {event.get('status')} {event.get('message', '')}".strip())
        else:
            raise ApplicationError(f"Unknown event type “{kind}”.")
    if changed:
        training_job.artifacts = artifacts
        TrainingJob.objects.filter(pk=training_job.pk).update(artifacts=artifacts)
    if lines:
        training_log_append(
            training_job=training_job, text="".join(f"[coworkenv] {line}\n" for line in lines)
        )
    return finished


DATA_COUNTS = ("rows", "counted_rows", "excluded_tokens", "truncated_rows", "dropped_rows")


def _data_counts(data: dict) -> dict:
    counts = {key: data[key] for key in DATA_COUNTS if isinstance(data.get(key), int)}
    dropped = data.get("dropped")
    if isinstance(dropped, dict):
        counts["dropped"] = {
            str(reason)[:100]: n for reason, n in list(dropped.items())[:20] if isinstance(n, int)
        }
    return counts


def training_progress_message(training_job: TrainingJob) -> str:
    total = f" of {training_job.total_steps}" if training_job.total_steps else ""
    loss = f", loss {training_job.last_loss:.4f}" if training_job.last_loss is not None else ""
    if training_job.last_reward is not None:
        loss += f", reward {training_job.last_reward:.4f}"
    return f"Step {training_job.current_step}{total}{loss}"


def trained_model_register(
    *, training_job: TrainingJob, kind: str, path: str = "", remote_model: str = ""
) -> TrainedModel:
    """The model a finished job produced (once per job)."""
    model, _ = TrainedModel.objects.get_or_create(
        training_job=training_job,
        defaults={
            "project_id": training_job.project_id,
            "name": training_job.name,
            "kind": kind,
            "path": path,
            "remote_model": remote_model,
            "base_model": training_job.base_model,
        },
    )
    return model


# --- the command backend's callback -----------------------------------------------------------


def callback_secret_new(training_job: TrainingJob) -> str:
    """A fresh per-job secret; only its sha256 is stored."""
    secret = secrets.token_urlsafe(32)
    training_job.callback_secret_sha256 = hashlib.sha256(secret.encode()).hexdigest()
    TrainingJob.objects.filter(pk=training_job.pk).update(
        callback_secret_sha256=training_job.callback_secret_sha256
    )
    return secret


def callback_secret_matches(training_job: TrainingJob, secret: str) -> bool:
    if not training_job.callback_secret_sha256 or not secret:
        return False
    digest = hashlib.sha256(secret.encode()).hexdigest()
    return hmac.compare_digest(digest, training_job.callback_secret_sha256)


def callback_url(training_job: TrainingJob, name: str = "callback") -> str:
    base = settings.TRAINING_CALLBACK_BASE_URL.rstrip("/")
    return base + reverse(f"api:training-{name}", args=[training_job.pk])


class CallbackGone(ApplicationError):
    """The job is finished (or cancelled): the script should stop."""


def training_callback_receive(*, training_job: TrainingJob, events: list[dict[str, Any]]) -> dict:
    """Events POSTed by a job's own script (the secret was checked by the caller). Returns
    ``{"cancel": bool}``; a finished job refuses further events with ``CallbackGone``."""
    job = Job.objects.get(pk=training_job.job_id)
    if job.status not in (JobStatus.PENDING, JobStatus.RUNNING):
        raise CallbackGone(f"This training job has already {job.status}.", {"cancel": True})
    if not isinstance(events, list) or not events:
        raise ApplicationError('Send {"events": [ … ]} with at least one event.')
    finished = training_events_apply(training_job=training_job, events=events)
    training_job.refresh_from_db(fields=["current_step", "last_loss", "last_reward", "total_steps"])
    now = timezone.now()
    progress = {
        "heartbeat_at": now,
        "message": training_progress_message(training_job),
        "progress_done": min(training_job.current_step, training_job.total_steps or 0),
    }
    if job.status == JobStatus.PENDING:
        progress.update(status=JobStatus.RUNNING, started_at=now)
    Job.objects.filter(pk=job.pk).update(**progress)
    if finished is not None:
        _close_from_report(training_job, finished)
    job.refresh_from_db(fields=["cancel_requested"])
    return {"cancel": job.cancel_requested}


def _close_from_report(training_job: TrainingJob, finished: dict[str, Any]) -> None:
    job = Job.objects.get(pk=training_job.job_id)
    status = finished.get("status")
    message = str(finished.get("message") or "")[:2000]
    if status == "succeeded":
        artifacts = finished.get("artifacts") or {}
        kind = ModelKind.ADAPTER if artifacts.get("kind") == "adapter" else ModelKind.FULL
        trained_model_register(
            training_job=training_job, kind=kind, path=str(artifacts.get("final", ""))[:500]
        )
        job_finish(job=job, status=JobStatus.SUCCEEDED, message=message or "Trained.")
    elif status == "cancelled":
        job_finish(job=job, status=JobStatus.CANCELLED, message=message or "Cancelled.")
    else:
        job_finish(
            job=job, status=JobStatus.FAILED, message=message or "The training script failed."
        )


# --- command templates ------------------------------------------------------------------------


@transaction.atomic
def command_template_create(
    *, project, user=None, name: str, kind: str, template: str
) -> CommandTemplate:
    from apps.training.services.command import check_template

    name = (name or "").strip()
    if CommandTemplate.objects.filter(project=project, name=name).exists():
        raise _field_error("name", "A command template with this name already exists.")
    if kind not in TemplateKind.values:
        raise _field_error("kind", "Choose slurm, skypilot, kubernetes or other.")
    check_template(template)
    command_template = CommandTemplate(
        project=project, name=name, kind=kind, template=template.strip(), created_by=user
    )
    try:
        command_template.full_clean()
    except ValidationError as exc:
        raise ApplicationError(
            "The command template is not valid.", {"fields": exc.message_dict}
        ) from None
    command_template.save()
    return command_template
