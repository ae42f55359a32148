"""The serving pages: start from a path (plain and htmx), the server's page (live partial,
log), Stop, the Serve button of a trained model's page; refusals change nothing."""

import pytest
from django.test import Client
from django.utils import timezone

from apps.core.models import JobStatus
from apps.serving.models import ModelServer
from apps.serving.services import model_server_register, model_server_start
from apps.training.models import ModelKind
from tests.conftest import HTMX_HEADERS
from tests.serving.conftest import HUB_MODEL

pytestmark = pytest.mark.django_db


@pytest.fixture
def trained(register_trained):
    return register_trained(ModelKind.FULL, name="coworker")


def test_start_from_a_path_plain_and_htmx(client_for, author, project):
    url = f"/p/{project.slug}/serving/start/"
    response = client_for(author).post(url, {"model_path": HUB_MODEL, "idle_timeout_s": "60"})
    server = ModelServer.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/serving/{server.pk}/"
    assert (server.model_path, server.idle_timeout_s) == (HUB_MODEL, 60)
    htmx = client_for(author).post(url, {"model_path": HUB_MODEL}, **HTMX_HEADERS)
    assert htmx.status_code == 200 and htmx["HX-Redirect"].startswith("/serving/")
    assert ModelServer.objects.latest("pk").idle_timeout_s == 1800


def test_bad_input_rerenders_the_form_and_creates_nothing(client_for, author, project):
    url = f"/p/{project.slug}/serving/start/"
    response = client_for(author).post(url, {"model_path": "--evil"}, **HTMX_HEADERS)
    page = response.content.decode()
    assert response.status_code == 200 and 'id="start-server"' in page
    assert "<html" not in page and "Enter a Hugging Face model id" not in page
    assert "A model id like Qwen/Qwen2.5-0.5B-Instruct" in page
    response = client_for(author).post(url, {"trained_model": "999999"})
    assert "No such trained model in this project." in response.content.decode()
    assert not ModelServer.objects.exists()


def test_refusals(client_for, viewer, outsider, author, project):
    url = f"/p/{project.slug}/serving/start/"
    assert client_for(viewer).post(url, {"model_path": HUB_MODEL}).status_code == 403
    assert client_for(outsider).post(url, {"model_path": HUB_MODEL}).status_code == 404
    assert client_for(author).get(url).status_code == 405
    assert Client().post(url, {"model_path": HUB_MODEL}).status_code == 302  # to sign in
    server = model_server_start(project=project, model_path=HUB_MODEL)
    assert client_for(outsider).get(f"/serving/{server.pk}/").status_code == 404
    assert client_for(viewer).post(f"/serving/{server.pk}/stop/").status_code == 403
    assert client_for(outsider).post(f"/serving/{server.pk}/stop/").status_code == 404
    assert ModelServer.objects.count() == 1
    server.job.refresh_from_db()
    assert server.job.status == JobStatus.PENDING and not server.job.cancel_requested


def test_the_trained_models_serve_button_then_its_page_and_stop(
    client_for, author, viewer, project, trained
):
    page = client_for(author).get(f"/training/{trained.training_job_id}/").content.decode()
    assert 'data-testid="serve-model"' in page
    assert 'data-testid="serve-model"' not in (
        client_for(viewer).get(f"/training/{trained.training_job_id}/").content.decode()
    )
    client_for(author).post(f"/p/{project.slug}/serving/start/", {"trained_model": trained.pk})
    server = ModelServer.objects.get(trained_model=trained)
    server.host, server.port, server.served_model = "127.0.0.1", 9, "/models/run-1/final"
    server.save()
    model_server_register(server=server, now=timezone.now())
    page = client_for(viewer).get(f"/training/{trained.training_job_id}/").content.decode()
    assert f'Served here as <a href="/models/{server.endpoint_id}/">served-{server.pk}</a>' in page

    detail = client_for(viewer).get(f"/serving/{server.pk}/").content.decode()
    assert 'data-testid="server-endpoint"' in detail and "http://127.0.0.1:9/v1" in detail
    assert 'data-testid="stop-server"' not in detail  # viewers do not stop
    live = client_for(viewer).get(f"/serving/{server.pk}/", **HTMX_HEADERS).content.decode()
    assert live.lstrip().startswith('<div id="server-live"') and 'hx-trigger="every 2s"' in live

    stopped = client_for(author).post(f"/serving/{server.pk}/stop/", **HTMX_HEADERS)
    assert stopped["HX-Redirect"] == f"/serving/{server.pk}/"
    server.job.refresh_from_db()
    assert server.job.cancel_requested


def test_the_list_page(client_for, viewer, project, other_project):
    mine = model_server_start(project=project, model_path=HUB_MODEL)
    model_server_start(project=other_project, model_path="Qwen/Qwen3-0.6B")
    page = client_for(viewer).get(f"/p/{project.slug}/serving/").content.decode()
    assert f'href="/serving/{mine.pk}/"' in page and "Qwen3-0.6B" not in page
    assert 'data-testid="start-form"' not in page  # viewers do not start
