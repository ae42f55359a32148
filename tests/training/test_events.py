"""What a trainer reports is data from elsewhere: text that cannot be stored (NUL, lone
surrogates) is kept as U+FFFD, never a database error (PostgreSQL refuses NUL in text)."""

from apps.training.models import TrainingJob
from apps.training.services import training_events_apply, training_job_create
from apps.training.services.jobs import training_log_append
from tests.training.conftest import TINY


def _job(project, author, version) -> TrainingJob:
    return training_job_create(
        project=project,
        user=author,
        dataset_version=version,
        backend="local",
        preset="tiny-cpu",
        hyperparameters=TINY,
    )


def test_unstorable_text_in_events_is_replaced(project, author, training_version):
    training_job = _job(project, author, training_version)
    finished = training_events_apply(
        training_job=training_job,
        events=[
            {"type": "log", "line": "loss\x00 nan \ud800"},
            {"type": "finished", "status": "failed", "message": "CUDA\x00 error"},
        ],
    )
    assert finished["message"] == "CUDA\ufffd error"
    training_job.refresh_from_db()
    assert training_job.log_tail.splitlines()[-2:] == [
        "[coworkenv] loss\ufffd nan \ufffd",
        "[coworkenv] finished: failed CUDA\ufffd error",
    ]


def test_unstorable_text_in_the_trainer_log_is_replaced(project, author, training_version):
    training_job = _job(project, author, training_version)
    training_log_append(training_job=training_job, text="step 1\x00\nstep 2 \udcff\n")
    training_job.refresh_from_db()
    assert training_job.log_tail == "step 1\ufffd\nstep 2 \ufffd\n"
