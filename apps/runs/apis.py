"""REST API: run batches (create, list, retrieve with metrics, cancel) and runs (list with
filters, retrieve with transcript and verdicts)."""

from django.urls import path
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.access import project_get_for_user_by_pk
from apps.accounts.models import Role
from apps.core.api import StandardPagination, paginated_response
from apps.core.apis import JobOutput
from apps.core.exceptions import ApplicationError
from apps.core.safeinput import ID_MAX, INT32_MAX
from apps.environments.models import EnvironmentStatus, Split
from apps.llm.models import ModelEndpoint
from apps.runs.access import batch_get_for_user, run_get_for_user
from apps.runs.models import (
    MAX_ATTEMPTS,
    MAX_CONCURRENCY,
    MAX_GROUP_SIZE,
    MAX_TEMPERATURE,
    MAX_TRIALS,
    PolicyKind,
    RunRole,
    RunStatus,
    UserSide,
)
from apps.runs.rollouts import CREDITS, Variant, group_list, group_members, member_runs
from apps.runs.selectors import RunFilters, batch_list, batch_metrics, run_list
from apps.runs.services import (
    BatchSettings,
    TaskSelection,
    run_batch_cancel,
    run_batch_create,
    run_batch_resume,
)
from apps.runs.services.batches import DEFAULT_STATUSES
from coworkenv_engine.rewards import GROUP_METHODS, REWARD_VARIANTS


class RunBatchOutput(serializers.Serializer):
    id = serializers.IntegerField()
    project = serializers.IntegerField(source="project_id")
    name = serializers.CharField()
    policy_kind = serializers.ChoiceField(choices=PolicyKind.choices)
    policy = serializers.CharField(source="policy_label", help_text="oracle, or the model.")
    endpoint = serializers.IntegerField(source="endpoint_id", allow_null=True)
    endpoint_name = serializers.CharField()
    model = serializers.CharField()
    role = serializers.ChoiceField(choices=RunRole.choices)
    task_ids = serializers.ListField(child=serializers.IntegerField())
    selection = serializers.JSONField()
    task_set_key = serializers.CharField()
    trials = serializers.IntegerField()
    group_size = serializers.IntegerField(allow_null=True, help_text="G; null: no groups.")
    temperature = serializers.FloatField(allow_null=True, help_text="null: the endpoint's.")
    discount = serializers.FloatField(help_text="gamma of the groups' reward-to-go.")
    concurrency = serializers.IntegerField()
    max_tool_calls = serializers.IntegerField()
    max_rounds_per_turn = serializers.IntegerField()
    max_attempts = serializers.IntegerField()
    faults = serializers.BooleanField()
    user_side = serializers.ChoiceField(choices=UserSide.choices)
    simulator_endpoint = serializers.IntegerField(source="simulator_endpoint_id", allow_null=True)
    judge_endpoint = serializers.IntegerField(source="judge_endpoint_id", allow_null=True)
    judge_model = serializers.CharField()
    seed = serializers.IntegerField()
    executor = serializers.CharField()
    job = JobOutput()
    created_by = serializers.CharField(source="created_by.username", allow_null=True, default=None)
    created_at = serializers.DateTimeField()


class RunBatchDetailOutput(RunBatchOutput):
    metrics = serializers.JSONField(
        help_text="summary (average_score, pass_rate, strict_rate, pass_at_k, pass_hat_k by "
        "k), by_capability, by_split, by_turns and by_days (the tasks' horizon), by_category, "
        "by_task, failing_graders, counts."
    )


class RunBatchInput(serializers.Serializer):
    name = serializers.CharField(max_length=200, required=False, allow_blank=True)
    policy = serializers.ChoiceField(
        choices=PolicyKind.choices, help_text="oracle (no LLM) or endpoint (give `endpoint`)."
    )
    endpoint = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=ID_MAX
    )
    role = serializers.ChoiceField(choices=RunRole.choices, default=RunRole.EVAL)
    environments = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=ID_MAX), required=False, default=list
    )
    capabilities = serializers.ListField(
        child=serializers.SlugField(), required=False, default=list
    )
    split = serializers.ChoiceField(choices=Split.choices, required=False, allow_blank=True)
    statuses = serializers.ListField(
        child=serializers.ChoiceField(
            choices=[c for c in EnvironmentStatus.values if c != EnvironmentStatus.ARCHIVED]
        ),
        required=False,
        default=list(DEFAULT_STATUSES),
    )
    trials = serializers.IntegerField(min_value=1, max_value=MAX_TRIALS, default=1)
    group_size = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=MAX_GROUP_SIZE,
        help_text="Student batches: G samples per task, scored as rollout groups (trials 1).",
    )
    temperature = serializers.FloatField(
        required=False, allow_null=True, min_value=0.0, max_value=MAX_TEMPERATURE
    )
    discount = serializers.FloatField(required=False, default=1.0, min_value=0.0, max_value=1.0)
    concurrency = serializers.IntegerField(min_value=1, max_value=MAX_CONCURRENCY, default=4)
    max_tool_calls = serializers.IntegerField(min_value=1, max_value=1000, default=50)
    max_rounds_per_turn = serializers.IntegerField(min_value=1, max_value=200, default=20)
    max_attempts = serializers.IntegerField(min_value=1, max_value=MAX_ATTEMPTS, default=3)
    faults = serializers.BooleanField(default=True)
    user_side = serializers.ChoiceField(choices=UserSide.choices, default=UserSide.SCRIPTED)
    simulator_endpoint = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=ID_MAX
    )
    judge_endpoint = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=ID_MAX,
        help_text="Scores judge graders; default: the project's judge (none: they are skipped).",
    )
    # Trial i runs with seed + i, which must still fit the column.
    seed = serializers.IntegerField(default=0, min_value=0, max_value=INT32_MAX - MAX_TRIALS)


class RunListOutput(serializers.Serializer):
    id = serializers.IntegerField()
    batch = serializers.IntegerField(source="batch_id")
    task = serializers.IntegerField(source="task_ref", help_text="The task's id.")
    task_key = serializers.CharField()
    task_title = serializers.CharField()
    environment = serializers.IntegerField(source="environment_id", allow_null=True)
    environment_name = serializers.CharField()
    split = serializers.CharField()
    capabilities = serializers.ListField(child=serializers.CharField())
    trial = serializers.IntegerField()
    attempt = serializers.IntegerField()
    status = serializers.ChoiceField(choices=RunStatus.choices)
    policy_name = serializers.CharField()
    endpoint_name = serializers.CharField()
    model = serializers.CharField()
    environment_revision = serializers.IntegerField(allow_null=True)
    spec_hash = serializers.CharField()
    seed = serializers.IntegerField()
    completion = serializers.FloatField(allow_null=True)
    safety = serializers.FloatField(allow_null=True)
    robustness = serializers.FloatField(allow_null=True)
    score = serializers.FloatField(allow_null=True)
    passed = serializers.BooleanField(allow_null=True)
    strict = serializers.BooleanField(allow_null=True)
    stop_reason = serializers.CharField()
    tool_calls = serializers.IntegerField()
    tool_errors = serializers.IntegerField()
    tokens_in = serializers.IntegerField()
    tokens_out = serializers.IntegerField()
    cost = serializers.DecimalField(max_digits=14, decimal_places=6)
    latency_ms = serializers.IntegerField()
    error = serializers.CharField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)


class RunDetailOutput(RunListOutput):
    transcript = serializers.JSONField(help_text="OpenAI chat messages.")
    tools = serializers.JSONField(help_text="OpenAI function tools offered to the agent.")
    audit_log = serializers.JSONField(help_text="Every tool call with its result and diff.")
    exogenous_log = serializers.JSONField(help_text="Exogenous updates, loud or silent.")
    verdicts = serializers.JSONField(help_text="Per grader: status, weight, evidence.")
    final_state_hash = serializers.CharField()


def _endpoint(project, pk, field: str):
    if pk is None:
        return None
    endpoint = ModelEndpoint.objects.filter(project=project, pk=pk).first()
    if endpoint is None:
        raise ApplicationError(
            f"No model endpoint {pk} in this project.", {"fields": {field: ["Not found."]}}
        )
    return endpoint


class RunBatchListApi(APIView):
    pagination_class = StandardPagination

    @extend_schema(responses=RunBatchOutput(many=True), operation_id="run_batches_list")
    def get(self, request, pk):
        project = project_get_for_user_by_pk(request.user, pk)
        return paginated_response(request, self, batch_list(project=project), RunBatchOutput)

    @extend_schema(
        request=RunBatchInput,
        responses={201: RunBatchOutput},
        operation_id="run_batches_create",
        description="Create a batch: one run per (task, trial), enqueued on the llm queue. "
        "Follow its progress through `job` (or GET /run-batches/{id}/).",
    )
    def post(self, request, pk):
        project = project_get_for_user_by_pk(request.user, pk, min_role=Role.AUTHOR)
        data = RunBatchInput(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        batch = run_batch_create(
            project=project,
            user=request.user,
            name=v.get("name", ""),
            policy_kind=v["policy"],
            endpoint=_endpoint(project, v.get("endpoint"), "endpoint"),
            role=v["role"],
            selection=TaskSelection(
                environments=tuple(v["environments"]),
                capabilities=tuple(v["capabilities"]),
                split=v.get("split", ""),
                statuses=tuple(v["statuses"]),
            ),
            settings=BatchSettings(
                trials=v["trials"],
                concurrency=v["concurrency"],
                max_tool_calls=v["max_tool_calls"],
                max_rounds_per_turn=v["max_rounds_per_turn"],
                max_attempts=v["max_attempts"],
                faults=v["faults"],
                user_side=v["user_side"],
                simulator_endpoint=_endpoint(
                    project, v.get("simulator_endpoint"), "simulator_endpoint"
                ),
                judge_endpoint=_endpoint(project, v.get("judge_endpoint"), "judge_endpoint"),
                seed=v["seed"],
                group_size=v.get("group_size"),
                temperature=v.get("temperature"),
                discount=v["discount"],
            ),
        )
        return Response(RunBatchOutput(batch).data, status=status.HTTP_201_CREATED)


class RunBatchDetailApi(APIView):
    @extend_schema(responses=RunBatchDetailOutput, operation_id="run_batches_retrieve")
    def get(self, request, pk):
        batch = batch_get_for_user(request.user, pk)
        batch.metrics = batch_metrics(batch=batch)
        return Response(RunBatchDetailOutput(batch).data)


class RunBatchCancelApi(APIView):
    @extend_schema(request=None, responses=RunBatchOutput, operation_id="run_batches_cancel")
    def post(self, request, pk):
        batch = batch_get_for_user(request.user, pk, min_role=Role.AUTHOR)
        return Response(RunBatchOutput(run_batch_cancel(batch=batch)).data)


class RunBatchResumeApi(APIView):
    @extend_schema(request=None, responses=RunBatchOutput, operation_id="run_batches_resume")
    def post(self, request, pk):
        batch = batch_get_for_user(request.user, pk, min_role=Role.AUTHOR)
        run_batch_resume(batch=batch)
        batch.refresh_from_db()
        return Response(RunBatchOutput(batch).data)


class RolloutGroupOutput(serializers.Serializer):
    id = serializers.IntegerField()
    batch = serializers.IntegerField(source="batch_id")
    task = serializers.IntegerField(source="task_ref", help_text="The task's id.")
    task_key = serializers.CharField()
    task_title = serializers.CharField()
    environment_name = serializers.CharField()
    size = serializers.IntegerField(help_text="G.")
    run_ids = serializers.ListField(child=serializers.IntegerField(), help_text="By trial.")
    scorable = serializers.IntegerField()
    mean_score = serializers.FloatField(allow_null=True)
    score_std = serializers.FloatField(allow_null=True)
    pass_rate = serializers.FloatField(allow_null=True)
    scored_at = serializers.DateTimeField()
    variant = serializers.JSONField(help_text="{reward, advantage, credit} as asked.")
    members = serializers.JSONField(
        help_text="Per member under the variant: index, run, trial, status, reward, advantage; "
        "turns [{turn, reward, advantage}] (credit=turn) or calls [{seq, tool, turn, reward, "
        "advantage}] and unattributed (credit=call)."
    )
    variants = serializers.JSONField(
        help_text="Every variant side by side: gamma, rewards[reward][i], "
        "advantages[reward][method][i], turn_rewards[i][k], turn_advantages[method][i][k], "
        "call_rewards[i][j], call_unattributed[i], call_advantages[method][i][j]."
    )


GROUP_PARAMETERS = [
    OpenApiParameter("reward", str, enum=list(REWARD_VARIANTS), required=False),
    OpenApiParameter("advantage", str, enum=list(GROUP_METHODS), required=False),
    OpenApiParameter("credit", str, enum=list(CREDITS), required=False),
]


class RolloutGroupListApi(APIView):
    pagination_class = StandardPagination

    @extend_schema(
        parameters=GROUP_PARAMETERS,
        responses=RolloutGroupOutput(many=True),
        operation_id="run_batch_groups_list",
        description="A student batch's scored rollout groups, with each member's reward and "
        "advantage under the chosen variant (default score / grpo / trajectory) and every "
        "variant side by side. Per-turn and per-call credit take reward=score and grpo or "
        "dr_grpo.",
    )
    def get(self, request, pk):
        batch = batch_get_for_user(request.user, pk)
        p = request.query_params
        variant = Variant.parse(p.get("reward"), p.get("advantage"), p.get("credit"))
        paginator = StandardPagination()
        page = paginator.paginate_queryset(group_list(batch=batch), request, view=self)
        runs = member_runs(page, with_calls=variant.credit == "call")
        for group in page:
            group.variant = variant.to_dict()
            group.members = group_members(group, variant, runs)
        return paginator.get_paginated_response(RolloutGroupOutput(page, many=True).data)


RUN_FILTERS = [
    OpenApiParameter("batch", int, required=False, description="Only this batch's runs."),
    OpenApiParameter("task", int, required=False, description="Only runs of this task id."),
    OpenApiParameter("status", str, enum=RunStatus.values, required=False),
    OpenApiParameter("passed", bool, required=False),
    OpenApiParameter(
        "policy", str, required=False, description="Policy name: oracle or llm:<model>."
    ),
]


class RunListApi(APIView):
    pagination_class = StandardPagination

    @extend_schema(
        parameters=RUN_FILTERS, responses=RunListOutput(many=True), operation_id="runs_list"
    )
    def get(self, request, pk):
        project = project_get_for_user_by_pk(request.user, pk)
        runs = run_list(project=project, filters=RunFilters.from_query(request.query_params))
        return paginated_response(request, self, runs, RunListOutput)


class RunDetailApi(APIView):
    @extend_schema(responses=RunDetailOutput, operation_id="runs_retrieve")
    def get(self, request, pk):
        return Response(RunDetailOutput(run_get_for_user(request.user, pk)).data)


urlpatterns = [
    path("projects/<int:pk>/run-batches/", RunBatchListApi.as_view(), name="run_batch_list"),
    path("run-batches/<int:pk>/", RunBatchDetailApi.as_view(), name="run_batch_detail"),
    path("run-batches/<int:pk>/cancel/", RunBatchCancelApi.as_view(), name="run_batch_cancel"),
    path("run-batches/<int:pk>/resume/", RunBatchResumeApi.as_view(), name="run_batch_resume"),
    path("run-batches/<int:pk>/groups/", RolloutGroupListApi.as_view(), name="run_batch_groups"),
    path("projects/<int:pk>/runs/", RunListApi.as_view(), name="run_list"),
    path("runs/<int:pk>/", RunDetailApi.as_view(), name="run_detail"),
]
