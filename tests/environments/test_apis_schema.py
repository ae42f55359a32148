"""The OpenAPI schema documents every endpoint of the environments API, with its bodies."""

import pytest
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.validation import validate_schema

EXPECTED = {
    "/api/v1/environments/": {"get"},
    "/api/v1/environments/import/": {"post"},
    "/api/v1/environments/{id}/": {"get", "patch", "delete"},
    "/api/v1/environments/{id}/spec/": {"get", "put"},
    "/api/v1/environments/{id}/validate/": {"post"},
    "/api/v1/environments/{id}/approve/": {"post"},
    "/api/v1/environments/{id}/archive/": {"post"},
    "/api/v1/environments/{id}/restore/": {"post"},
    "/api/v1/environments/{id}/duplicate/": {"post"},
    "/api/v1/environments/{id}/tasks/": {"get", "post"},
    "/api/v1/tasks/{id}/": {"get", "patch", "delete"},
    "/api/v1/tasks/{id}/graders/": {"get", "post"},
    "/api/v1/graders/{id}/": {"get", "patch", "delete"},
    "/api/v1/environments/{id}/tools/": {"get", "post"},
    "/api/v1/tools/{id}/": {"get", "patch", "delete"},
    "/api/v1/environments/{id}/records/": {"get", "post"},
    "/api/v1/records/{id}/": {"get", "patch", "delete"},
    "/api/v1/spec-schema/": {"get"},
    "/api/v1/jobs/{id}/": {"get"},
}


@pytest.fixture(scope="module")
def schema():
    schema = SchemaGenerator().get_schema(request=None, public=True)
    validate_schema(schema)
    return schema


def ref(content) -> str:
    return content["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]


def test_every_endpoint_is_documented(schema):
    for path, methods in EXPECTED.items():
        assert path in schema["paths"], path
        documented = set(schema["paths"][path]) - {"parameters"}
        assert documented == methods, path


def test_request_and_response_bodies(schema):
    paths = schema["paths"]
    create = paths["/api/v1/environments/import/"]["post"]
    assert ref(create["requestBody"]["content"]) == "EnvironmentImportInputRequest"
    assert list(create["requestBody"]["content"]) == ["application/json"]
    assert ref(create["responses"]["201"]["content"]) == "EnvironmentWithProblemsOutput"
    assert ref(create["responses"]["400"]["content"]) == "SpecProblemsErrorOutput"
    assert {"201", "400", "403", "404"} <= set(create["responses"])
    listing = paths["/api/v1/environments/"]["get"]
    assert ref(listing["responses"]["200"]["content"]) == "PaginatedEnvironmentOutputList"
    assert {p["name"] for p in listing["parameters"]} == {
        "project", "status", "domain", "capability", "split", "source", "q", "sort", "page",
        "page_size",
    }  # fmt: skip
    validate = paths["/api/v1/environments/{id}/validate/"]["post"]
    assert ref(validate["responses"]["202"]["content"]) == "JobOutput"
    grader_patch = paths["/api/v1/graders/{id}/"]["patch"]
    assert ref(grader_patch["requestBody"]["content"]) == "PatchedGraderUpdateInputRequest"
    assert "204" in paths["/api/v1/records/{id}/"]["delete"]["responses"]


def test_component_fields_follow_the_spec_names(schema):
    components = schema["components"]["schemas"]
    assert {"key", "check", "category", "weight", "at_turn"} <= set(
        components["GraderOutput"]["properties"]
    )
    assert "problems" in components["EnvironmentWithProblemsOutput"]["properties"]
    assert components["SpecProblemsErrorOutput"]["properties"]["details"]["$ref"].endswith(
        "Details"
    )
    assert set(components["TaskCreateInputRequest"]["required"]) == {"key", "turns", "graders"}
    assert components["EnvironmentStatusEnum"]["enum"] == [
        "draft",
        "valid",
        "invalid",
        "approved",
        "archived",
    ]
