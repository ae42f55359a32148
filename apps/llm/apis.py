from django.urls import path
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.access import check_project_role, project_get_for_user_by_pk
from apps.accounts.job_access import job_get_for_user
from apps.accounts.models import Role
from apps.core.api import StandardPagination, paginated_response
from apps.core.apis import JobOutput
from apps.core.exceptions import ApplicationError
from apps.core.safeinput import ID_MAX
from apps.llm.access import endpoint_get_for_user, error_bodies_visible
from apps.llm.models import (
    MAX_CONCURRENCY_LIMIT,
    ContextStrategy,
    LLMCallStatus,
    ModelEndpoint,
    validate_base_url,
    validate_env_var_name,
)
from apps.llm.selectors import (
    endpoint_list,
    judge_verdict_totals,
    llm_call_list,
    project_judge_get,
)
from apps.llm.services import (
    TEST_TIMEOUT_CAP_S,
    endpoint_create,
    endpoint_delete,
    endpoint_test_start,
    endpoint_update,
    project_judge_set,
)


class EndpointOutput(serializers.Serializer):
    id = serializers.IntegerField()
    project = serializers.IntegerField(source="project_id")
    name = serializers.CharField()
    base_url = serializers.CharField()
    model = serializers.CharField()
    api_key_env = serializers.CharField(
        help_text="The name of the server's environment variable holding the key (never the key)."
    )
    temperature = serializers.FloatField()
    max_tokens = serializers.IntegerField()
    request_timeout_s = serializers.FloatField()
    max_concurrency = serializers.IntegerField()
    price_input_per_million = serializers.DecimalField(max_digits=12, decimal_places=4)
    price_output_per_million = serializers.DecimalField(max_digits=12, decimal_places=4)
    supports_json_schema = serializers.BooleanField()
    context_tokens = serializers.IntegerField(help_text="0 = unknown: requests are sent whole.")
    context_strategy = serializers.ChoiceField(choices=ContextStrategy.choices)
    keep_tool_results = serializers.IntegerField()
    created_by = serializers.CharField(source="created_by.username", allow_null=True, default=None)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class EndpointInput(serializers.Serializer):
    name = serializers.CharField(max_length=80)
    base_url = serializers.CharField(max_length=500, validators=[validate_base_url])
    model = serializers.CharField(max_length=200)
    api_key_env = serializers.CharField(
        max_length=100,
        required=False,
        allow_blank=True,
        validators=[validate_env_var_name],
        help_text="The NAME of the environment variable holding the key, e.g. OPENAI_API_KEY.",
    )
    temperature = serializers.FloatField(required=False, min_value=0.0, max_value=2.0)
    max_tokens = serializers.IntegerField(required=False, min_value=1, max_value=1_000_000)
    request_timeout_s = serializers.FloatField(required=False, min_value=0.1, max_value=3600.0)
    max_concurrency = serializers.IntegerField(
        required=False, min_value=1, max_value=MAX_CONCURRENCY_LIMIT
    )
    price_input_per_million = serializers.DecimalField(
        max_digits=12, decimal_places=4, min_value=0, required=False
    )
    price_output_per_million = serializers.DecimalField(
        max_digits=12, decimal_places=4, min_value=0, required=False
    )
    supports_json_schema = serializers.BooleanField(required=False)
    context_tokens = serializers.IntegerField(required=False, min_value=0, max_value=10_000_000)
    context_strategy = serializers.ChoiceField(choices=ContextStrategy.choices, required=False)
    keep_tool_results = serializers.IntegerField(required=False, min_value=0, max_value=1000)


class LLMCallOutput(serializers.Serializer):
    id = serializers.IntegerField()
    project = serializers.IntegerField(source="project_id")
    endpoint = serializers.IntegerField(source="endpoint_id", allow_null=True)
    endpoint_name = serializers.CharField()
    model = serializers.CharField()
    job = serializers.IntegerField(source="job_id", allow_null=True)
    purpose = serializers.CharField()
    group = serializers.UUIDField(help_text="Shared by the attempts of one request.")
    attempt = serializers.IntegerField()
    status = serializers.ChoiceField(choices=LLMCallStatus.choices)
    request_messages = serializers.JSONField()
    request_params = serializers.JSONField()
    response = serializers.JSONField()
    http_status = serializers.IntegerField(allow_null=True)
    error = serializers.CharField()
    tokens_in = serializers.IntegerField()
    tokens_out = serializers.IntegerField()
    latency_ms = serializers.IntegerField()
    cost = serializers.DecimalField(max_digits=14, decimal_places=6)
    created_at = serializers.DateTimeField()


class LLMCallViewerOutput(LLMCallOutput):
    """A call as a viewer sees it: without the body an endpoint sent with an error."""

    response = serializers.SerializerMethodField()

    def get_response(self, call) -> dict:
        return {key: value for key, value in call.response.items() if key != "error_body"}


def _call_output(user, project):
    membership = check_project_role(user, project)
    return LLMCallOutput if error_bodies_visible(membership) else LLMCallViewerOutput


_STATUS_FILTER = OpenApiParameter(
    "status", str, enum=LLMCallStatus.values, required=False, description="Only this outcome."
)


class EndpointListApi(APIView):
    pagination_class = StandardPagination

    @extend_schema(responses=EndpointOutput(many=True), operation_id="model_endpoints_list")
    def get(self, request, pk):
        project = project_get_for_user_by_pk(request.user, pk)
        return paginated_response(request, self, endpoint_list(project=project), EndpointOutput)

    @extend_schema(
        request=EndpointInput,
        responses={201: EndpointOutput},
        operation_id="model_endpoints_create",
    )
    def post(self, request, pk):
        project = project_get_for_user_by_pk(request.user, pk, min_role=Role.AUTHOR)
        data = EndpointInput(data=request.data)
        data.is_valid(raise_exception=True)
        endpoint = endpoint_create(project=project, created_by=request.user, **data.validated_data)
        return Response(EndpointOutput(endpoint).data, status=status.HTTP_201_CREATED)


class EndpointDetailApi(APIView):
    @extend_schema(responses=EndpointOutput, operation_id="model_endpoints_retrieve")
    def get(self, request, pk):
        return Response(EndpointOutput(endpoint_get_for_user(request.user, pk)).data)

    def _update(self, request, pk, *, partial: bool):
        endpoint = endpoint_get_for_user(request.user, pk, min_role=Role.AUTHOR)
        data = EndpointInput(data=request.data, partial=partial)
        data.is_valid(raise_exception=True)
        endpoint = endpoint_update(endpoint=endpoint, **data.validated_data)
        return Response(EndpointOutput(endpoint).data)

    @extend_schema(
        request=EndpointInput, responses=EndpointOutput, operation_id="model_endpoints_update"
    )
    def put(self, request, pk):
        return self._update(request, pk, partial=False)

    @extend_schema(
        request=EndpointInput,
        responses=EndpointOutput,
        operation_id="model_endpoints_partial_update",
    )
    def patch(self, request, pk):
        return self._update(request, pk, partial=True)

    @extend_schema(responses={204: None}, operation_id="model_endpoints_destroy")
    def delete(self, request, pk):
        endpoint_delete(endpoint=endpoint_get_for_user(request.user, pk, min_role=Role.ADMIN))
        return Response(status=status.HTTP_204_NO_CONTENT)


class EndpointTestApi(APIView):
    @extend_schema(
        request=None,
        responses={202: JobOutput},
        operation_id="model_endpoints_test",
        description="Queue one tiny chat request (not retried, at most "
        f"{TEST_TIMEOUT_CAP_S:g} s) as a job; poll `/api/v1/jobs/{{id}}/`. When it ends, the "
        "job's `result` holds `ok`, `content`, `model`, `latency_ms`, `tokens_in`, "
        "`tokens_out`, `cost`, `error` (the exact error), `status_code` and `call_id`; a "
        "failure of the endpoint ends the job `failed` with the error as its message.",
    )
    def post(self, request, pk):
        endpoint = endpoint_get_for_user(request.user, pk, min_role=Role.AUTHOR)
        job = endpoint_test_start(endpoint=endpoint, started_by=request.user)
        return Response(JobOutput(job).data, status=status.HTTP_202_ACCEPTED)


class EndpointCallListApi(APIView):
    pagination_class = StandardPagination

    @extend_schema(
        parameters=[_STATUS_FILTER],
        responses=LLMCallOutput(many=True),
        operation_id="model_endpoints_calls_list",
    )
    def get(self, request, pk):
        endpoint = endpoint_get_for_user(request.user, pk)
        calls = llm_call_list(endpoint=endpoint, status=request.query_params.get("status", ""))
        return paginated_response(
            request, self, calls, _call_output(request.user, endpoint.project)
        )


class JobCallListApi(APIView):
    pagination_class = StandardPagination

    @extend_schema(
        parameters=[_STATUS_FILTER],
        responses=LLMCallOutput(many=True),
        operation_id="jobs_llm_calls_list",
    )
    def get(self, request, pk):
        job = job_get_for_user(request.user, pk)
        calls = llm_call_list(job=job, status=request.query_params.get("status", ""))
        return paginated_response(request, self, calls, _call_output(request.user, job.project))


class JudgeSettingOutput(serializers.Serializer):
    endpoint = serializers.IntegerField(allow_null=True, help_text="None: no judge.")
    model = serializers.CharField(allow_blank=True)
    cached_verdicts = serializers.IntegerField()
    cache_hits = serializers.IntegerField()


class JudgeSettingInput(serializers.Serializer):
    endpoint = serializers.IntegerField(
        allow_null=True,
        min_value=1,
        max_value=ID_MAX,
        help_text="A model endpoint of the project; null clears the judge.",
    )


def _judge_output(project) -> dict:
    setting = project_judge_get(project=project)
    totals = judge_verdict_totals(project=project)
    return {
        "endpoint": setting.endpoint_id if setting else None,
        "model": setting.endpoint.model if setting else "",
        "cached_verdicts": totals["verdicts"],
        "cache_hits": totals["hits"],
    }


class JudgeSettingApi(APIView):
    @extend_schema(responses=JudgeSettingOutput, operation_id="project_judge_retrieve")
    def get(self, request, pk):
        project = project_get_for_user_by_pk(request.user, pk)
        return Response(JudgeSettingOutput(_judge_output(project)).data)

    @extend_schema(
        request=JudgeSettingInput,
        responses=JudgeSettingOutput,
        operation_id="project_judge_update",
    )
    def put(self, request, pk):
        project = project_get_for_user_by_pk(request.user, pk, min_role=Role.AUTHOR)
        data = JudgeSettingInput(data=request.data)
        data.is_valid(raise_exception=True)
        endpoint = None
        if data.validated_data["endpoint"] is not None:
            endpoint = ModelEndpoint.objects.filter(
                project=project, pk=data.validated_data["endpoint"]
            ).first()
            if endpoint is None:
                raise ApplicationError(
                    f"No model endpoint {data.validated_data['endpoint']} in this project.",
                    {"fields": {"endpoint": ["Not found."]}},
                )
        project_judge_set(project=project, endpoint=endpoint, user=request.user)
        return Response(JudgeSettingOutput(_judge_output(project)).data)


urlpatterns = [
    path("projects/<int:pk>/judge/", JudgeSettingApi.as_view(), name="project_judge"),
    path(
        "projects/<int:pk>/model-endpoints/", EndpointListApi.as_view(), name="model_endpoint_list"
    ),
    path("model-endpoints/<int:pk>/", EndpointDetailApi.as_view(), name="model_endpoint_detail"),
    path("model-endpoints/<int:pk>/test/", EndpointTestApi.as_view(), name="model_endpoint_test"),
    path(
        "model-endpoints/<int:pk>/calls/",
        EndpointCallListApi.as_view(),
        name="model_endpoint_calls",
    ),
    path("jobs/<int:pk>/llm-calls/", JobCallListApi.as_view(), name="job_llm_calls"),
]
