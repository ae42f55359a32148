"""Training API: create, list, retrieve with metrics, cancel, artifacts — roles, bad input,
other projects' ids."""

import pytest

from apps.core.models import JobStatus
from apps.training.models import TrainingJob
from apps.training.services import training_events_apply, training_job_create
from tests.training.conftest import TINY


@pytest.fixture
def body(training_version):
    return {
        "dataset": training_version.dataset_id,
        "version": training_version.number,
        "backend": "local",
        "preset": "tiny-cpu",
        "hyperparameters": {"max_steps": 12, "learning_rate": 0.002},
    }


def test_create_and_retrieve(api_client_for, author, viewer, project, body):
    created = api_client_for(author).post(
        f"/api/v1/projects/{project.pk}/training-jobs/", body, format="json"
    )
    assert created.status_code == 201
    data = created.json()
    training_job = TrainingJob.objects.get()
    assert data["id"] == training_job.pk
    assert (data["backend"], data["base_model"], data["eval_split"]) == (
        "local",
        "preset:tiny-qwen2",
        "validation",
    )
    assert data["hyperparameters"]["max_steps"] == 12
    assert data["hyperparameters"]["learning_rate"] == 0.002
    assert data["hyperparameters"]["save_steps"] == 10  # from the preset
    assert data["job"]["status"] == "pending" and data["job"]["progress_total"] == 12
    training_events_apply(
        training_job=training_job,
        events=[
            {"type": "metrics", "step": 1, "loss": 3.5, "learning_rate": 0.002},
            {"type": "metrics", "step": 1, "eval_loss": 3.75},
        ],
    )
    detail = api_client_for(viewer).get(f"/api/v1/training-jobs/{training_job.pk}/").json()
    assert detail["metrics"] == [
        {
            "step": 1,
            "epoch": None,
            "loss": 3.5,
            "eval_loss": 3.75,
            "learning_rate": 0.002,
            "grad_norm": None,
            "tokens_per_second": None,
            "reward": None,
            "reward_std": None,
            "group_reward_std": None,
            "pass_rate": None,
            "strict_rate": None,
            "score": None,
            "kl": None,
            "completion_length": None,
        }
    ]
    assert detail["current_step"] == 1 and detail["last_loss"] == 3.5
    assert detail["trained_model"] is None
    assert "[coworkenv] step 1 · loss 3.5" in detail["log_tail"]
    listed = api_client_for(viewer).get(f"/api/v1/projects/{project.pk}/training-jobs/").json()
    assert [row["id"] for row in listed["results"]] == [training_job.pk]


def test_create_refusals_change_nothing(
    api_client_for, author, viewer, outsider, project, other_project, body
):
    url = f"/api/v1/projects/{project.pk}/training-jobs/"
    assert api_client_for().post(url, body, format="json").status_code == 401
    assert api_client_for(viewer).post(url, body, format="json").status_code == 403
    assert api_client_for(outsider).post(url, body, format="json").status_code == 404
    # The outsider names this project's version from their own project: not found there.
    theirs = api_client_for(outsider).post(
        f"/api/v1/projects/{other_project.pk}/training-jobs/", body, format="json"
    )
    assert theirs.status_code == 400
    assert theirs.json()["message"] == "Choose a dataset version of this project."
    bad = api_client_for(author).post(
        url, {**body, "hyperparameters": {"learning_rate": 5, "batch_size": "two"}}, format="json"
    )
    assert bad.status_code == 400
    assert bad.json() == {
        "message": "The hyperparameters are not valid.",
        "details": {
            "fields": {
                "batch_size": ["Enter a whole number."],
                "learning_rate": ["Must be between 1e-09 and 1."],
            }
        },
    }
    unknown = api_client_for(author).post(
        url, {**body, "hyperparameters": {"lr": 0.1}}, format="json"
    )
    assert unknown.json()["details"]["fields"] == {
        "hyperparameters": ["Unknown hyperparameter: lr."]
    }
    openai_without_endpoint = api_client_for(author).post(
        url, {**body, "backend": "openai", "base_model": "gpt-4.1-mini"}, format="json"
    )
    assert openai_without_endpoint.status_code == 400
    assert not TrainingJob.objects.exists()


def test_cancel_and_artifacts(api_client_for, author, viewer, outsider, project, training_version):
    training_job = training_job_create(
        project=project,
        user=author,
        dataset_version=training_version,
        backend="local",
        base_model="preset:tiny-qwen2",
        hyperparameters=TINY,
    )
    url = f"/api/v1/training-jobs/{training_job.pk}/"
    assert api_client_for(outsider).get(url).status_code == 404
    assert api_client_for(viewer).post(url + "cancel/").status_code == 403
    assert api_client_for(outsider).post(url + "cancel/").status_code == 404
    cancelled = api_client_for(author).post(url + "cancel/")
    assert cancelled.status_code == 202
    assert cancelled.json()["job"]["status"] == JobStatus.CANCELLED
    again = api_client_for(author).post(url + "cancel/")
    assert again.status_code == 400
    assert again.json()["message"] == "This job has already cancelled."
    artifacts = api_client_for(viewer).get(url + "artifacts/").json()
    assert artifacts == {
        "output_dir": training_job.output_dir,
        "command": "",
        "external_id": "",
        "artifacts": {},
        "trained_model": None,
    }
    assert api_client_for(outsider).get(url + "artifacts/").status_code == 404


@pytest.mark.parametrize(
    "hyperparameters",
    [
        {"reward": ["score"]},
        {"advantage": {"grpo": 1}},
        {"credit": ["turn"]},
        {"lr_scheduler_type": ["cosine"]},
    ],
    ids=["reward", "advantage", "credit", "lr_scheduler_type"],
)
def test_grpo_choices_given_as_lists_or_objects_are_a_400(
    api_client_for, author, project, sample_environments, hyperparameters
):
    name = next(iter(hyperparameters))
    response = api_client_for(author).post(
        f"/api/v1/projects/{project.pk}/training-jobs/",
        {
            "method": "grpo",
            "environments": [sample_environments[0].pk],
            "backend": "local",
            "preset": "tiny-cpu",
            "hyperparameters": hyperparameters,
        },
        format="json",
    )
    assert response.status_code == 400, response.content[:300]
    assert name in response.json()["details"]["fields"]
    assert not TrainingJob.objects.exists()
