import io
import json
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client, override_settings
from django.urls import reverse

from apps.core.models import Job
from apps.environments.models import (
    Environment,
    EnvironmentSource,
    EnvironmentStatus,
    Task,
    ValidationReport,
)
from apps.environments.services import (
    VALIDATION_JOB_KIND,
    environment_import,
    environment_spec_filename,
    environment_validate,
)
from apps.environments.specs import environment_spec
from tests.conftest import HTMX_HEADERS

pytestmark = pytest.mark.django_db


def list_url(project, **params):
    url = reverse("environments:list", args=[project.slug])
    if params:
        from urllib.parse import urlencode

        url += "?" + urlencode(params)
    return url


def detail_url(environment):
    return reverse("environments:detail", args=[environment.pk])


def make_zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def upload(name: str, content: bytes):
    return SimpleUploadedFile(name, content, content_type="application/octet-stream")


def messages_of(response) -> list[str]:
    return [str(m) for m in response.context["messages"]] if response.context else []


@pytest.fixture
def second(project, author, example_spec):
    return environment_import(
        project=project,
        spec={**example_spec, "name": "Billing desk", "domain": "finance", "description": ""},
        user=author,
    )


# --- list ----------------------------------------------------------------------------------


def test_list_shows_rows_with_their_details(client_for, viewer, project, environment):
    environment_validate(environment=environment)
    environment.refresh_from_db()
    response = client_for(viewer).get(list_url(project))
    assert response.status_code == 200
    [row] = response.context["page"].object_list
    assert row == environment
    assert row.task_count == environment.tasks.count()
    report = environment.latest_validation
    assert row.validation["errors"] == report.error_count
    assert row.validation["warnings"] == report.warning_count
    assert row.validation["outdated"] is False
    html = response.content.decode()
    assert f'href="{detail_url(environment)}"' in html
    assert f"r{environment.revision}" in html
    assert "Imported" in html
    assert 'aria-current="page">Environments</a>' in html


def test_list_mean_sensitivity(client_for, viewer, project, environment):
    report = ValidationReport.objects.create(
        environment=environment,
        revision=environment.revision,
        valid=True,
        problems=[{"severity": "warning", "code": "x", "pointer": "", "message": "m"}],
        tasks=[{"key": "a", "sensitivity": 0.5}, {"key": "b", "sensitivity": 1.0}],
    )
    Environment.objects.filter(pk=environment.pk).update(latest_validation=report)
    response = client_for(viewer).get(list_url(project))
    [row] = response.context["page"].object_list
    assert row.validation["mean_sensitivity"] == 0.75
    assert row.validation["warnings"] == 1
    assert "sensitivity 0.75" in response.content.decode()


def test_list_marks_validation_of_an_older_revision(client_for, viewer, project, environment):
    report = ValidationReport.objects.create(
        environment=environment, revision=environment.revision, valid=True, problems=[], tasks=[]
    )
    Environment.objects.filter(pk=environment.pk).update(
        latest_validation=report, revision=environment.revision + 1
    )
    response = client_for(viewer).get(list_url(project))
    assert response.context["page"].object_list[0].validation["outdated"] is True
    assert "edited since" in response.content.decode()


def test_list_search_filters_and_sorts(client_for, viewer, project, environment, second):
    client = client_for(viewer)

    def names(**params):
        return [e.name for e in client.get(list_url(project, **params)).context["page"]]

    assert names(q="billing") == ["Billing desk"]
    assert names(q="FINANCE") == ["Billing desk"]  # domain, case-insensitive
    assert names(domain=environment.domain) == [environment.name]
    assert names(sort="name") == sorted([environment.name, "Billing desk"])
    assert names(source="manual") == []
    assert names(source="imported", sort="name") == sorted([environment.name, "Billing desk"])
    eval_tasks = Task.objects.filter(environment=environment, split="eval")
    assert names(split="eval", sort="name") == (
        sorted([environment.name, "Billing desk"]) if eval_tasks.exists() else []
    )
    capability = environment.tasks.first().capabilities.first()
    Task.objects.filter(environment=second).delete()
    assert names(capability=capability.slug) == [environment.name]
    Environment.objects.filter(pk=second.pk).update(status=EnvironmentStatus.VALID)
    assert names(status="valid") == ["Billing desk"]


def test_list_hides_archived_unless_asked(client_for, viewer, project, environment, second):
    Environment.objects.filter(pk=second.pk).update(status=EnvironmentStatus.ARCHIVED)
    client = client_for(viewer)
    response = client.get(list_url(project))
    assert [e.name for e in response.context["page"]] == [environment.name]
    assert response.context["active_count"] == 1
    assert response.context["archived_count"] == 1
    archived = client.get(list_url(project, status="archived"))
    assert [e.name for e in archived.context["page"]] == ["Billing desk"]


def test_list_counts_per_status(client_for, viewer, project, environment, second):
    Environment.objects.filter(pk=second.pk).update(status=EnvironmentStatus.INVALID)
    response = client_for(viewer).get(list_url(project))
    assert response.context["status_counts"] == [
        ("draft", "Draft", 1),
        ("valid", "Valid", 0),
        ("invalid", "Invalid", 1),
        ("approved", "Approved", 0),
        ("archived", "Archived", 0),
    ]


def test_list_paginates_25_per_page(client_for, viewer, project, environment):
    Environment.objects.bulk_create(
        Environment(project=project, name=f"Env {i:02d}", domain="bulk") for i in range(30)
    )
    client = client_for(viewer)
    first = client.get(list_url(project, sort="name"))
    assert len(first.context["page"].object_list) == 25
    assert first.context["page"].paginator.count == 31
    html = first.content.decode()
    assert "Page 1 of 2" in html
    assert "sort=name&amp;page=2" in html
    second_page = client.get(list_url(project, sort="name", page=2))
    assert len(second_page.context["page"].object_list) == 6


def test_list_empty_project_offers_import(client_for, author, viewer, project):
    html = client_for(author).get(list_url(project)).content.decode()
    assert "No environments yet." in html
    assert reverse("environments:import", args=[project.slug]) in html
    viewer_html = client_for(viewer).get(list_url(project)).content.decode()
    assert "No environments yet." in viewer_html
    assert reverse("environments:import", args=[project.slug]) not in viewer_html


@pytest.mark.parametrize("headers", [{}, HTMX_HEADERS], ids=["page", "htmx"])
def test_list_filters_matching_nothing_offer_to_clear(
    client_for, viewer, project, environment, headers
):
    response = client_for(viewer).get(list_url(project, q="zzz-nothing"), **headers)
    html = response.content.decode()
    assert "No environments match these filters." in html
    assert (
        f'<a href="{list_url(project)}" role="button" class="secondary outline" '
        'data-testid="clear-filters">Clear filters</a>'
    ) in html


def test_list_all_archived(client_for, viewer, project, environment):
    Environment.objects.filter(pk=environment.pk).update(status=EnvironmentStatus.ARCHIVED)
    html = client_for(viewer).get(list_url(project)).content.decode()
    assert "No active environments." in html
    assert "?status=archived" in html


def test_list_htmx_renders_only_the_rows(client_for, viewer, project, environment, second):
    response = client_for(viewer).get(list_url(project, q="billing"), **HTMX_HEADERS)
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="environment-rows"')
    assert "<html" not in html
    assert "Billing desk" in html
    assert environment.name not in html


def test_list_boosted_navigation_gets_the_whole_page(client_for, viewer, project, environment):
    response = client_for(viewer).get(
        list_url(project), HTTP_HX_REQUEST="true", HTTP_HX_BOOSTED="true"
    )
    assert "<html" in response.content.decode()


def test_list_filter_form_works_with_and_without_htmx(client_for, viewer, project):
    html = client_for(viewer).get(list_url(project)).content.decode()
    assert f'method="get" action="{list_url(project)}"' in html
    assert f'hx-get="{list_url(project)}"' in html
    assert 'hx-push-url="true"' in html


def test_list_viewer_sees_no_import_or_validate(client_for, viewer, author, project, environment):
    viewer_html = client_for(viewer).get(list_url(project)).content.decode()
    assert 'data-testid="import-button"' not in viewer_html
    assert 'data-testid="bulk-validate"' not in viewer_html
    assert 'data-testid="bulk-export"' in viewer_html
    author_html = client_for(author).get(list_url(project)).content.decode()
    assert 'data-testid="import-button"' in author_html
    assert 'data-testid="bulk-validate"' in author_html


def test_list_escapes_names(client_for, viewer, project, author, example_spec):
    environment_import(
        project=project, spec={**example_spec, "name": "<script>alert(1)</script>"}, user=author
    )
    html = client_for(viewer).get(list_url(project)).content.decode()
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_list_anonymous_redirects_to_login(client, project):
    response = client.get(list_url(project))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("accounts:login"))


def test_list_outsider_404(client_for, outsider, project):
    assert client_for(outsider).get(list_url(project)).status_code == 404


def test_list_wrong_method(client_for, viewer, project):
    assert client_for(viewer).post(list_url(project)).status_code == 405


def _populate(project, n: int, spec_env: Environment):
    """n environments, each with two tasks and a validation report, created in bulk."""
    environments = Environment.objects.bulk_create(
        Environment(
            project=project,
            name=f"Env {i}",
            domain=f"domain-{i % 7}",
            source=EnvironmentSource.IMPORTED,
            status=EnvironmentStatus.DRAFT,
        )
        for i in range(n)
    )
    Task.objects.bulk_create(
        Task(environment=e, key=f"t{k}", position=k, split="eval" if k else "train")
        for e in environments
        for k in range(2)
    )
    reports = ValidationReport.objects.bulk_create(
        ValidationReport(
            environment=e,
            revision=1,
            valid=False,
            problems=[{"severity": "error", "code": "x", "pointer": "/", "message": "m"}],
            tasks=[{"key": "t0", "sensitivity": 0.4}],
        )
        for e in environments
    )
    for environment, report in zip(environments, reports, strict=True):
        environment.latest_validation = report
    Environment.objects.bulk_update(environments, ["latest_validation"])


@pytest.mark.parametrize("n", [10, 500])
def test_list_query_count_is_flat(
    client_for, author, project, environment, n, django_assert_max_num_queries
):
    _populate(project, n, environment)
    client = client_for(author)
    client.get(list_url(project))  # warm the session and the membership cache
    with django_assert_max_num_queries(10):
        response = client.get(list_url(project, sort="tasks"))
    assert response.context["page"].paginator.count == n + 1
    assert len(response.context["page"].object_list) == min(25, n + 1)
    with django_assert_max_num_queries(10):
        client.get(list_url(project, split="eval", q="Env", sort="name", page=2))


# --- import --------------------------------------------------------------------------------


def import_url(project):
    return reverse("environments:import", args=[project.slug])


def test_import_page(client_for, author, project):
    response = client_for(author).get(import_url(project))
    assert response.status_code == 200
    html = response.content.decode()
    assert 'enctype="multipart/form-data"' in html
    assert f'hx-post="{import_url(project)}"' in html


def test_import_json_file_goes_to_the_environment(client_for, author, project, example_spec):
    response = client_for(author).post(
        import_url(project),
        {"file": upload("spec.json", json.dumps(example_spec).encode())},
    )
    environment = Environment.objects.get()
    assert response.status_code == 302
    assert response["Location"] == detail_url(environment)
    assert environment.status == EnvironmentStatus.DRAFT
    assert environment.created_by == author
    assert not Job.objects.exists()  # "Validate after importing" unticked


def test_import_and_validate(
    client_for, author, project, example_spec, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client_for(author).post(
            import_url(project),
            {"file": upload("spec.json", json.dumps(example_spec).encode()), "validate": "on"},
            follow=True,
        )
    environment = Environment.objects.get()
    job = Job.objects.get()
    assert job.kind == VALIDATION_JOB_KIND
    assert job.params == {"environment_ids": [environment.pk]}
    assert len(callbacks) == 1  # enqueued after commit
    assert messages_of(response) == [
        f"Imported “{environment.name}” as a draft. Validation job #{job.pk} is checking it."
    ]


def test_import_zip_goes_to_the_list(client_for, author, project, example_spec):
    content = make_zip(
        {
            "a.json": json.dumps(example_spec).encode(),
            "b.json": json.dumps({**example_spec, "name": "B"}).encode(),
        }
    )
    response = client_for(author).post(
        import_url(project), {"file": upload("two.zip", content)}, follow=True
    )
    assert Environment.objects.count() == 2
    assert response.redirect_chain == [(list_url(project) + "?sort=created", 302)]
    assert messages_of(response) == [
        "Imported 2 environments as drafts. Validate to find out whether they are usable."
    ]


def test_import_pasted_text(client_for, author, project, example_spec):
    response = client_for(author).post(import_url(project), {"text": json.dumps(example_spec)})
    environment = Environment.objects.get()
    assert response["Location"] == detail_url(environment)
    assert environment_spec(environment)["name"] == example_spec["name"]


def test_import_htmx_success_redirects_the_client(client_for, author, project, example_spec):
    response = client_for(author).post(
        import_url(project), {"text": json.dumps(example_spec)}, **HTMX_HEADERS
    )
    assert response.status_code == 200
    assert response["HX-Redirect"] == detail_url(Environment.objects.get())


def test_import_invalid_json_shows_line_and_column(client_for, author, project):
    text = '{\n  "schema": "coworkenv.environment/v1",\n  "name": "x" "domain": "y"\n}'
    response = client_for(author).post(import_url(project), {"text": text})
    assert response.status_code == 200
    html = response.content.decode()
    assert (
        "The pasted text is not valid JSON: line 3, column 15: Expecting &#x27;,&#x27; delimiter."
        in html
    )
    assert "line 3, column 15" in html
    assert not Environment.objects.exists()
    # The pasted text comes back, so it can be fixed in place.
    assert "&quot;schema&quot;: &quot;coworkenv.environment/v1&quot;" in html


def test_import_schema_invalid_lists_pointers(client_for, author, project, example_spec):
    example_spec["tasks"][0]["graders"][0]["weight"] = "heavy"
    response = client_for(author).post(
        import_url(project), {"file": upload("bad.json", json.dumps(example_spec).encode())}
    )
    problems = response.context["problems"]
    assert any(p["pointer"] == "/tasks/0/graders/0/weight" for p in problems)
    assert "/tasks/0/graders/0/weight" in response.content.decode()
    assert not Environment.objects.exists()


def test_import_errors_render_the_form_partial_for_htmx(client_for, author, project):
    response = client_for(author).post(import_url(project), {"text": "[1]"}, **HTMX_HEADERS)
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="import-form">')
    assert "The pasted text holds an array, not a spec" in html
    assert "<html" not in html


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=2000)
def test_import_oversize_upload(client_for, author, project):
    response = client_for(author).post(
        import_url(project), {"file": upload("big.json", b" " * 2001)}
    )
    assert response.status_code == 200
    assert response.context["form"].errors["file"] == [
        "This file is 2.0 KiB; the limit is 2.0 KiB."
    ]
    assert not Environment.objects.exists()


def test_import_zip_with_a_bad_member_saves_nothing(client_for, author, project, example_spec):
    content = make_zip(
        {"good.json": json.dumps(example_spec).encode(), "dir/bad.json": b'{"schema": 1,}'}
    )
    response = client_for(author).post(import_url(project), {"file": upload("set.zip", content)})
    html = response.content.decode()
    assert (
        "Nothing was imported: 1 of 2 files in set.zip has problems (set.zip/dir/bad.json)." in html
    )
    assert not Environment.objects.exists()


def test_import_non_json_member_and_too_many(client_for, author, project):
    client = client_for(author)
    response = client.post(
        import_url(project), {"file": upload("x.zip", make_zip({"a.txt": b"hi"}))}
    )
    assert response.context["error"] == "x.zip contains files that are not .json specs: a.txt."
    many = make_zip({f"{i}.json": b"{}" for i in range(201)})
    response = client.post(import_url(project), {"file": upload("many.zip", many)})
    assert response.context["error"] == "many.zip has 201 files; import at most 200 at once."
    assert not Environment.objects.exists()


def test_import_needs_exactly_one_input(client_for, author, project, example_spec):
    client = client_for(author)
    empty = client.post(import_url(project), {"text": "  "})
    assert empty.context["form"].non_field_errors() == ["Choose a file to upload or paste a spec."]
    both = client.post(import_url(project), {"text": "{}", "file": upload("a.json", b"{}")})
    assert both.context["form"].non_field_errors() == ["Upload a file or paste JSON, not both."]
    wrong = client.post(import_url(project), {"file": upload("a.yaml", b"a: 1")})
    assert wrong.context["form"].errors["file"] == [
        "Upload a .json spec, a .zip of .json specs, or Claw-Eval tasks (.zip, .tar or .tar.gz)."
    ]


def test_import_viewer_forbidden(client_for, viewer, project, example_spec):
    client = client_for(viewer)
    assert client.get(import_url(project)).status_code == 403
    response = client.post(import_url(project), {"text": json.dumps(example_spec)})
    assert response.status_code == 403
    assert not Environment.objects.exists()


def test_import_anonymous_and_outsider(client, client_for, outsider, project, example_spec):
    response = client.post(import_url(project), {"text": json.dumps(example_spec)})
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("accounts:login"))
    assert client_for(outsider).get(import_url(project)).status_code == 404
    assert not Environment.objects.exists()


def test_import_wrong_method(client_for, author, project):
    assert client_for(author).put(import_url(project)).status_code == 405


# --- export --------------------------------------------------------------------------------


def test_export_one_spec(client_for, viewer, environment):
    response = client_for(viewer).get(reverse("environments:export", args=[environment.pk]))
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json; charset=utf-8"
    slug_name = response["Content-Disposition"]
    assert slug_name.startswith("attachment; filename=")
    assert slug_name.endswith(f'-{environment.pk}.json"')
    body = response.content.decode()
    assert body.startswith('{\n  "schema": "coworkenv.environment/v1"')
    assert json.loads(body) == environment_spec(environment)


def test_export_then_reimport_gives_the_same_hash(client_for, author, project, environment):
    client = client_for(author)
    exported = client.get(reverse("environments:export", args=[environment.pk])).content
    client.post(import_url(project), {"file": upload("back.json", exported)})
    copy = Environment.objects.exclude(pk=environment.pk).get()
    assert copy.spec_hash == environment.spec_hash


def test_export_access(client, client_for, outsider, environment):
    url = reverse("environments:export", args=[environment.pk])
    assert client.get(url).status_code == 302
    assert client_for(outsider).get(url).status_code == 404
    assert client_for(outsider).post(url).status_code == 405


def test_export_matching_is_a_zip_of_the_filtered_list(
    client_for, viewer, project, environment, second
):
    response = client_for(viewer).get(
        reverse("environments:export_matching", args=[project.slug]), {"q": "billing"}
    )
    assert response.status_code == 200
    assert response["Content-Type"] == "application/zip"
    assert response["Content-Disposition"] == 'attachment; filename="acme-environments.zip"'
    archive = zipfile.ZipFile(io.BytesIO(response.content))
    assert archive.namelist() == [f"billing-desk-{second.pk}.json"]
    assert json.loads(archive.read(archive.namelist()[0])) == environment_spec(second)


def test_export_matching_nothing(client_for, viewer, project, environment):
    response = client_for(viewer).get(
        reverse("environments:export_matching", args=[project.slug]), {"q": "nope"}, follow=True
    )
    assert response.redirect_chain == [(list_url(project) + "?q=nope", 302)]
    assert messages_of(response) == ["No environments match these filters: nothing to export."]


def test_export_matching_over_the_cap(client_for, viewer, project, environment, monkeypatch):
    from apps.environments.views import browse

    monkeypatch.setattr(browse, "MAX_EXPORT_ENVIRONMENTS", 0)
    response = client_for(viewer).get(
        reverse("environments:export_matching", args=[project.slug]), follow=True
    )
    assert messages_of(response)[0].startswith("1 environments match; export at most 0")


def test_export_matching_access(client, client_for, outsider, project):
    url = reverse("environments:export_matching", args=[project.slug])
    assert client.get(url).status_code == 302
    assert client_for(outsider).get(url).status_code == 404


# --- bulk ----------------------------------------------------------------------------------


def bulk_url(project):
    return reverse("environments:bulk", args=[project.slug])


def test_bulk_validate_creates_one_job(
    client_for, author, project, environment, second, other_project
):
    foreign = Environment.objects.create(project=other_project, name="Not yours")
    response = client_for(author).post(
        bulk_url(project),
        {"action": "validate", "ids": [environment.pk, second.pk, foreign.pk, "x"]},
    )
    job = Job.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("core:job_detail", args=[job.pk])
    assert job.kind == VALIDATION_JOB_KIND
    assert job.project == project
    assert sorted(job.params["environment_ids"]) == sorted([environment.pk, second.pk])
    assert job.progress_total == 2


def test_bulk_validate_htmx(client_for, author, project, environment):
    response = client_for(author).post(
        bulk_url(project), {"action": "validate", "ids": [environment.pk]}, **HTMX_HEADERS
    )
    assert response["HX-Redirect"] == reverse("core:job_detail", args=[Job.objects.get().pk])


def test_bulk_validate_viewer_forbidden(client_for, viewer, project, environment):
    response = client_for(viewer).post(
        bulk_url(project), {"action": "validate", "ids": [environment.pk]}
    )
    assert response.status_code == 403
    assert not Job.objects.exists()


def test_bulk_export_selected(client_for, viewer, project, environment, second):
    response = client_for(viewer).post(
        bulk_url(project), {"action": "export", "ids": [second.pk, environment.pk]}
    )
    assert response["Content-Type"] == "application/zip"
    names = zipfile.ZipFile(io.BytesIO(response.content)).namelist()
    assert sorted(names) == sorted(
        [environment_spec_filename(environment), environment_spec_filename(second)]
    )


def test_bulk_without_selection_or_action(client_for, author, project, environment):
    client = client_for(author)
    response = client.post(
        bulk_url(project), {"action": "validate", "query": "q=acme&status=draft"}, follow=True
    )
    assert response.redirect_chain == [(list_url(project) + "?q=acme&status=draft", 302)]
    assert messages_of(response) == ["Select at least one environment first."]
    response = client.post(bulk_url(project), {"action": "launch", "ids": [environment.pk]})
    assert response.status_code == 302
    assert not Job.objects.exists()


def test_bulk_access(client, client_for, outsider, viewer, project, environment):
    data = {"action": "export", "ids": [environment.pk]}
    assert client.post(bulk_url(project), data).status_code == 302
    assert client_for(outsider).post(bulk_url(project), data).status_code == 404
    assert client_for(viewer).get(bulk_url(project)).status_code == 405


# --- actions -------------------------------------------------------------------------------


def action_url(name, environment):
    return reverse(f"environments:{name}", args=[environment.pk])


def test_validate_starts_a_job_and_lands_on_the_validation_tab(client_for, author, environment):
    client = client_for(author)
    response = client.post(action_url("validate", environment))
    job = Job.objects.get()
    tab = reverse("environments:tab", args=[environment.pk, "validation"])
    assert response["Location"] == tab
    assert job.params == {"environment_ids": [environment.pk]}
    assert job.title == f"Validate “{environment.name}”"
    page = client.get(tab)
    assert messages_of(page) == [
        f"Validation started (job #{job.pk}): the report appears here when it is done."
    ]
    live = reverse("environments:validation_report_live", args=[environment.pk])
    assert f'hx-get="{live}" hx-trigger="every 2s"' in page.content.decode()
    # one banner: while the job runs, none asks to press Validate
    assert 'data-testid="needs-validation"' not in page.content.decode()
    assert 'data-testid="needs-validation"' not in client.get(tab).content.decode()


def test_validate_htmx(client_for, author, environment):
    response = client_for(author).post(action_url("validate", environment), **HTMX_HEADERS)
    assert response["HX-Redirect"] == reverse(
        "environments:tab", args=[environment.pk, "validation"]
    )


def test_validation_report_live_polls_then_shows_the_problems(
    client_for, author, viewer, outsider, environment
):
    live = reverse("environments:validation_report_live", args=[environment.pk])
    client_for(author).post(action_url("validate", environment))
    job = Job.objects.get()
    running = client_for(viewer).get(live, **HTMX_HEADERS)
    body = running.content.decode()
    assert body.lstrip().startswith('<div id="validation-live"')
    assert 'hx-trigger="every 2s"' in body and f"job #{job.pk}" in body
    # The job ends with a report (the service a worker runs, here inline).
    grader = environment.tasks.order_by("position")[0].graders.order_by("position")[0]
    grader.check_spec = {"kind": "state", "query": "length(email.sent)", "op": ">=", "value": 0}
    grader.weight = 10
    grader.save()
    environment_validate(environment=environment)
    Job.objects.filter(pk=job.pk).update(status="succeeded")
    done = client_for(viewer).get(live, **HTMX_HEADERS).content.decode()
    assert 'hx-trigger="every 2s"' not in done
    assert 'data-testid="report-verdict">invalid<' in done
    assert 'data-code="grader_passes_null_agent"' in done
    assert f'href="/environments/{environment.pk}/tasks/#task-0-grader-0"' in done
    assert Client().get(live).status_code == 302  # anonymous: to the login page
    assert client_for(outsider).get(live).status_code == 404
    assert client_for(viewer).post(live).status_code == 405


def test_duplicate(client_for, author, environment):
    response = client_for(author).post(action_url("duplicate", environment), follow=True)
    copy = Environment.objects.exclude(pk=environment.pk).get()
    assert response.redirect_chain[0] == (detail_url(copy), 302)
    assert copy.name == f"{environment.name} (copy)"
    assert copy.duplicated_from == environment
    assert messages_of(response) == [f"Duplicated as “{copy.name}”, a draft you can edit."]


def test_archive_and_restore(client_for, author, environment):
    client = client_for(author)
    response = client.post(action_url("archive", environment))
    assert response["Location"] == detail_url(environment)
    environment.refresh_from_db()
    assert environment.status == EnvironmentStatus.ARCHIVED
    response = client.post(action_url("restore", environment))
    environment.refresh_from_db()
    assert environment.status == EnvironmentStatus.DRAFT


def test_archive_follows_a_safe_next_only(client_for, author, environment):
    client = client_for(author)
    response = client.post(
        action_url("archive", environment), {"next": action_url("delete", environment)}
    )
    assert response["Location"] == action_url("delete", environment)
    client.post(action_url("restore", environment))
    response = client.post(action_url("archive", environment), {"next": "https://evil.test/"})
    assert response["Location"] == detail_url(environment)


def test_restore_of_an_active_environment_explains(client_for, author, environment):
    response = client_for(author).post(action_url("restore", environment), follow=True)
    assert messages_of(response) == ["Only an archived environment can be restored."]


def test_approve_only_when_valid(client_for, reviewer, environment):
    client = client_for(reviewer)
    response = client.post(action_url("approve", environment), follow=True)
    environment.refresh_from_db()
    assert environment.status == EnvironmentStatus.DRAFT
    assert messages_of(response) == [
        "Only a valid environment can be approved: validate its current revision first."
    ]
    Environment.objects.filter(pk=environment.pk).update(status=EnvironmentStatus.VALID)
    response = client.post(action_url("approve", environment), follow=True)
    environment.refresh_from_db()
    assert environment.status == EnvironmentStatus.APPROVED
    assert messages_of(response) == [f"Approved revision {environment.revision}."]


def test_approve_needs_a_reviewer(client_for, author, environment):
    Environment.objects.filter(pk=environment.pk).update(status=EnvironmentStatus.VALID)
    assert client_for(author).post(action_url("approve", environment)).status_code == 403
    environment.refresh_from_db()
    assert environment.status == EnvironmentStatus.VALID


def test_delete_needs_archiving_first(client_for, author, environment):
    client = client_for(author)
    page = client.get(action_url("delete", environment))
    assert page.status_code == 200
    assert 'data-testid="delete-archive-first"' in page.content.decode()
    response = client.post(action_url("delete", environment), follow=True)
    assert Environment.objects.filter(pk=environment.pk).exists()
    assert messages_of(response) == ["Archive this environment before deleting it."]


def test_delete_an_archived_environment(client_for, author, project, environment):
    client = client_for(author)
    client.post(action_url("archive", environment))
    page = client.get(action_url("delete", environment)).content.decode()
    assert 'data-testid="delete-confirm"' in page
    assert f"{environment.tasks.count()} task" in page
    response = client.post(action_url("delete", environment), follow=True)
    assert response.redirect_chain == [(list_url(project), 302)]
    assert not Environment.objects.exists()
    assert not Task.objects.exists()
    assert messages_of(response) == [f"Deleted “{environment.name}” and everything it held."]


def test_delete_htmx(client_for, author, project, environment):
    Environment.objects.filter(pk=environment.pk).update(status=EnvironmentStatus.ARCHIVED)
    response = client_for(author).post(action_url("delete", environment), **HTMX_HEADERS)
    assert response["HX-Redirect"] == list_url(project)
    assert not Environment.objects.exists()


@pytest.mark.parametrize(
    "name", ["validate", "duplicate", "archive", "restore", "delete", "approve"]
)
def test_actions_refuse_a_viewer_and_change_nothing(client_for, viewer, environment, name):
    Environment.objects.filter(pk=environment.pk).update(status=EnvironmentStatus.ARCHIVED)
    response = client_for(viewer).post(action_url(name, environment))
    assert response.status_code == 403
    environment.refresh_from_db()
    assert environment.status == EnvironmentStatus.ARCHIVED
    assert Environment.objects.count() == 1
    assert not Job.objects.exists()


@pytest.mark.parametrize(
    "name", ["validate", "duplicate", "archive", "restore", "delete", "approve"]
)
def test_actions_anonymous_outsider_and_method(
    client, client_for, outsider, author, environment, name
):
    url = action_url(name, environment)
    response = client.post(url)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("accounts:login"))
    assert client_for(outsider).post(url).status_code == 404
    if name != "delete":
        assert client_for(author).get(url).status_code == 405
    assert Environment.objects.count() == 1
    assert not Job.objects.exists()


def test_delete_page_viewer_forbidden(client_for, viewer, environment):
    assert client_for(viewer).get(action_url("delete", environment)).status_code == 403


# --- job page links -----------------------------------------------------------------------


def test_validation_job_page_links_back_to_the_environments(
    client_for, author, project, environment, second
):
    from apps.core.services import job_execute
    from apps.environments.services import environment_validation_run, environment_validation_start

    job = environment_validation_start(
        project=project, environments=[environment, second], started_by=author
    )
    job_execute(job_id=job.pk, work=environment_validation_run)
    job.refresh_from_db()
    assert job.result["environment_ids"] == [environment.pk, second.pk]
    assert [link["url"] for link in job.result["links"]] == [
        detail_url(environment),
        detail_url(second),
    ]
    html = client_for(author).get(reverse("core:job_detail", args=[job.pk])).content.decode()
    assert 'data-testid="job-links"' in html
    assert f'<a href="{detail_url(second)}">Billing desk</a>' in html
    status = (
        client_for(author)
        .get(reverse("core:job_status", args=[job.pk]), **HTMX_HEADERS)
        .content.decode()
    )
    assert f'href="{detail_url(environment)}"' in status


# --- nav -----------------------------------------------------------------------------------


def test_nav_has_environments_and_marks_detail_pages(client_for, viewer, project, environment):
    client = client_for(viewer)
    dashboard = client.get(reverse("workspace:dashboard", args=[project.slug]))
    html = dashboard.content.decode()
    assert f'<a href="{list_url(project)}">Environments</a>' in html
    detail = client.get(detail_url(environment)).content.decode()
    assert f'<a href="{list_url(project)}" aria-current="page">Environments</a>' in detail
