"""Environments as a whole: list, import, detail, the spec, and the life-cycle actions."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.response import Response

from apps.accounts.access import project_get_for_user_by_pk
from apps.accounts.models import Role
from apps.core.api import StandardPagination, paginated_response
from apps.core.apis import JobOutput
from apps.environments.access import environment_get_for_user
from apps.environments.apis.common import (
    E400,
    E403,
    E404,
    READ_ERRORS,
    SPEC_WRITE_ERRORS,
    WRITE_ERRORS,
    JsonApiView,
    validated,
)
from apps.environments.apis.serializers import (
    EnvironmentDetailOutput,
    EnvironmentFilterInput,
    EnvironmentImportInput,
    EnvironmentOutput,
    EnvironmentUpdateInput,
    EnvironmentWithProblemsOutput,
)
from apps.environments.models import Environment, EnvironmentStatus
from apps.environments.selectors import (
    EnvironmentFilters,
    environment_list,
    environment_list_for_user,
    environment_part_counts,
    environment_static_problems,
)
from apps.environments.services import (
    environment_approve,
    environment_archive,
    environment_delete,
    environment_duplicate,
    environment_import,
    environment_replace_spec,
    environment_restore,
    environment_update,
    environment_validation_start,
)
from apps.environments.services.attachment_owners import attachments_owned_check
from apps.environments.specs import environment_spec
from coworkenv_engine.spec import spec_json_schema

TAG = "environments"


def environment_payload(environment: Environment, *, with_problems: bool = False) -> dict:
    """The detail representation: the row, its part counts, its latest validation (and, after
    a write of the spec, what static validation finds in it)."""
    counts = environment_part_counts(environment=environment)
    environment.task_count = counts["tasks"]
    environment.tool_count = counts["tools"]
    environment.record_count = counts["records"]
    if with_problems:
        environment.problems = environment_static_problems(environment=environment)
        return EnvironmentWithProblemsOutput(environment).data
    return EnvironmentDetailOutput(environment).data


def _reloaded(environment: Environment, user) -> Environment:
    """The row as stored now, with the relations the output reads."""
    return environment_get_for_user(user, environment.pk)


class EnvironmentListApi(JsonApiView):
    pagination_class = StandardPagination

    @extend_schema(
        tags=[TAG],
        operation_id="environments_list",
        summary="List environments",
        description="Environments of one project (``project``) or of every project you belong "
        "to, newest edit first unless ``sort`` says otherwise. Archived environments appear only "
        "with ``status=archived``. An unknown filter value is a 400, not silently ignored.",
        parameters=[EnvironmentFilterInput],
        responses={200: EnvironmentOutput(many=True), 400: E400, 404: E404},
    )
    def get(self, request):
        params = validated(EnvironmentFilterInput, request.query_params)
        project_id = params.pop("project", None)
        filters = EnvironmentFilters(**{**params, "sort": params.get("sort") or "updated"})
        if project_id is None:
            environments = environment_list_for_user(user=request.user, filters=filters)
        else:
            project = project_get_for_user_by_pk(request.user, project_id)
            environments = environment_list(project=project, filters=filters)
        return paginated_response(request, self, environments, EnvironmentOutput)


class EnvironmentImportApi(JsonApiView):
    @extend_schema(
        tags=[TAG],
        operation_id="environments_import",
        summary="Import a spec as a new environment",
        description="Stores a ``coworkenv.environment/v1`` document as a new draft environment "
        "of the project (author role or higher). A document that is not schema-valid saves "
        "nothing: the 400 lists every problem with its JSON pointer. The 201 includes what "
        "static validation finds (``problems``); POST …/validate for the full verdict.",
        request=EnvironmentImportInput,
        responses={201: EnvironmentWithProblemsOutput, **SPEC_WRITE_ERRORS},
    )
    def post(self, request):
        data = validated(EnvironmentImportInput, request.data)
        project = project_get_for_user_by_pk(request.user, data["project"], min_role=Role.AUTHOR)
        attachments_owned_check(project=project, document=data["spec"])
        environment = environment_import(project=project, spec=data["spec"], user=request.user)
        payload = environment_payload(_reloaded(environment, request.user), with_problems=True)
        return Response(payload, status=status.HTTP_201_CREATED)


class EnvironmentDetailApi(JsonApiView):
    @extend_schema(
        tags=[TAG],
        summary="Retrieve an environment",
        description="With its part counts and its latest validation report.",
        responses={200: EnvironmentDetailOutput, **READ_ERRORS},
    )
    def get(self, request, pk):
        environment = environment_get_for_user(request.user, pk)
        return Response(environment_payload(environment))

    @extend_schema(
        tags=[TAG],
        summary="Edit an environment's name, domain or description",
        description="Author role or higher. Bumps the revision; the environment becomes a draft.",
        request=EnvironmentUpdateInput,
        responses={200: EnvironmentDetailOutput, **SPEC_WRITE_ERRORS},
    )
    def patch(self, request, pk):
        environment = environment_get_for_user(request.user, pk, min_role=Role.AUTHOR)
        data = validated(EnvironmentUpdateInput, request.data)
        environment_update(
            environment=environment,
            name=data.get("name", environment.name),
            domain=data.get("domain", environment.domain),
            description=data.get("description", environment.description),
        )
        return Response(environment_payload(_reloaded(environment, request.user)))

    @extend_schema(
        tags=[TAG],
        summary="Delete an archived environment",
        description="Author role or higher. Deleting is two steps, as in the web UI: archive "
        "first (reversible), then delete (not reversible). A 400 for an environment that is "
        "not archived.",
        responses={204: None, **WRITE_ERRORS},
    )
    def delete(self, request, pk):
        environment = environment_get_for_user(request.user, pk, min_role=Role.AUTHOR)
        environment_delete(environment=environment)
        return Response(status=status.HTTP_204_NO_CONTENT)


class EnvironmentSpecApi(JsonApiView):
    @extend_schema(
        tags=[TAG],
        operation_id="environments_spec_retrieve",
        summary="The environment's canonical spec",
        description="The ``coworkenv.environment/v1`` document of the current revision, in "
        "canonical form: importing it gives an environment with the same ``spec_hash``.",
        responses={200: OpenApiResponse(OpenApiTypes.OBJECT), **READ_ERRORS},
    )
    def get(self, request, pk):
        environment = environment_get_for_user(request.user, pk)
        return Response(environment_spec(environment))

    @extend_schema(
        tags=[TAG],
        operation_id="environments_spec_update",
        summary="Replace the whole spec",
        description="The body is a whole ``coworkenv.environment/v1`` document (author role or "
        "higher); tasks, tools and records are replaced by the document's. A document that is "
        "not schema-valid changes nothing (400 with every problem and its pointer).",
        request=OpenApiTypes.OBJECT,
        responses={200: EnvironmentWithProblemsOutput, **SPEC_WRITE_ERRORS},
    )
    def put(self, request, pk):
        environment = environment_get_for_user(request.user, pk, min_role=Role.AUTHOR)
        environment_replace_spec(environment=environment, spec=request.data)
        payload = environment_payload(_reloaded(environment, request.user), with_problems=True)
        return Response(payload)


class EnvironmentValidateApi(JsonApiView):
    @extend_schema(
        tags=[TAG],
        summary="Validate the current revision (a background job)",
        description="Author role or higher. Returns the job at once (202); follow it at "
        "/api/v1/jobs/{id}/. When it finishes, the environment is ``valid`` or ``invalid`` and "
        "its ``latest_validation`` holds the report — unless it was edited meanwhile.",
        request=None,
        responses={202: JobOutput, **WRITE_ERRORS},
    )
    def post(self, request, pk):
        environment = environment_get_for_user(request.user, pk, min_role=Role.AUTHOR)
        job = environment_validation_start(
            project=environment.project, environments=[environment], started_by=request.user
        )
        return Response(JobOutput(job).data, status=status.HTTP_202_ACCEPTED)


class EnvironmentApproveApi(JsonApiView):
    @extend_schema(
        tags=[TAG],
        summary="Approve a valid environment",
        description="Reviewer role or higher; only a ``valid`` environment can be approved.",
        request=None,
        responses={200: EnvironmentDetailOutput, **WRITE_ERRORS},
    )
    def post(self, request, pk):
        environment = environment_get_for_user(request.user, pk, min_role=Role.REVIEWER)
        environment_approve(environment=environment)
        return Response(environment_payload(_reloaded(environment, request.user)))


class EnvironmentArchiveApi(JsonApiView):
    @extend_schema(
        tags=[TAG],
        summary="Archive an environment",
        description="Author role or higher. Archived environments are read-only and hidden "
        "from lists until restored. Archiving an archived environment changes nothing.",
        request=None,
        responses={200: EnvironmentDetailOutput, 403: E403, 404: E404},
    )
    def post(self, request, pk):
        environment = environment_get_for_user(request.user, pk, min_role=Role.AUTHOR)
        if environment.status != EnvironmentStatus.ARCHIVED:
            environment_archive(environment=environment)
        return Response(environment_payload(_reloaded(environment, request.user)))


class EnvironmentRestoreApi(JsonApiView):
    @extend_schema(
        tags=[TAG],
        summary="Restore an archived environment as a draft",
        description="Author role or higher; 400 for an environment that is not archived.",
        request=None,
        responses={200: EnvironmentDetailOutput, **WRITE_ERRORS},
    )
    def post(self, request, pk):
        environment = environment_get_for_user(request.user, pk, min_role=Role.AUTHOR)
        environment_restore(environment=environment)
        return Response(environment_payload(_reloaded(environment, request.user)))


class EnvironmentDuplicateApi(JsonApiView):
    @extend_schema(
        tags=[TAG],
        summary="Duplicate an environment",
        description="Author role or higher. The copy is a new draft in the same project, named "
        "“… (copy)”, with ``duplicated_from`` set.",
        request=None,
        responses={201: EnvironmentDetailOutput, 403: E403, 404: E404},
    )
    def post(self, request, pk):
        environment = environment_get_for_user(request.user, pk, min_role=Role.AUTHOR)
        copy = environment_duplicate(environment=environment, user=request.user)
        return Response(
            environment_payload(_reloaded(copy, request.user)), status=status.HTTP_201_CREATED
        )


class SpecSchemaApi(JsonApiView):
    @extend_schema(
        tags=[TAG],
        operation_id="spec_schema_retrieve",
        summary="The JSON Schema of coworkenv.environment/v1",
        responses={200: OpenApiResponse(OpenApiTypes.OBJECT, description="A JSON Schema.")},
    )
    def get(self, request):
        return Response(spec_json_schema())
