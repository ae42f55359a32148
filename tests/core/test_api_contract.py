"""The API contract matches the server (issue 10): the OpenAPI schema validates, every path
ends with a slash, lists declare their pagination, 4xx answers declare the error shape, and
request bodies are JSON only."""

import pytest
from drf_spectacular.generators import SchemaGenerator
from openapi_spec_validator import validate
from openapi_spec_validator.validation import OpenAPIV30SpecValidator

pytestmark = pytest.mark.django_db

ERROR_REF = "#/components/schemas/ErrorOutput"


@pytest.fixture(scope="module")
def schema():
    return SchemaGenerator().get_schema(request=None, public=True)


def operations(schema):
    for path, methods in schema["paths"].items():
        for method, operation in methods.items():
            if method != "parameters":
                yield path, method, operation


def resolve(schema, node):
    while "$ref" in node:
        node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[-1]]
    return node


def test_the_schema_validates(schema):
    assert [error.message for error in OpenAPIV30SpecValidator(schema).iter_errors()] == []
    validate(schema)


def test_request_defaults_satisfy_their_own_constraints(schema):
    """The three defaults openapi-spec-validator refused: blank slugs, a blank domain hint."""
    components = schema["components"]["schemas"]
    assert "default" not in components["ProjectCreateInputRequest"]["properties"]["slug"]
    assert "default" not in components["CapabilityCreateInputRequest"]["properties"]["slug"]
    hint = components["SynthesisInputRequest"]["properties"]["domain_hint"]
    assert (hint.get("default"), hint.get("minLength", 0)) == ("", 0)


def test_every_path_ends_with_a_slash(schema):
    assert [path for path in schema["paths"] if not path.endswith("/")] == []


def test_every_list_declares_its_pagination(schema):
    arrays, lists = [], []
    for path, method, operation in operations(schema):
        for code, response in operation["responses"].items():
            body = response.get("content", {}).get("application/json", {}).get("schema")
            if not code.startswith("2") or body is None:
                continue
            resolved = resolve(schema, body)
            if resolved.get("type") == "array":
                arrays.append((method, path))
            if method == "get" and set(resolved.get("properties", {})) == {
                "count",
                "next",
                "previous",
                "results",
            }:
                lists.append(path)
    assert arrays == []
    assert len(lists) == 26  # + metrics, command templates, experiments, model servers
    assert "/api/v1/environments/{id}/attachments/" in lists
    assert "/api/v1/run-batches/{id}/groups/" in lists
    assert "/api/v1/projects/{id}/training-jobs/" in lists
    assert "/api/v1/projects/{id}/datasets/" in lists
    assert "/api/v1/datasets/{id}/versions/" in lists


def test_every_4xx_declares_the_error_shape(schema):
    missing = []
    for path, method, operation in operations(schema):
        responses = operation["responses"]
        for code in ("400", "401", "403", "404", "429"):
            if code not in responses:
                missing.append((method, path, code))
        for code, response in responses.items():
            if code.startswith("4"):
                body = response["content"]["application/json"]["schema"]
                if body.get("$ref") not in (
                    ERROR_REF,
                    "#/components/schemas/SpecProblemsErrorOutput",
                ):
                    missing.append((method, path, code))
    assert missing == []
    error = schema["components"]["schemas"]["ErrorOutput"]
    assert sorted(error["required"]) == ["details", "message"]


def test_request_bodies_are_json_only(schema):
    types = {
        (method, path): list(operation["requestBody"]["content"])
        for path, method, operation in operations(schema)
        if "requestBody" in operation
    }
    assert types
    assert {tuple(value) for value in types.values()} == {("application/json",)}


def test_form_encoded_api_bodies_are_refused_415(api_client_for, author, project):
    response = api_client_for(author).post(
        "/api/v1/tokens/", "name=x", content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 415
    assert response.json() == {
        "message": 'Unsupported media type "application/x-www-form-urlencoded" in request.',
        "details": {},
    }


@pytest.mark.parametrize(
    "legacy",
    ["/api/v1/environments/import", "/api/v1/environments/{pk}/spec"],
)
def test_slash_less_spellings_of_earlier_releases_still_answer(
    api_client_for, viewer, author, project, legacy
):
    from tests.core.test_hostile_input import SAMPLE

    client = api_client_for(author)
    spec = SAMPLE.read_text()
    created = client.post(
        "/api/v1/environments/import/",
        f'{{"project": {project.pk}, "spec": {spec}}}',
        content_type="application/json",
    )
    assert created.status_code == 201
    pk = created.json()["id"]
    if "{pk}" in legacy:
        url = legacy.format(pk=pk)
        assert client.get(url).json() == client.get(url + "/").json()
    else:
        response = client.post(
            legacy, f'{{"project": {project.pk}, "spec": {spec}}}', content_type="application/json"
        )
        assert response.status_code == 201


def test_file_downloads_declare_binary_bodies(schema):
    """A generated client saves an export as bytes: a zip or Parquet body is never a string."""
    [export] = [
        op for _, _, op in operations(schema) if op["operationId"] == "dataset_versions_export"
    ]
    content = export["responses"]["200"]["content"]
    for media_type in ("application/zip", "application/vnd.apache.parquet", "application/jsonl"):
        assert content[media_type]["schema"] == {"type": "string", "format": "binary"}, media_type
