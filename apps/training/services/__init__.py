"""Writes for training. Import from here: ``from apps.training.services import …``."""

from apps.training.services.jobs import (
    JOB_KIND,
    training_job_cancel,
    training_job_create,
    training_job_url,
)
from apps.training.services.reports import (
    CallbackGone,
    callback_secret_matches,
    trained_model_register,
    training_callback_receive,
    training_events_apply,
)
from apps.training.services.run import training_job_execute, training_jobs_recover

__all__ = [
    "JOB_KIND",
    "CallbackGone",
    "callback_secret_matches",
    "trained_model_register",
    "training_callback_receive",
    "training_events_apply",
    "training_job_cancel",
    "training_job_create",
    "training_job_execute",
    "training_job_url",
    "training_jobs_recover",
]
