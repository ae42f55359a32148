"""What a trainer reports is data from elsewhere: text that cannot be stored (NUL, lone
surrogates) is kept as U+FFFD, never a database error (PostgreSQL refuses NUL in text)."""

from apps.training.models import TrainingJob
from apps.training.services import training_events_apply, training_job_create
from apps.training.services.reports import training_log_append
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


def test_the_counts_a_finished_event_carries_land_on_the_last_attempt(
    project, author, training_version
):
    """The vision path counts its rows as it collates them: the numbers come at the end."""
    training_job = _job(project, author, training_version)
    training_events_apply(
        training_job=training_job,
        events=[{"type": "started", "resumed_from_step": 0, "excluded_tokens": None}],
    )
    data = {
        "rows": 6,
        "counted_rows": 4,
        "excluded_tokens": 10,
        "truncated_rows": 2,
        "dropped_rows": 1,
        "dropped": {"image_tokens_over_max_length": 1},
        "unknown": "ignored",
    }
    training_events_apply(
        training_job=training_job,
        events=[{"type": "finished", "status": "succeeded", "message": "ok", "data": data}],
    )
    training_job.refresh_from_db()
    (attempt,) = training_job.artifacts["attempts"]
    expected = {k: v for k, v in data.items() if k != "unknown"}
    assert {k: attempt[k] for k in expected} == expected
    assert "unknown" not in attempt


def test_text_counts_are_what_trl_cuts_and_drops():
    from apps.training.encoding import text_counts

    tokenized = [
        # 10 tokens cut to 8: labels remain
        {"input_ids": [1] * 10, "labels": [-100] * 4 + [5] * 6, "excluded_tokens": 2},
        # cut to 8: its only label is gone, so TRL drops it
        {"input_ids": [1] * 10, "labels": [-100] * 9 + [5], "excluded_tokens": 0},
        {"input_ids": [1] * 5, "labels": [5] * 5, "excluded_tokens": 1},
    ]
    assert text_counts(tokenized, 8) == {
        "rows": 3,
        "counted_rows": 3,
        "excluded_tokens": 3,
        "truncated_rows": 2,
        "dropped_rows": 1,
        "dropped": {"no_trained_tokens": 1},
    }
    assert text_counts(tokenized, None)["truncated_rows"] == 0
