"""Trained model → endpoint → evaluation: the exact vLLM command, one click creating the
endpoint and the student batches (trained and base) on the eval split of the version's
environments, and the before/after page comparing them on the same tasks."""

import pytest

from apps.llm.models import ModelEndpoint
from apps.llm.services import endpoint_create
from apps.runs.models import RunBatch
from apps.runs.selectors import batch_metrics
from apps.runs.services import run_batch_execute_inline
from apps.training.models import ModelKind, TrainedModel
from apps.training.services import trained_model_register, training_job_create
from apps.training.services.evaluation import before_after, serve_command
from tests.conftest import HTMX_HEADERS
from tests.llm_server import LoopbackLLMServer, Reply

KEY_ENV = "TRAINING_EVAL_API_KEY"


@pytest.fixture
def trained(project, author, training_version):
    training_job = training_job_create(
        project=project,
        user=author,
        dataset_version=training_version,
        backend="local",
        base_model="Qwen/Qwen2.5-0.5B-Instruct",
        name="Qwen 0.5B coworker",
    )
    return trained_model_register(
        training_job=training_job, kind=ModelKind.FULL, path="/models/run-1/final"
    )


def test_serve_commands(trained):
    assert serve_command(trained) == (
        "vllm serve /models/run-1/final --served-model-name "
        f"coworkenv-{trained.training_job_id} --enable-auto-tool-choice "
        "--tool-call-parser hermes --port 8001"
    )
    trained.kind, trained.path = ModelKind.ADAPTER, "/models/run-1/adapter"
    assert serve_command(trained) == (
        "vllm serve Qwen/Qwen2.5-0.5B-Instruct --enable-lora --lora-modules "
        f"coworkenv-{trained.training_job_id}=/models/run-1/adapter --enable-auto-tool-choice "
        "--tool-call-parser hermes --port 8001"
    )
    trained.kind = ModelKind.REMOTE
    assert serve_command(trained) == ""


def test_page_shows_the_command_and_one_click_evaluates_before_and_after(
    client_for, author, viewer, outsider, project, trained, monkeypatch
):
    monkeypatch.setenv(KEY_ENV, "sk-eval")
    with LoopbackLLMServer(api_key="sk-eval") as server:
        # The trained model asks before acting; the base one refuses.
        server.responder = lambda request: (
            Reply.text("Which one do you mean? I have not changed anything yet.")
            if request.body["model"].startswith("coworkenv-")
            else Reply.text("I cannot help with that.")
        )
        base = endpoint_create(
            project=project,
            name="qwen-base",
            base_url=server.base_url,
            model="Qwen/Qwen2.5-0.5B-Instruct",
            api_key_env=KEY_ENV,
        )
        page = client_for(viewer).get(f"/training/{trained.training_job_id}/").content.decode()
        assert f"--served-model-name coworkenv-{trained.training_job_id}" in page
        assert 'data-testid="evaluate-form"' not in page  # viewers do not launch
        url = f"/training/models/{trained.pk}/evaluate/"
        data = {
            "base_url": server.base_url,
            "api_key_env": KEY_ENV,
            "base_endpoint": str(base.pk),
            "trials": "2",
        }
        assert client_for(viewer).post(url, data).status_code == 403
        assert client_for(outsider).post(url, data).status_code == 404
        assert client_for(author).get(url).status_code == 405
        bad = client_for(author).post(url, {**data, "trials": "0"}, **HTMX_HEADERS)
        assert bad.status_code == 200 and bad.content.decode().lstrip().startswith(
            '<div id="evaluate">'
        )
        assert not RunBatch.objects.exists()

        response = client_for(author).post(url, data, **HTMX_HEADERS)
        assert response["HX-Redirect"] == f"/training/models/{trained.pk}/compare/"
        trained.refresh_from_db()
        endpoint = ModelEndpoint.objects.get(name=f"trained-{trained.training_job_id}")
        assert (endpoint.base_url, endpoint.model, endpoint.api_key_env) == (
            server.base_url,
            f"coworkenv-{trained.training_job_id}",
            KEY_ENV,
        )
        assert trained.endpoint == endpoint and trained.base_endpoint == base
        for batch, model in (
            (trained.eval_batch, endpoint.model),
            (trained.base_batch, base.model),
        ):
            assert (batch.role, batch.model, batch.trials) == ("student", model, 2)
            assert batch.selection["split"] == "eval"
            environments = sorted(
                e["id"] for e in trained.training_job.dataset_version.environments
            )
            assert batch.selection["environments"] == environments
        assert trained.eval_batch.task_ids == trained.base_batch.task_ids
        assert len(trained.eval_batch.task_ids) == 3  # one eval task per sample environment

        waiting = client_for(viewer).get(f"/training/models/{trained.pk}/compare/")
        assert 'hx-trigger="every 3s"' in waiting.content.decode()  # still running

        run_batch_execute_inline(batch=trained.eval_batch)
        run_batch_execute_inline(batch=trained.base_batch)

    comparison = before_after(trained)
    before = batch_metrics(batch=trained.base_batch)["summary"]
    after = batch_metrics(batch=trained.eval_batch)["summary"]
    assert comparison["tasks"] == 3 and comparison["k_max"] == 2 and comparison["complete"]
    score = comparison["summary"]["average_score"]
    assert (score["before"], score["after"]) == (before["average_score"], after["average_score"])
    assert score["delta"] == pytest.approx(after["average_score"] - before["average_score"])
    assert [row["k"] for row in comparison["summary"]["pass_at_k"]] == [1, 2]
    capabilities = {row["name"] for row in comparison["by_capability"]}
    assert capabilities == {
        slug
        for batch_row in batch_metrics(batch=trained.eval_batch)["by_capability"]
        for slug in [batch_row["name"]]
    }
    assert [row["name"] for row in comparison["by_category"]] == [
        "completion",
        "communication",
        "safety",
        "robustness",
    ]
    html = client_for(viewer).get(f"/training/models/{trained.pk}/compare/").content.decode()
    assert 'hx-trigger="every 3s"' not in html
    assert 'data-testid="row-score"' in html and "pass^2" in html
    fragment = (
        client_for(viewer)
        .get(f"/training/models/{trained.pk}/compare/", **HTMX_HEADERS)
        .content.decode()
    )
    assert fragment.lstrip().startswith('<div id="comparison"')
    assert client_for(outsider).get(f"/training/models/{trained.pk}/compare/").status_code == 404
    assert TrainedModel.objects.count() == 1


def test_evaluate_uses_the_endpoint_the_model_is_served_at(client_for, author, project, trained):
    url = f"/training/models/{trained.pk}/evaluate/"
    blank = client_for(author).post(url, {"base_url": "", "trials": "1"}, **HTMX_HEADERS)
    assert "Where the trained model is served." in blank.content.decode()
    assert not RunBatch.objects.exists() and not ModelEndpoint.objects.exists()

    served = endpoint_create(
        project=project, name="served-1", base_url="http://127.0.0.1:9/v1", model="m"
    )
    TrainedModel.objects.filter(pk=trained.pk).update(endpoint=served)
    page = client_for(author).get(f"/training/{trained.training_job_id}/").content.decode()
    assert 'name="base_url" value="http' not in page  # nothing to type: it is served
    response = client_for(author).post(url, {"base_url": "", "trials": "1"}, **HTMX_HEADERS)
    assert response["HX-Redirect"] == f"/training/models/{trained.pk}/compare/"
    trained.refresh_from_db()
    assert trained.endpoint == served and trained.eval_batch.endpoint == served
    assert list(ModelEndpoint.objects.all()) == [served]
