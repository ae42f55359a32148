"""Bad input gets a clear 4xx in the one error shape, never a 500 (issue 10).

Each case reproduces a 500 the probe found on PostgreSQL: NUL characters (which PostgreSQL
cannot store), lone UTF-16 surrogates (which UTF-8 cannot encode), JSON nested a thousand
levels deep, integers past a column's range, and an oversized API body. Run with
``DATABASE_URL`` pointing at PostgreSQL to exercise the NUL cases where they used to fail.
"""

import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings

from apps.datasets.models import DatasetVersion
from apps.datasets.services import dataset_create
from apps.environments.models import Environment, ServiceRecord, Task, ToolSchema
from apps.environments.services import environment_import

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = sorted((ROOT / "samples").glob("*.json"))[0]
NUL = "\x00"
SURROGATE = "\ud800"


@pytest.fixture
def spec() -> dict:
    return json.loads(SAMPLE.read_text())


@pytest.fixture
def environment(project, author, spec):
    return environment_import(project=project, spec=spec, user=author)


def raw_json(value) -> str:
    """JSON text as a hostile client writes it: NUL and surrogates as ``\\u`` escapes."""
    return json.dumps(value)


def post_json(client, url, value, method="post"):
    return getattr(client, method)(url, raw_json(value), content_type="application/json")


def assert_error(response, status, message, details=None):
    assert response.status_code == status, response.content
    body = response.json()
    assert body["message"] == message
    if details is not None:
        assert body["details"] == details


NUL_AT = "contains a NUL character (\\u0000), which cannot be stored"
SURROGATE_AT = "contains a lone UTF-16 surrogate (\\ud800), which is not valid Unicode text"


# --- NUL and lone surrogates in JSON bodies ---------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "fault"), [(NUL, NUL_AT), (SURROGATE, SURROGATE_AT)], ids=["nul", "surrogate"]
)
def test_api_import_refuses_unstorable_text_with_its_pointer(
    api_client_for, author, project, spec, bad, fault
):
    spec["tasks"][0]["title"] = f"Book{bad}"
    response = post_json(
        api_client_for(author),
        "/api/v1/environments/import/",
        {"project": project.pk, "spec": spec},
    )
    assert_error(
        response,
        400,
        f"A text value at /spec/tasks/0/title {fault}.",
        {"pointer": "/spec/tasks/0/title"},
    )
    assert not Environment.objects.exists()


@pytest.mark.parametrize("bad", [NUL, SURROGATE], ids=["nul", "surrogate"])
def test_api_spec_put_refuses_unstorable_text(api_client_for, author, environment, spec, bad):
    spec["services"] = {**spec["services"], f"mail{bad}": {}}
    response = post_json(
        api_client_for(author), f"/api/v1/environments/{environment.pk}/spec/", spec, "put"
    )
    assert response.status_code == 400, response.content
    assert response.json()["details"] == {"pointer": "/services"}
    environment.refresh_from_db()
    assert environment.revision == 1


def test_api_task_create_and_patch_refuse_nul(api_client_for, author, environment):
    client = api_client_for(author)
    task = environment.tasks.first()
    created = post_json(
        client,
        f"/api/v1/environments/{environment.pk}/tasks/",
        {"key": "k", "title": NUL, "turns": [{"message": "hi"}], "graders": []},
    )
    assert_error(created, 400, f"A text value at /title {NUL_AT}.", {"pointer": "/title"})
    patched = post_json(
        client, f"/api/v1/tasks/{task.pk}/", {"constraints": ["ok", f"a{NUL}"]}, "patch"
    )
    assert patched.json()["details"] == {"pointer": "/constraints/1"}
    assert Task.objects.count() == environment.tasks.count() == 3


def test_api_record_and_tool_parameters_refuse_nul(api_client_for, author, environment):
    client = api_client_for(author)
    records = ServiceRecord.objects.count()
    record = post_json(
        client,
        f"/api/v1/environments/{environment.pk}/records/",
        {"service": "contacts", "collection": "people", "data": {"id": "x", "name": NUL}},
    )
    assert record.json()["details"] == {"pointer": "/data/name"}
    tool = environment.tools.first()
    parameters = {"type": "object", "properties": {"q": {"type": "string", "default": NUL}}}
    patched = post_json(client, f"/api/v1/tools/{tool.pk}/", {"parameters": parameters}, "patch")
    assert patched.json()["details"] == {"pointer": "/parameters/properties/q/default"}
    assert ServiceRecord.objects.count() == records
    assert ToolSchema.objects.get(pk=tool.pk).parameters == tool.parameters


# --- the HTML import paths (upload and paste) --------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "fault"), [(NUL, NUL_AT), (SURROGATE, SURROGATE_AT)], ids=["nul", "surrogate"]
)
@pytest.mark.parametrize("how", ["paste", "upload"])
def test_html_import_refuses_unstorable_text(client_for, author, project, spec, bad, fault, how):
    spec["description"] = f"x{bad}"
    text = raw_json(spec)
    data = (
        {"text": text}
        if how == "paste"
        else {"file": SimpleUploadedFile("s.json", text.encode(), "application/json")}
    )
    response = client_for(author).post(f"/p/{project.slug}/environments/import/", data)
    assert response.status_code == 200
    problems = response.context["problems"]
    assert [(p["code"], p["pointer"]) for p in problems] == [("text_not_storable", "/description")]
    assert fault in problems[0]["message"]
    assert not Environment.objects.exists()


# --- query strings -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "/p/acme/environments/?q=%00",
        "/p/acme/environments/?domain=%00",
        "/p/acme/capabilities/?q=%00",
        "/p/acme/demonstrations/?model=%00",
        "/p/acme/runs/?policy=a%00",
        "/p/acme/synthesis/?capability=%00",
        "/p/acme/capabilities/?group=%00",
    ],
)
def test_html_lists_refuse_nul_in_the_query(client_for, viewer, url):
    response = client_for(viewer).get(url)
    assert response.status_code == 400
    assert (
        "in the address contains a NUL character (\\u0000), which cannot be stored."
        in response.content.decode()
    )


@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/environments/?q=%00",
        "/api/v1/environments/?domain=x%00y",
        "/api/v1/capabilities/?group=%00",
        "/api/v1/demonstrations/?model=%00",
    ],
)
def test_api_lists_refuse_nul_in_the_query(api_client_for, viewer, url):
    response = api_client_for(viewer).get(url)
    name = url.split("?")[1].split("=")[0]
    message = f"The value of {name!r} in the address {NUL_AT}."
    assert_error(response, 400, message, {"query": [f"The value of {name!r} {NUL_AT}."]})


def test_form_post_refuses_nul(client_for, author, project):
    response = client_for(author).post(
        f"/p/{project.slug}/capabilities/new/", {"name": "a\x00b", "slug": "ab"}
    )
    assert response.status_code == 400
    assert "contains a NUL character" in response.content.decode()


# --- depth, range, size ------------------------------------------------------------------------


def test_deeply_nested_json_is_a_400(api_client_for, author, project):
    nested = "[" * 1000 + "]" * 1000
    body = f'{{"project": {project.pk}, "spec": {nested}}}'
    response = api_client_for(author).post(
        "/api/v1/environments/import/", body, content_type="application/json"
    )
    assert_error(response, 400, "The JSON nests deeper than 64 levels.")
    assert not Environment.objects.exists()


def test_dataset_version_seed_out_of_range_api(api_client_for, author, project):
    dataset = dataset_create(project=project, name="D", user=author)
    response = post_json(
        api_client_for(author), f"/api/v1/datasets/{dataset.pk}/versions/", {"seed": 2147483648}
    )
    assert_error(
        response,
        400,
        "The request is not valid.",
        {"seed": ["Ensure this value is less than or equal to 2147483647."]},
    )
    assert not DatasetVersion.objects.exists()


def test_dataset_version_seed_out_of_range_form(client_for, author, project):
    dataset = dataset_create(project=project, name="D", user=author)
    response = client_for(author).post(
        f"/datasets/{dataset.pk}/versions/new/",
        {"seed": "2147483648", "validation_fraction": "0.1"},
    )
    assert response.status_code == 200
    assert response.context["form"].errors["seed"] == [
        "Ensure this value is less than or equal to 2147483647."
    ]
    assert not DatasetVersion.objects.exists()


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1000)
def test_oversized_api_body_is_413_in_the_error_shape(api_client_for, author, project):
    body = json.dumps({"project": project.pk, "spec": {"name": "x" * 2000}})
    response = api_client_for(author).post(
        "/api/v1/environments/import/", body, content_type="application/json"
    )
    assert_error(response, 413, "The request body is larger than the server accepts.", {})


# --- numbers in the address -------------------------------------------------------------------


@pytest.mark.parametrize("number", ["\u00b2", "\u0663", "99999999999999999999999"])
@pytest.mark.parametrize(
    "url",
    [
        "/runs/compare/?a={n}&b={n}",
        "/p/acme/runs/evaluation/?batch={n}",
        "/p/acme/runs/?batch={n}&task={n}",
        "/p/acme/demonstrations/?environment={n}",
        "/environments/{env}/validation/?report={n}",
        "/environments/{env}/tasks/?task={n}",
        "/api/v1/projects/{project}/runs/?batch={n}&task={n}",
    ],
)
def test_numbers_in_the_address_are_never_a_server_error(
    client_for, viewer, environment, project, url, number
):
    """Unicode digits pass ``str.isdigit()`` but not ``int()``; huge ones pass ``int()`` but
    not a 64-bit column. Either is "no such thing" (or no filter), never a 500."""
    address = url.format(n=number, env=environment.pk, project=project.pk)
    response = client_for(viewer).get(address)
    assert response.status_code in (200, 404), (address, response.status_code)


def test_html_record_editor_refuses_a_lone_surrogate(client_for, author, environment):
    record = environment.records.get(service="contacts", record_id="p1")
    text = '{\n  "id": "p1",\n  "name": "\\ud800"\n}'
    response = client_for(author).post(f"/environments/records/{record.pk}/edit/", {"data": text})
    assert response.status_code == 200
    assert response.context["form"].errors["data"] == [
        f'Line 3, column 1: A text value at /name {SURROGATE_AT}. Near: "name": "\\ud800"'
    ]
    record.refresh_from_db()
    assert record.data["name"] != "\ud800"


def test_nul_in_the_path_is_a_404(client_for, viewer, environment):
    response = client_for(viewer).get(f"/environments/{environment.pk}/services/a%00/b.json/")
    assert response.status_code == 404


def test_a_form_post_that_is_not_utf8_is_never_a_server_error(client_for, author, project):
    """A surrogate cannot be spelt in a form post: its UTF-8-style bytes are not UTF-8, and
    Django decodes them as U+FFFD, which PostgreSQL stores."""
    response = client_for(author).post(
        f"/p/{project.slug}/capabilities/new/",
        "name=Ask%ED%A0%80first&slug=ask-first",
        content_type="application/x-www-form-urlencoded",
    )
    assert response.status_code == 302
    assert project.capabilities.get(slug="ask-first").name == "Ask\ufffd\ufffd\ufffdfirst"


@pytest.mark.parametrize("how", ["api", "paste"])
def test_a_spec_integer_past_its_column_is_a_400(
    api_client_for, client_for, author, project, spec, how
):
    spec["tasks"][0]["graders"][0]["at_turn"] = 2**31
    if how == "api":
        response = post_json(
            api_client_for(author),
            "/api/v1/environments/import/",
            {"project": project.pk, "spec": spec},
        )
        assert response.status_code == 400
        problems = response.json()["details"]["problems"]
    else:
        response = client_for(author).post(
            f"/p/{project.slug}/environments/import/", {"text": json.dumps(spec)}
        )
        assert response.status_code == 200
        problems = response.context["problems"]
    assert [(p["code"], p["pointer"]) for p in problems] == [
        ("schema_invalid", "/tasks/0/graders/0/at_turn")
    ]
    assert not Environment.objects.exists()


@pytest.mark.parametrize("depth", [100, 100_000])
def test_html_paste_nested_too_deeply_is_a_problem_not_a_crash(client_for, author, project, depth):
    text = '{"a": ' + "[" * depth + "]" * depth + "}"
    response = client_for(author).post(f"/p/{project.slug}/environments/import/", {"text": text})
    assert response.status_code == 200
    problems = response.context["problems"]
    assert [p["code"] for p in problems] == ["json_too_deep"]
    assert not Environment.objects.exists()
