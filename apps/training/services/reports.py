"""What the trainer reports, and the ``command`` backend's callback.

The entry point reports events (``apps.training.reporting``); whichever way they arrive —
the local backend tails a file, the command backend's script POSTs them to the callback —
``training_events_apply`` stores them: one metrics row per step (train and eval values of
the same step merged, so a replayed step after a resume overwrites instead of duplicating),
the bounded log tail, the checkpoints, the attempts (with the step each resumed from).

Everything a job reports is bounded per job, whoever sends it: the last
MAX_ATTEMPTS_LISTED attempts and MAX_CHECKPOINTS_LISTED checkpoints, metric steps within
the job's own step count (TRAINING_MAX_STEPS when it has none), at most
TRAINING_MAX_METRIC_ROWS metric rows, a final artifact of at most MAX_FINAL_ARTIFACT_BYTES,
a log tail of LOG_TAIL_CHARS. All text passes through ``apps.training.redaction``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import secrets
from typing import Any

from django.conf import settings
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from apps.core.exceptions import ApplicationError
from apps.core.models import Job, JobStatus
from apps.core.safeinput import INT32_MAX, storable
from apps.core.services import job_finish
from apps.training.models import (
    LOG_TAIL_CHARS,
    ModelKind,
    TrainedModel,
    TrainingJob,
    TrainingMetric,
)
from apps.training.redaction import scrub, scrub_json

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
MAX_ATTEMPTS_LISTED = 20
MAX_FINAL_ARTIFACT_BYTES = 16_000


def training_log_append(*, training_job: TrainingJob, text: str) -> None:
    """Append to the bounded log tail (the oldest lines drop out), every known secret
    redacted; text that cannot be stored (NUL, lone surrogates: a trainer may print
    anything) is kept as U+FFFD."""
    if not text:
        return
    text = scrub(storable(text))
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


def step_bound(training_job: TrainingJob) -> int:
    """The highest step a job may report: its own step count with slack (an epoch-based
    plan is an estimate made before the trainer counted its batches), or
    TRAINING_MAX_STEPS for a job whose provider decides."""
    total = training_job.total_steps
    return (
        min(2 * total + 10, settings.TRAINING_MAX_STEPS) if total else settings.TRAINING_MAX_STEPS
    )


def _apply_metrics(training_job: TrainingJob, event: dict[str, Any]) -> str:
    step = event.get("step")
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise ApplicationError("A metrics event needs a whole, non-negative step.")
    bound = step_bound(training_job)
    if step > bound:
        raise ApplicationError(f"A metrics event's step is at most {bound} for this job.")
    values = {k: _finite(event.get(k)) for k in METRIC_FIELDS if event.get(k) is not None}
    values = {k: v for k, v in values.items() if v is not None}
    rows = TrainingMetric.objects.filter(training_job=training_job)
    cap = settings.TRAINING_MAX_METRIC_ROWS
    if not rows.filter(step=step).exists() and rows.count() >= cap:
        raise ApplicationError(f"This job has its {cap} metric rows already.")
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
            lines.append(_apply_started(training_job, artifacts, event))
            changed = True
        elif kind == "checkpoint":
            listed = [
                c for c in artifacts.get("checkpoints", []) if c.get("step") != event.get("step")
            ]
            listed.append(
                {"step": _count(event.get("step")), "path": str(event.get("path", ""))[:500]}
            )
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
                artifacts["final"] = _final_artifacts(event["artifacts"])
                changed = True
            if isinstance(event.get("data"), dict) and artifacts.get("attempts"):
                # counted as the rows were trained on (the vision path): the attempt's figures
                artifacts["attempts"][-1].update(_data_counts(event["data"]))
                changed = True
            lines.append(f"finished: {event.get('status')} {event.get('message', '')}".strip())
        else:
            raise ApplicationError(f"Unknown event type “{kind}”.")
    if changed:
        artifacts = scrub_json(artifacts)
        training_job.artifacts = artifacts
        TrainingJob.objects.filter(pk=training_job.pk).update(artifacts=artifacts)
    if lines:
        training_log_append(
            training_job=training_job, text="".join(f"[coworkenv] {line}\n" for line in lines)
        )
    return finished


def _final_artifacts(value: dict) -> dict:
    if len(json.dumps(value, default=str)) > MAX_FINAL_ARTIFACT_BYTES:
        limit = MAX_FINAL_ARTIFACT_BYTES
        raise ApplicationError(f"A finished event's artifacts are at most {limit} bytes.")
    return value


def _count(value) -> int | None:
    """A whole number a trainer reported (kept when it fits a column), else None."""
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= INT32_MAX
    return value if ok else None


def _digests(value) -> dict[str, str]:
    """A ``{split or environment name: sha256}`` object as reported, bounded (a GRPO job
    rolls out at most 100 environments)."""
    if not isinstance(value, dict):
        return {}
    return {str(k)[:200]: str(v)[:128] for k, v in list(value.items())[:100]}


def _apply_started(training_job: TrainingJob, artifacts: dict, event: dict[str, Any]) -> str:
    """Record an attempt (the last MAX_ATTEMPTS_LISTED are kept, ``attempts_total`` counts
    them all) and the step count the trainer planned (at most TRAINING_MAX_STEPS)."""
    resumed = _count(event.get("resumed_from_step")) or 0
    attempts = artifacts.get("attempts", [])
    attempts.append(
        {
            "resumed_from_step": resumed,
            "data_sha256": _digests(event.get("data_sha256")),
            "processes": _count(event.get("processes")),
            "excluded_tokens": _count(event.get("excluded_tokens")),
            "truncated_rows": _count(event.get("truncated_rows")),
            "dropped_rows": _count(event.get("dropped_rows")),
            "at": timezone.now().isoformat(),
        }
    )
    artifacts["attempts"] = attempts[-MAX_ATTEMPTS_LISTED:]
    artifacts["attempts_total"] = artifacts.get("attempts_total", len(attempts) - 1) + 1
    artifacts["trained_on_sha256"] = _digests(event.get("data_sha256"))
    total = event.get("total_steps")
    if isinstance(total, int) and total > settings.TRAINING_MAX_STEPS:
        raise ApplicationError(f"total_steps is at most {settings.TRAINING_MAX_STEPS}.")
    if isinstance(total, int) and total > 0 and total != training_job.total_steps:
        training_job.total_steps = total
        TrainingJob.objects.filter(pk=training_job.pk).update(total_steps=total)
        Job.objects.filter(pk=training_job.job_id).update(progress_total=total)
    return f"started (resumed from step {resumed})" if resumed else "started from step 0"


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
    message = scrub(str(finished.get("message") or ""))[:2000]
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
