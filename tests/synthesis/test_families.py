"""A synthesis job may choose the template generator's family (form, API, command):
``receipts`` gives multimodal environments whose images are stored by hash and validated
against the stored files; the default (blank) leaves the choice to the seed as before."""

import pytest
from django.urls import reverse

from apps.core.models import Job, JobStatus
from apps.environments.attachments import attachment_bytes, attachment_storage
from apps.environments.models import EnvironmentStatus
from apps.environments.selectors import environment_spec
from apps.environments.services import environment_validate
from apps.synthesis.models import SlotStatus, SynthesisJob
from apps.synthesis.services import synthesis_run_inline
from tests.conftest import HTMX_HEADERS
from tests.synthesis.test_views import form_data
from tests.workers import WorkerProcess, purge_queues, wait_for

pytestmark = pytest.mark.django_db

RECEIPTS_FORM = {"family": "receipts", "services": [], "horizon": "short"}


def api_body(**overrides):
    data = {
        "capabilities": ["clarify-before-acting"],
        "count": 1,
        "generator": "template",
        "tasks_per_environment": 2,
        "seed": 5,
    }
    data.update(overrides)
    return data


def assert_receipts_environments(synthesis, count):
    slots = list(synthesis.slots.order_by("index"))
    assert [slot.status for slot in slots] == [SlotStatus.VALID] * count, [
        slot.error for slot in slots
    ]
    for slot in slots:
        environment = slot.environment
        assert environment.status == EnvironmentStatus.VALID
        document = environment_spec(environment)
        assert document["metadata"]["family"] == "receipts"
        assert len(document["attachments"]) == synthesis.tasks_per_environment + 2
        for entry in document["attachments"]:
            sha = entry["sha256"]
            assert attachment_storage().exists(f"{sha[:2]}/{sha}")
            assert len(attachment_bytes(sha)) == entry["size"]
        refs = {r["image"] for r in document["services"]["expenses"]["receipts"]}
        assert refs == {f"sha256:{a['sha256']}" for a in document["attachments"]}


# --- service ----------------------------------------------------------------------------


def test_a_receipts_job_stores_the_images_and_its_environments_validate(start_template):
    synthesis = start_template(count=2, seed=40, family="receipts", tasks_per_environment=3)
    assert synthesis.family == "receipts"
    assert "(template, receipts)" in synthesis.job.title
    job = synthesis_run_inline(synthesis=synthesis)
    assert job.status == JobStatus.SUCCEEDED, job.message
    assert_receipts_environments(synthesis, 2)
    # seeds 40 and 41 draw different receipts
    first, second = (slot.environment for slot in synthesis.slots.order_by("index"))
    assert first.attachments != second.attachments
    # and their names tell them apart in every list (the company comes from the seed)
    assert (first.name, second.name) == (
        "Lumen Labs - expense receipts",
        "Riverbend - expense receipts",
    )
    # validated again in the app, against the stored files, it stays valid
    report = environment_validate(environment=first)
    assert report.valid and report.problems == []


def test_the_slot_report_checks_the_stored_files(start_template):
    """The images are validated as stored: a file missing from storage makes the draft
    invalid with the attachment code (here: the storage stores nothing it is given)."""
    storage = attachment_storage()
    synthesis = start_template(count=1, seed=3, family="receipts", tasks_per_environment=1)
    original = storage.save
    storage.save = lambda name, content, **kw: name  # stores nothing
    try:
        synthesis_run_inline(synthesis=synthesis)
    finally:
        storage.save = original
    slot = synthesis.slots.get()
    assert slot.status == SlotStatus.INVALID
    problems = slot.attempts.get().report["problems"]
    assert {p["code"] for p in problems} == {"attachment_content_invalid"}
    assert [p["pointer"] for p in problems] == [f"/attachments/{i}" for i in range(3)]
    assert slot.environment is not None  # kept (invalid) for inspection


def test_a_standard_family_is_forced_and_the_default_is_unchanged(start_template):
    forced = start_template(count=1, seed=8, family="procurement")
    default = start_template(count=1, seed=8)
    assert default.family == ""
    synthesis_run_inline(synthesis=forced)
    synthesis_run_inline(synthesis=default)
    forced_doc = environment_spec(forced.slots.get().environment)
    default_doc = environment_spec(default.slots.get().environment)
    assert forced_doc["metadata"]["family"] == "procurement"
    assert default_doc["metadata"]["family"] != "procurement" or default_doc != forced_doc


@pytest.mark.parametrize(
    ("kwargs", "field", "message"),
    [
        ({"family": "cooking"}, "family", "Unknown family “cooking”"),
        ({"family": "receipts", "services": ["email"]}, "services", "brings its own"),
        ({"family": "receipts", "horizon": "long"}, "horizon", "short tasks only"),
        ({"family": "receipts", "tasks_per_environment": 9}, "tasks_per_environment", "at most 8"),
    ],
)
def test_the_service_refuses_a_bad_family(start_template, kwargs, field, message):
    from apps.core.exceptions import ApplicationError

    with pytest.raises(ApplicationError) as raised:
        start_template(count=1, **kwargs)
    assert message in str(raised.value)
    assert list(raised.value.extra["fields"]) == [field]
    assert SynthesisJob.objects.count() == 0 and Job.objects.count() == 0


# --- form -------------------------------------------------------------------------------


def test_the_form_offers_the_families_and_starts_a_receipts_job(client_for, author, capabilities):
    client = client_for(author)
    page = client.get(reverse("synthesis:create", args=["acme"])).content.decode()
    assert '<option value="receipts">Expense receipts (images to read)</option>' in page
    assert '<option value="" selected>Any (the seed chooses)</option>' in page
    response = client.post(
        reverse("synthesis:create", args=["acme"]), form_data(capabilities, **RECEIPTS_FORM)
    )
    synthesis = SynthesisJob.objects.get()
    assert response.status_code == 302
    assert (synthesis.family, synthesis.services, synthesis.generator) == (
        "receipts",
        [],
        "template",
    )
    detail = client.get(reverse("synthesis:detail", args=[synthesis.pk])).content.decode()
    assert '<dd data-testid="synthesis-family">receipts</dd>' in detail


def test_the_form_leaves_the_family_blank_by_default(client_for, author, capabilities):
    data = form_data(capabilities)
    data.pop("family", None)
    client_for(author).post(reverse("synthesis:create", args=["acme"]), data)
    assert SynthesisJob.objects.get().family == ""


def test_the_form_htmx_starts_a_receipts_job(client_for, author, capabilities):
    response = client_for(author).post(
        reverse("synthesis:create", args=["acme"]),
        form_data(capabilities, **RECEIPTS_FORM),
        **HTMX_HEADERS,
    )
    assert response.status_code == 200
    synthesis = SynthesisJob.objects.get()
    assert response["HX-Redirect"] == reverse("synthesis:detail", args=[synthesis.pk])
    assert synthesis.family == "receipts"


@pytest.mark.parametrize(
    ("overrides", "field", "error"),
    [
        (
            {"family": "cooking"},
            "family",
            "Select a valid choice. cooking is not one of the available choices.",
        ),
        (
            {"family": "receipts", "generator": "llm"},
            "family",
            "A family is chosen for the template generator only.",
        ),
        (
            {"family": "receipts", "services": ["email"]},
            "services",
            "The receipts family brings its own expenses service; choose none.",
        ),
    ],
)
def test_the_form_refuses_a_bad_family_htmx(
    client_for, author, capabilities, overrides, field, error
):
    response = client_for(author).post(
        reverse("synthesis:create", args=["acme"]),
        form_data(capabilities, **{**RECEIPTS_FORM, **overrides}),
        **HTMX_HEADERS,
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith("<form")
    assert f'<ul class="errorlist" id="id_{field}_error"><li>{error}</li></ul>' in html
    assert SynthesisJob.objects.count() == 0


def test_the_form_refuses_a_viewer_and_an_outsider(client_for, viewer, outsider, capabilities):
    url = reverse("synthesis:create", args=["acme"])
    data = form_data(capabilities, **RECEIPTS_FORM)
    assert client_for(viewer).post(url, data).status_code == 403
    assert client_for(outsider).post(url, data, **HTMX_HEADERS).status_code == 404
    assert SynthesisJob.objects.count() == 0


# --- API --------------------------------------------------------------------------------


def test_the_api_starts_a_receipts_job(api_client_for, author, project, catalogue):
    response = api_client_for(author).post(
        f"/api/v1/projects/{project.pk}/synthesis-jobs/", api_body(family="receipts"), format="json"
    )
    assert response.status_code == 201
    assert response.json()["family"] == "receipts"
    synthesis = SynthesisJob.objects.get()
    assert synthesis.family == "receipts"
    default = api_client_for(author).post(
        f"/api/v1/projects/{project.pk}/synthesis-jobs/", api_body(), format="json"
    )
    assert default.json()["family"] == ""


@pytest.mark.parametrize(
    ("overrides", "message", "field"),
    [
        ({"family": "cooking"}, "The request is not valid.", "family"),
        (
            {"family": "receipts", "generator": "llm", "endpoint": None},
            "The LLM generator needs a model endpoint.",
            "endpoint",
        ),
        (
            {"family": "receipts", "tasks_per_environment": 12},
            "The receipts family has at most 8 tasks per environment.",
            "tasks_per_environment",
        ),
        (
            {"family": "receipts", "horizon": "medium"},
            "The receipts family has short tasks only.",
            "horizon",
        ),
    ],
)
def test_the_api_refuses_a_bad_family(
    api_client_for, author, project, catalogue, overrides, message, field
):
    response = api_client_for(author).post(
        f"/api/v1/projects/{project.pk}/synthesis-jobs/", api_body(**overrides), format="json"
    )
    assert response.status_code == 400
    body = response.json()
    assert body["message"] == message
    assert field in str(body)
    assert SynthesisJob.objects.count() == 0


def test_the_api_refuses_a_family_for_the_llm_generator(
    api_client_for, author, project, catalogue, endpoint
):
    response = api_client_for(author).post(
        f"/api/v1/projects/{project.pk}/synthesis-jobs/",
        api_body(family="support-desk", generator="llm", endpoint=endpoint.pk),
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["message"] == "A family is chosen for the template generator only."


def test_the_api_refuses_a_viewer_an_outsider_and_anonymous(
    api_client_for, viewer, outsider, project, catalogue
):
    url = f"/api/v1/projects/{project.pk}/synthesis-jobs/"
    data = api_body(family="receipts")
    assert api_client_for().post(url, data, format="json").status_code == 401
    assert api_client_for(outsider).post(url, data, format="json").status_code == 404
    assert api_client_for(viewer).post(url, data, format="json").status_code == 403
    assert SynthesisJob.objects.count() == 0


# --- a real worker ----------------------------------------------------------------------


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_worker_runs_a_receipts_job_end_to_end(
    api_client_for, author, project, catalogue, tmp_path, monkeypatch, settings
):
    """The API queues the slots; a real Celery worker (another process, the same storage
    folder) draws the receipts, stores them by hash, validates and imports."""
    location = settings.STORAGES["attachments"]["OPTIONS"]["location"]
    monkeypatch.setenv("ATTACHMENTS_STORAGE", "filesystem")
    monkeypatch.setenv("ATTACHMENTS_ROOT", location)
    purge_queues()
    worker = WorkerProcess(concurrency=2, log_path=tmp_path / "worker.log").start()
    try:
        response = api_client_for(author).post(
            f"/api/v1/projects/{project.pk}/synthesis-jobs/",
            api_body(family="receipts", count=2, seed=11),
            format="json",
        )
        assert response.status_code == 201
        synthesis = SynthesisJob.objects.get()

        def finished():
            synthesis.job.refresh_from_db()
            return synthesis.job.status not in (JobStatus.PENDING, JobStatus.RUNNING)

        wait_for(finished, timeout=120, interval=0.3, message="the receipts job to finish")
    finally:
        worker.stop()
        if (tmp_path / "worker.log").exists():
            print((tmp_path / "worker.log").read_text()[-3000:])
    assert synthesis.job.status == JobStatus.SUCCEEDED, synthesis.job.message
    assert_receipts_environments(synthesis, 2)


# --- command ----------------------------------------------------------------------------


def test_the_command_takes_a_family(project, catalogue):
    import io

    from django.core.management import CommandError, call_command

    out = io.StringIO()
    call_command(
        "synthesize",
        "--project=acme",
        "--generator=template",
        "--capability=clarify-before-acting",
        "--family=receipts",
        "--count=1",
        "--tasks-per-env=2",
        "--seed=12",
        "--sync",
        stdout=out,
    )
    synthesis = SynthesisJob.objects.get()
    assert synthesis.family == "receipts"
    assert "slot 1/1: valid" in out.getvalue()
    assert_receipts_environments(synthesis, 1)
    with pytest.raises(CommandError, match="invalid choice: 'cooking'"):
        call_command("synthesize", "--project=acme", "--family=cooking", "--capability=x")
