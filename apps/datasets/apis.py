"""REST API for dataset consumers: datasets, versions (create → job, rebuild, verify), the
rows a version contains, and exports streamed as JSONL (ETag, Content-Length when cached,
the checksum in ``X-Dataset-Checksum``)."""

from django.urls import path
from drf_spectacular.utils import (
    OpenApiParameter,
    PolymorphicProxySerializer,
    extend_schema,
)
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.access import project_get_for_user_by_pk
from apps.accounts.models import Role
from apps.core.api import StandardPagination
from apps.core.apis import JobOutput
from apps.core.exceptions import ApplicationError
from apps.core.safeinput import ID_MAX, INT32_MAX
from apps.datasets.access import dataset_get_for_user, version_get_for_user
from apps.datasets.export_apis import VersionExportApi, error_response
from apps.datasets.models import (
    DESCRIPTION_MAX_LENGTH,
    MAX_TOKENS_LIMIT,
    MAX_VALIDATION_FRACTION,
    DatasetKind,
    LongTrajectories,
    RowSplit,
)
from apps.datasets.selectors import dataset_list, version_list, version_row_select
from apps.datasets.serializers import (
    ROW_OUTPUTS,
    DatasetOutput,
    RowOutput,
    VersionCreated,
    VersionDetailOutput,
    VersionOutput,
    version_detail,
)
from apps.datasets.services import (
    PromptFilter,
    VersionFilter,
    dataset_create,
    dataset_version_create,
    dataset_version_rebuild,
    dataset_version_verify_start,
    prompt_version_create,
    rollout_version_create,
)
from apps.datasets.services.prompts import MAX_SEEDS
from apps.runs.rollouts import CREDITS, Variant
from coworkenv_engine.rewards import GROUP_METHODS, REWARD_VARIANTS


class DatasetInput(serializers.Serializer):
    name = serializers.CharField(max_length=120)
    kind = serializers.ChoiceField(
        choices=DatasetKind.choices,
        default=DatasetKind.SFT,
        help_text="What every version of the dataset holds, fixed at creation. sft: approved "
        "demonstrations; rl_prompts: environment tasks and seeds, exported for RL trainers "
        "(grpo, verl, nemo_gym, verifiers); rollouts: scored rollouts of student rollout groups "
        "for offline RL (versions from POST …/rollout-versions/).",
    )
    description = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=DESCRIPTION_MAX_LENGTH
    )
    tokenizer = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=120,
        help_text="A name from the server's DATASET_TOKENIZERS (blank: the server default).",
    )


class VersionInput(serializers.Serializer):
    capabilities = serializers.ListField(
        child=serializers.SlugField(), required=False, default=list
    )
    environments = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=ID_MAX), required=False, default=list
    )
    min_score = serializers.FloatField(min_value=0, max_value=1, required=False, allow_null=True)
    min_agreement = serializers.FloatField(
        min_value=0, max_value=1, required=False, allow_null=True
    )
    seed = serializers.IntegerField(default=0, min_value=0, max_value=INT32_MAX)
    validation_fraction = serializers.FloatField(
        min_value=0, max_value=MAX_VALIDATION_FRACTION, default=0.1
    )
    max_tokens = serializers.IntegerField(
        min_value=1,
        max_value=MAX_TOKENS_LIMIT,
        required=False,
        allow_null=True,
        default=None,
        help_text="The longest exported row in tokens; null: no limit.",
    )
    long_trajectories = serializers.ChoiceField(
        choices=LongTrajectories.choices,
        default=LongTrajectories.SPLIT,
        help_text="split: one row per turn (history as context, the turn's steps as targets); "
        "drop: leave them out.",
    )
    seeds = serializers.ListField(
        child=serializers.IntegerField(min_value=0, max_value=INT32_MAX),
        required=False,
        max_length=MAX_SEEDS,
        help_text="RL prompt datasets only: one row per train task and seed (default [0]).",
    )


class RowFilterInput(serializers.Serializer):
    """The rows endpoint's query; each filter applies to the kinds ``KINDS`` names."""

    KINDS = {
        "split": (DatasetKind.SFT, DatasetKind.RL_PROMPTS, DatasetKind.ROLLOUTS),
        "capability": (DatasetKind.SFT, DatasetKind.RL_PROMPTS),
        "group": (DatasetKind.ROLLOUTS,),
        "passed": (DatasetKind.ROLLOUTS,),
    }

    split = serializers.ChoiceField(choices=RowSplit.choices, required=False)
    capability = serializers.SlugField(max_length=100, required=False)
    group = serializers.IntegerField(min_value=1, max_value=ID_MAX, required=False)
    passed = serializers.BooleanField(required=False)

    def __init__(self, *args, kind: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.kind = kind

    def validate(self, attrs):
        wrong = {
            name: [f"Not a filter of {self.kind} rows (only of {', '.join(self.KINDS[name])})."]
            for name in attrs
            if self.kind not in self.KINDS[name]
        }
        if wrong:
            raise serializers.ValidationError(wrong)
        return attrs


class RolloutVersionInput(serializers.Serializer):
    batches = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=ID_MAX),
        allow_empty=False,
        max_length=100,
        help_text="Student batches with a group size (their scored groups).",
    )
    reward = serializers.ChoiceField(choices=list(REWARD_VARIANTS), default="score")
    advantage = serializers.ChoiceField(choices=list(GROUP_METHODS), default="grpo")
    credit = serializers.ChoiceField(choices=list(CREDITS), default="trajectory")


class DatasetListApi(APIView):
    pagination_class = StandardPagination

    @extend_schema(responses=DatasetOutput(many=True), operation_id="datasets_list")
    def get(self, request, pk):
        project = project_get_for_user_by_pk(request.user, pk)
        paginator = StandardPagination()
        page = paginator.paginate_queryset(dataset_list(project=project), request, view=self)
        return paginator.get_paginated_response(DatasetOutput(page, many=True).data)

    @extend_schema(
        request=DatasetInput, responses={201: DatasetOutput}, operation_id="datasets_create"
    )
    def post(self, request, pk):
        project = project_get_for_user_by_pk(request.user, pk, min_role=Role.AUTHOR)
        data = DatasetInput(data=request.data)
        data.is_valid(raise_exception=True)
        dataset = dataset_create(project=project, user=request.user, **data.validated_data)
        return Response(DatasetOutput(dataset).data, status=status.HTTP_201_CREATED)


class DatasetDetailApi(APIView):
    @extend_schema(responses=DatasetOutput, operation_id="datasets_retrieve")
    def get(self, request, pk):
        return Response(DatasetOutput(dataset_get_for_user(request.user, pk)).data)


class VersionListApi(APIView):
    pagination_class = StandardPagination

    @extend_schema(responses=VersionOutput(many=True), operation_id="dataset_versions_list")
    def get(self, request, pk):
        dataset = dataset_get_for_user(request.user, pk)
        paginator = StandardPagination()
        page = paginator.paginate_queryset(version_list(dataset=dataset), request, view=self)
        return paginator.get_paginated_response(VersionOutput(page, many=True).data)

    @extend_schema(
        request=VersionInput,
        responses={201: VersionCreated},
        operation_id="dataset_versions_create",
        description="Build a new version in a job, of the dataset's kind. sft: from approved "
        "demonstrations, filtered by capabilities, environments, min score and min reviewer "
        "agreement, split by environment with the seed; rl_prompts: from the train tasks of "
        "environments with `seeds`. Eval tasks never enter. A rollouts dataset is refused "
        "(400): its versions come from `dataset_rollout_versions_create`. Follow `job`.",
    )
    def post(self, request, pk):
        dataset = dataset_get_for_user(request.user, pk, min_role=Role.AUTHOR)
        data = VersionInput(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        if dataset.kind == DatasetKind.ROLLOUTS:
            raise ApplicationError(
                f"“{dataset.name}” is a dataset of scored rollouts: build its versions from "
                f"student batches with POST /api/v1/datasets/{dataset.pk}/rollout-versions/ "
                "(batches, reward, advantage, credit).",
                {"kind": dataset.kind},
            )
        if dataset.kind == DatasetKind.RL_PROMPTS:
            version = _prompt_version_create(request, dataset, v)
            return Response(
                {"version": VersionOutput(version).data, "job": JobOutput(version.job).data},
                status=status.HTTP_201_CREATED,
            )
        if "seeds" in v:
            return error_response("seeds apply to RL prompt datasets only.", 400)
        version = dataset_version_create(
            dataset=dataset,
            user=request.user,
            filters=VersionFilter(
                capabilities=tuple(v["capabilities"]),
                environments=tuple(v["environments"]),
                min_score=v.get("min_score"),
                min_agreement=v.get("min_agreement"),
            ),
            seed=v["seed"],
            validation_fraction=v["validation_fraction"],
            max_tokens=v["max_tokens"],
            long_trajectories=v["long_trajectories"],
        )
        return Response(
            {"version": VersionOutput(version).data, "job": JobOutput(version.job).data},
            status=status.HTTP_201_CREATED,
        )


class RolloutVersionCreateApi(APIView):
    @extend_schema(
        request=RolloutVersionInput,
        responses={201: VersionCreated},
        operation_id="dataset_rollout_versions_create",
        description="Build a scored-rollout version (offline RL) in a job: every graded run "
        "of the scored rollout groups of the given student batches, with its reward, "
        "per-turn rewards and advantages under the variant (reward score|raw|passed|strict, "
        "advantage grpo|dr_grpo|rloo, credit trajectory|turn|call; per-turn and per-call "
        "credit take score and grpo or dr_grpo). Export format `rollouts`, split `train`. "
        "Only for datasets of kind rollouts (another kind: 400).",
    )
    def post(self, request, pk):
        dataset = dataset_get_for_user(request.user, pk, min_role=Role.AUTHOR)
        data = RolloutVersionInput(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        version = rollout_version_create(
            dataset=dataset,
            user=request.user,
            batches=v["batches"],
            variant=Variant.parse(v["reward"], v["advantage"], v["credit"]),
        )
        return Response(
            {"version": VersionOutput(version).data, "job": JobOutput(version.job).data},
            status=status.HTTP_201_CREATED,
        )


def _prompt_version_create(request, dataset, v):
    ignored = [name for name in ("min_score", "min_agreement") if v.get(name) is not None]
    if ignored:
        raise ApplicationError(
            f"{ignored[0]} applies to demonstrations; an RL prompt version draws environment "
            "tasks (filter by environments, capabilities and seeds).",
            {"fields": {ignored[0]: ["Not for RL prompt datasets."]}},
        )
    return prompt_version_create(
        dataset=dataset,
        user=request.user,
        filters=PromptFilter(
            environments=tuple(v["environments"]),
            capabilities=tuple(v["capabilities"]),
            seeds=tuple(v.get("seeds") or (0,)),
        ),
    )


class VersionDetailApi(APIView):
    @extend_schema(responses=VersionDetailOutput, operation_id="dataset_versions_retrieve")
    def get(self, request, pk, number):
        version = version_get_for_user(request.user, pk, number)
        return Response(version_detail(request, version))


class VersionRebuildApi(APIView):
    @extend_schema(
        request=None,
        responses={201: VersionCreated},
        operation_id="dataset_versions_rebuild",
        description="A new version from the same filter, seed and fraction; over the same "
        "approved demonstrations it has the same checksum.",
    )
    def post(self, request, pk, number):
        source = version_get_for_user(request.user, pk, number, min_role=Role.AUTHOR)
        version = dataset_version_rebuild(version=source, user=request.user)
        return Response(
            {"version": VersionOutput(version).data, "job": JobOutput(version.job).data},
            status=status.HTTP_201_CREATED,
        )


class VersionVerifyApi(APIView):
    @extend_schema(
        request=None,
        responses={202: JobOutput},
        operation_id="dataset_versions_verify",
        description="Recompute the checksum from the stored rows in a job; the outcome lands "
        "in the version's verified_at / verify_ok / verify_message.",
    )
    def post(self, request, pk, number):
        version = version_get_for_user(request.user, pk, number, min_role=Role.AUTHOR)
        job = dataset_version_verify_start(version=version, user=request.user)
        return Response(JobOutput(job).data, status=status.HTTP_202_ACCEPTED)


ROWS_SCHEMA = PolymorphicProxySerializer(
    component_name="VersionRowOutput",
    serializers={kind.value: output for kind, output in ROW_OUTPUTS.items()},
    resource_type_field_name="kind",
    many=True,
)


class VersionRowsApi(APIView):
    pagination_class = StandardPagination

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "split", str, enum=RowSplit.values, required=False, description="Every kind."
            ),
            OpenApiParameter(
                "capability",
                str,
                required=False,
                description="sft and rl_prompts: the rows whose demonstration (or task, when "
                "the version was built) exercises this capability slug.",
            ),
            OpenApiParameter(
                "group",
                int,
                required=False,
                description="rollouts: the members of this rollout group.",
            ),
            OpenApiParameter(
                "passed",
                bool,
                required=False,
                description="rollouts: the runs whose grading passed (true) or failed (false).",
            ),
        ],
        responses=ROWS_SCHEMA,
        operation_id="dataset_versions_rows",
        description="The rows a version contains, per split, in export order, in the shape "
        "of its kind (`kind` on every row): sft → the demonstration and demonstration "
        "version; rl_prompts → the environment task and seed with its prompt messages and "
        "tools; rollouts → the run of a rollout group with every reward variant, advantage "
        "and per-turn reward, and its transcript's endpoint. A filter of another kind is "
        "400.",
    )
    def get(self, request, pk, number):
        version = version_get_for_user(request.user, pk, number)
        kind = version.dataset.kind
        query = RowFilterInput(data=dict(request.query_params.items()), kind=kind)
        query.is_valid(raise_exception=True)
        rows = version_row_select(kind)(version=version, **query.validated_data)
        paginator = StandardPagination()
        page = paginator.paginate_queryset(rows, request, view=self)
        context = {"request": request, "variant": version.filters.get("variant") or {}}
        output = ROW_OUTPUTS.get(kind, RowOutput)(page, many=True, context=context)
        return paginator.get_paginated_response(output.data)


urlpatterns = [
    path("projects/<int:pk>/datasets/", DatasetListApi.as_view(), name="dataset_list"),
    path("datasets/<int:pk>/", DatasetDetailApi.as_view(), name="dataset_detail"),
    path("datasets/<int:pk>/versions/", VersionListApi.as_view(), name="dataset_version_list"),
    path(
        "datasets/<int:pk>/rollout-versions/",
        RolloutVersionCreateApi.as_view(),
        name="dataset_rollout_version_create",
    ),
    path(
        "datasets/<int:pk>/versions/<int:number>/",
        VersionDetailApi.as_view(),
        name="dataset_version_detail",
    ),
    path(
        "datasets/<int:pk>/versions/<int:number>/rows/",
        VersionRowsApi.as_view(),
        name="dataset_version_rows",
    ),
    path(
        "datasets/<int:pk>/versions/<int:number>/rebuild/",
        VersionRebuildApi.as_view(),
        name="dataset_version_rebuild",
    ),
    path(
        "datasets/<int:pk>/versions/<int:number>/verify/",
        VersionVerifyApi.as_view(),
        name="dataset_version_verify",
    ),
    path(
        "datasets/<int:pk>/versions/<int:number>/export/",
        VersionExportApi.as_view(),
        name="dataset_version_export",
    ),
    # The slash-less spelling of earlier releases still answers (not in the schema).
    path(
        "datasets/<int:pk>/versions/<int:number>/export",
        VersionExportApi.as_view(),
        name="dataset_version_export_legacy",
    ),
]
