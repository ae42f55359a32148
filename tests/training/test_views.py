"""Training pages: list, launch, job page (live partial), cancel, loss-curve overlay,
command templates — roles (outsider 404, viewer 403, author launches), htmx variants, bad
input changes nothing."""

import pytest
from django.test import Client

from apps.core.models import JobStatus
from apps.training.models import TrainingJob
from apps.training.services import training_events_apply, training_job_create
from tests.conftest import HTMX_HEADERS
from tests.training.conftest import TINY


@pytest.fixture
def training_job(project, author, training_version):
    return training_job_create(
        project=project,
        user=author,
        dataset_version=training_version,
        backend="local",
        preset="tiny-cpu",
        hyperparameters=TINY,
        name="Tiny <b>run</b>",
    )


def _launch_data(version, **extra):
    return {
        "dataset_version": str(version.pk),
        "backend": "local",
        "preset": "tiny-cpu",
        "eval_on_validation": "on",
        "max_steps": "12",
        **extra,
    }


def test_list_roles_and_htmx_variant(client_for, viewer, outsider, training_job):
    page = client_for(viewer).get("/p/acme/training/")
    assert page.status_code == 200
    html = page.content.decode()
    assert f'href="/training/{training_job.pk}/"' in html
    assert "Tiny &lt;b&gt;run&lt;/b&gt;" in html  # escaped
    assert "Launch training" not in html  # viewers launch nothing
    fragment = client_for(viewer).get("/p/acme/training/", **HTMX_HEADERS).content.decode()
    assert fragment.lstrip().startswith('<div id="training-rows">')
    assert client_for(outsider).get("/p/acme/training/").status_code == 404
    assert Client().get("/p/acme/training/").status_code == 302  # anonymous
    assert client_for(viewer).post("/p/acme/training/").status_code == 405


def test_author_launches_with_the_preset_and_overrides(client_for, author, training_version):
    client = client_for(author)
    form = client.get("/p/acme/training/new/").content.decode()
    assert "Advanced hyperparameters" in form and "<details" in form
    response = client.post(
        "/p/acme/training/new/", _launch_data(training_version, learning_rate="0.001")
    )
    training_job = TrainingJob.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/training/{training_job.pk}/"
    assert training_job.base_model == "preset:tiny-qwen2"
    assert training_job.backend == "local" and training_job.eval_split == "validation"
    hp = training_job.hyperparameters
    assert (hp["max_steps"], hp["learning_rate"], hp["batch_size"], hp["save_steps"]) == (
        12,
        0.001,
        2,
        10,
    )
    assert training_job.total_steps == training_job.job.progress_total == 12
    assert training_job.job.status == JobStatus.PENDING
    assert training_job.created_by == author
    again = client.post("/p/acme/training/new/", _launch_data(training_version), **HTMX_HEADERS)
    assert again["HX-Redirect"] == f"/training/{TrainingJob.objects.latest('pk').pk}/"


def test_launch_bad_input_rerenders_and_creates_nothing(client_for, author, training_version):
    client = client_for(author)
    bad = client.post(
        "/p/acme/training/new/", _launch_data(training_version, max_steps="0"), **HTMX_HEADERS
    )
    assert bad.status_code == 200
    body = bad.content.decode()
    assert body.lstrip().startswith("<form")
    assert "Use -1 (train by epochs) or a positive count." in body
    missing = client.post("/p/acme/training/new/", _launch_data(training_version, backend="openai"))
    assert missing.status_code == 200
    assert "Choose this project&#x27;s endpoint of the fine-tuning API." in missing.content.decode()
    no_template = client.post(
        "/p/acme/training/new/", _launch_data(training_version, backend="command")
    )
    assert (
        "Choose one of the command templates the operator offers." in no_template.content.decode()
    )
    assert not TrainingJob.objects.exists()


def test_launch_refuses_viewers_outsiders_and_other_projects_versions(
    client_for, viewer, outsider, author, training_version, other_project
):
    assert client_for(viewer).get("/p/acme/training/new/").status_code == 403
    assert (
        client_for(viewer).post("/p/acme/training/new/", _launch_data(training_version)).status_code
        == 403
    )
    assert client_for(outsider).get("/p/acme/training/new/").status_code == 404
    # The outsider's own project cannot train on this project's version.
    response = client_for(outsider).post("/p/other/training/new/", _launch_data(training_version))
    assert response.status_code == 200
    assert "Select a valid choice." in response.content.decode()
    assert not TrainingJob.objects.exists()


def test_job_page_shows_loss_chart_log_and_polls_while_active(
    client_for, viewer, outsider, training_job
):
    training_events_apply(
        training_job=training_job,
        events=[
            {"type": "started", "resumed_from_step": 0, "data_sha256": {"train": "ab" * 32}},
            {"type": "metrics", "step": 1, "loss": 7.25, "learning_rate": 0.003},
            {"type": "metrics", "step": 2, "loss": 6.5, "grad_norm": 1.5},
            {"type": "metrics", "step": 2, "eval_loss": 6.75},
            {"type": "log", "line": "<script>alert(1)</script>"},
        ],
    )
    client = client_for(viewer)
    html = client.get(f"/training/{training_job.pk}/").content.decode()
    assert 'data-testid="loss-chart" data-points="3"' in html
    assert "train loss 6.5" in html and "eval loss 6.75" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert" not in html
    assert 'hx-trigger="every 2s"' in html
    assert "Cancel" not in html.split('data-testid="training-live"')[0]  # viewers cannot
    fragment = client.get(f"/training/{training_job.pk}/", **HTMX_HEADERS).content.decode()
    assert fragment.lstrip().startswith('<div id="training-live"')
    assert "<html" not in fragment and 'data-points="3"' in fragment
    assert client_for(outsider).get(f"/training/{training_job.pk}/").status_code == 404
    assert client.get("/training/999999/").status_code == 404


def test_job_page_prints_rates_in_a_few_significant_digits(client_for, viewer, training_job):
    lr = 0.1 * 3 * 0.001  # 0.00030000000000000003 as a float prints
    hyperparameters = {**training_job.hyperparameters, "learning_rate": lr}
    TrainingJob.objects.filter(pk=training_job.pk).update(hyperparameters=hyperparameters)
    training_events_apply(
        training_job=training_job,
        events=[{"type": "metrics", "step": 1, "loss": 7.25, "learning_rate": lr}],
    )
    html = client_for(viewer).get(f"/training/{training_job.pk}/").content.decode()
    assert repr(lr) == "0.00030000000000000003"
    assert repr(lr) not in html
    assert "learning_rate=0.0003 " in html
    assert '<td class="num">0.0003</td>' in html


def test_the_live_part_reloads_the_page_once_the_job_has_ended(client_for, viewer, training_job):
    poll = {**HTMX_HEADERS, "HTTP_HX_TRIGGER": "training-live"}
    client = client_for(viewer)
    url = f"/training/{training_job.pk}/"
    assert "HX-Refresh" not in client.get(url, **poll)  # still running: swap the part
    training_job.job.status = JobStatus.SUCCEEDED
    training_job.job.save()
    assert client.get(url, **poll)["HX-Refresh"] == "true"  # Cancel gone, the model shown
    assert "HX-Refresh" not in client.get(url, **HTMX_HEADERS)  # only the poll asks


def test_finished_job_page_stops_polling(client_for, viewer, training_job):
    training_job.job.status = JobStatus.SUCCEEDED
    training_job.job.save()
    html = client_for(viewer).get(f"/training/{training_job.pk}/").content.decode()
    assert 'hx-trigger="every 2s"' not in html
    assert 'data-testid="no-metrics"' in html


def test_cancel(client_for, author, viewer, outsider, training_job):
    url = f"/training/{training_job.pk}/cancel/"
    assert client_for(viewer).post(url).status_code == 403
    assert client_for(outsider).post(url).status_code == 404
    assert client_for(author).get(url).status_code == 405
    training_job.job.refresh_from_db()
    assert training_job.job.status == JobStatus.PENDING
    response = client_for(author).post(url, **HTMX_HEADERS)
    assert response["HX-Redirect"] == f"/training/{training_job.pk}/"
    training_job.job.refresh_from_db()
    assert training_job.job.status == JobStatus.CANCELLED
    again = client_for(author).post(url, follow=True)
    assert "This job has already cancelled." in again.content.decode()


def test_overlay_of_several_jobs(client_for, viewer, author, project, training_version, outsider):
    jobs = [
        training_job_create(
            project=project,
            user=author,
            dataset_version=training_version,
            backend="local",
            preset="tiny-cpu",
            name=f"run {i}",
        )
        for i in range(2)
    ]
    for offset, job in enumerate(jobs):
        training_events_apply(
            training_job=job,
            events=[{"type": "metrics", "step": s, "loss": 5.0 - s * 0.1 - offset} for s in (1, 2)],
        )
    url = f"/p/acme/training/compare/?jobs={jobs[0].pk}&jobs={jobs[1].pk}"
    html = client_for(viewer).get(url).content.decode()
    assert html.count('data-testid="loss-line"') == 2
    assert f"#{jobs[0].pk} run 0" in html and f"#{jobs[1].pk} run 1" in html
    fragment = client_for(viewer).get(url, **HTMX_HEADERS).content.decode()
    assert fragment.lstrip().startswith('<section class="panel" id="compare-chart"')
    # Another project's job ids show nothing of it.
    other = client_for(outsider).get(f"/p/other/training/compare/?jobs={jobs[0].pk}")
    assert 'data-testid="loss-line"' not in other.content.decode()


def test_a_dataset_trained_on_is_kept_for_lineage(training_job):
    from apps.core.exceptions import ApplicationError
    from apps.datasets.models import DatasetVersion
    from apps.datasets.services import dataset_delete

    version = training_job.dataset_version
    with pytest.raises(ApplicationError, match="kept for that job's lineage"):
        dataset_delete(dataset=version.dataset)
    assert DatasetVersion.objects.filter(pk=version.pk).exists()


@pytest.mark.parametrize("number", ["\u00b2", "\u0663", "99999999999999999999999"])
@pytest.mark.parametrize(
    "url",
    [
        "/p/acme/training/compare/?jobs={n}&jobs=1",
        "/p/acme/training/new/?version={n}",
        "/training/{n}/",
        "/training/models/{n}/evaluate/",
        "/api/v1/training-jobs/{n}/",
        "/api/v1/training-jobs/{n}/callback/config/",
    ],
)
def test_numbers_in_the_address_are_never_a_server_error(client_for, author, url, number):
    """Unicode digits pass ``str.isdigit()`` but not ``int()``; huge ones pass ``int()`` but
    not a 64-bit column: "no such thing" (or no filter), never a 500."""
    response = client_for(author).get(url.format(n=number))
    assert response.status_code in (200, 404, 405), (url, response.status_code)
