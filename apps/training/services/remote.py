"""The ``openai`` backend: an OpenAI-compatible fine-tuning API does the training.

The worker uploads the version's ``openai`` export (train, and validation when there is
one) with ``purpose="fine-tune"``, creates a supervised fine-tuning job with the mapped
hyperparameters, and records the provider's job id at once — so a worker taken over after a
crash polls the same job instead of creating a second one. It then polls the job and its
events every TRAINING_POLL_S: status into the job row, ``metrics`` events into metric rows,
every event message into the log. ``succeeded`` registers the fine-tuned model id; a cancel
asked here is sent to the provider, whose ``cancelled`` ends the job.
"""

from __future__ import annotations

import io
import logging
import time
from pathlib import Path

from django.conf import settings

from apps.core.exceptions import ApplicationError
from apps.core.services import JobCancelled, JobContext
from apps.llm.transport import describe_openai_error, endpoint_openai_client
from apps.training.models import ModelKind, TrainingJob
from apps.training.services.local import write_split
from apps.training.services.reports import (
    trained_model_register,
    training_events_apply,
    training_log_append,
    training_progress_message,
)

logger = logging.getLogger(__name__)

TERMINAL = ("succeeded", "failed", "cancelled")
MAX_TRANSIENT_FAILURES = 10


def _hyperparameters(hp: dict) -> dict:
    out: dict = {"n_epochs": max(1, round(hp["epochs"]))}
    if hp.get("batch_size"):
        out["batch_size"] = hp["batch_size"]
    if hp.get("learning_rate_multiplier"):
        out["learning_rate_multiplier"] = hp["learning_rate_multiplier"]
    return out


def _call(training_job: TrainingJob, what: str, function, *args, **kwargs):
    try:
        return function(*args, **kwargs)
    except Exception as exc:
        detail, retryable = describe_openai_error(exc, training_job.endpoint)
        if retryable:
            raise _Transient(detail) from exc
        raise ApplicationError(f"The fine-tuning API refused to {what}: {detail}") from exc


class _Transient(Exception):
    pass


def _upload(training_job: TrainingJob, client, split: str) -> tuple[str, str]:
    path = Path(training_job.output_dir) / "data" / f"openai-{split}.jsonl"
    digest = write_split(training_job, "openai", split, path)
    data = path.read_bytes()
    name = f"coworkenv-{training_job.pk}-{split}.jsonl"
    uploaded = _call(
        training_job,
        f"take the {split} file",
        client.files.create,
        file=(name, io.BytesIO(data)),
        purpose="fine-tune",
    )
    return uploaded.id, digest


def _submit(training_job: TrainingJob, client) -> str:
    training_file, train_sha = _upload(training_job, client, "train")
    validation_file, eval_sha = (None, None)
    if training_job.eval_split:
        validation_file, eval_sha = _upload(training_job, client, training_job.eval_split)
    hp = training_job.hyperparameters
    body = {
        "model": training_job.base_model,
        "training_file": training_file,
        "suffix": f"coworkenv-{training_job.pk}"[:64],
        "seed": hp.get("seed", 0),
        "method": {"type": "supervised", "supervised": {"hyperparameters": _hyperparameters(hp)}},
        "metadata": {"coworkenv_training_job": str(training_job.pk)},
    }
    if validation_file:
        body["validation_file"] = validation_file
    remote = _call(training_job, "create the job", client.fine_tuning.jobs.create, **body)
    artifacts = dict(training_job.artifacts or {})
    artifacts.update(
        files={"train": training_file, **({"eval": validation_file} if validation_file else {})},
        data_sha256={"train": train_sha, **({"eval": eval_sha} if eval_sha else {})},
        request=body,
    )
    training_job.external_id = remote.id
    training_job.artifacts = artifacts
    TrainingJob.objects.filter(pk=training_job.pk).update(
        external_id=remote.id, artifacts=artifacts
    )
    training_log_append(
        training_job=training_job, text=f"[coworkenv] created fine-tuning job {remote.id}\n"
    )
    return remote.id


def _new_events(training_job: TrainingJob, client, seen: set[str]) -> list:
    page = _call(
        training_job,
        "list the events",
        client.fine_tuning.jobs.list_events,
        training_job.external_id,
        limit=100,
    )
    fresh = [event for event in page.data if event.id not in seen]
    fresh.sort(key=lambda event: (event.created_at, event.id))
    return fresh


def _apply_events(training_job: TrainingJob, events: list, seen: set[str]) -> None:
    reports = []
    for event in events:
        seen.add(event.id)
        data = event.data if isinstance(event.data, dict) else {}
        if event.type == "metrics" and isinstance(data.get("step"), int):
            reports.append(
                {
                    "type": "metrics",
                    "step": data["step"],
                    "loss": data.get("train_loss"),
                    "eval_loss": data.get("valid_loss")
                    if data.get("valid_loss") is not None
                    else data.get("full_valid_loss"),
                }
            )
        reports.append({"type": "log", "line": f"{event.level}: {event.message}"})
    if reports:
        training_events_apply(training_job=training_job, events=reports)


def openai_training_run(context: JobContext, training_job: TrainingJob) -> str:
    client = endpoint_openai_client(training_job.endpoint) if training_job.endpoint else None
    if client is None:
        raise ApplicationError("The endpoint of this job's fine-tuning API was deleted.")
    transient = 0
    seen: set[str] = set()
    cancel_sent = False
    while True:
        try:
            if not training_job.external_id:
                _submit(training_job, client)
            remote = _call(
                training_job,
                "report the job",
                client.fine_tuning.jobs.retrieve,
                training_job.external_id,
            )
            _apply_events(training_job, _new_events(training_job, client, seen), seen)
            transient = 0
        except _Transient as exc:
            transient += 1
            if transient >= MAX_TRANSIENT_FAILURES:
                raise ApplicationError(f"The fine-tuning API kept failing: {exc}") from None
            training_log_append(training_job=training_job, text=f"[coworkenv] retrying: {exc}\n")
            time.sleep(min(settings.TRAINING_POLL_S * 2**transient, 300))
            continue
        training_job.refresh_from_db(fields=["current_step", "last_loss", "total_steps"])
        status = remote.status
        total = getattr(remote, "trained_tokens", None)
        message = f"{status} · {training_progress_message(training_job)}"
        if status == "succeeded":
            model_id = remote.fine_tuned_model or ""
            if not model_id:
                raise ApplicationError("The provider says succeeded but names no model.")
            trained_model_register(
                training_job=training_job, kind=ModelKind.REMOTE, remote_model=model_id
            )
            TrainingJob.objects.filter(pk=training_job.pk).update(
                artifacts={
                    **training_job.artifacts,
                    "fine_tuned_model": model_id,
                    "trained_tokens": total,
                }
            )
            return f"Fine-tuned model {model_id}."
        if status == "failed":
            error = getattr(remote, "error", None)
            reason = getattr(error, "message", None) or "no reason given"
            raise ApplicationError(f"The provider's job failed: {reason}")
        if status == "cancelled":
            raise JobCancelled
        try:
            context.progress(training_job.current_step, None, message)
        except JobCancelled:
            if not cancel_sent:
                _call(
                    training_job, "cancel", client.fine_tuning.jobs.cancel, training_job.external_id
                )
                training_log_append(training_job=training_job, text="[coworkenv] cancel sent\n")
                cancel_sent = True
        time.sleep(settings.TRAINING_POLL_S)
