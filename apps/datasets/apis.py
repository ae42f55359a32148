"""REST API for dataset consumers: datasets, versions (create → job, rebuild, verify), the
rows a version contains, and exports streamed as JSONL (ETag, Content-Length when cached,
the checksum in ``X-Dataset-Checksum``)."""

from django.urls import path, reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema,
    extend_schema_field,
)
from rest_framework import serializers, status
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.access import project_get_for_user_by_pk
from apps.accounts.models import Role
from apps.core.api import StandardPagination
from apps.core.apis import JobOutput
from apps.core.exceptions import ApplicationError
from apps.core.safeinput import ID_MAX, INT32_MAX
from apps.datasets.access import dataset_get_for_user, version_get_for_user
from apps.datasets.downloads import (
    PARQUET_TYPE,
    ZIP_TYPE,
    ExportUnavailable,
    export_for,
    export_response,
)
from apps.datasets.formats.rl_prompts import prompt_messages
from apps.datasets.models import (
    DESCRIPTION_MAX_LENGTH,
    MAX_TOKENS_LIMIT,
    MAX_VALIDATION_FRACTION,
    DatasetKind,
    ExportFormat,
    LongTrajectories,
    RowSplit,
    VersionStatus,
)
from apps.datasets.selectors import dataset_list, version_list, version_row_select
from apps.datasets.services import (
    PromptFilter,
    VersionFilter,
    dataset_create,
    dataset_info,
    dataset_version_create,
    dataset_version_rebuild,
    dataset_version_verify_start,
    prompt_version_create,
    rollout_version_create,
)
from apps.datasets.services.prompts import MAX_SEEDS
from apps.runs.rollouts import CREDITS, Variant
from coworkenv_engine.rewards import GROUP_METHODS, REWARD_VARIANTS


class DatasetOutput(serializers.Serializer):
    id = serializers.IntegerField()
    project = serializers.IntegerField(source="project_id")
    name = serializers.CharField()
    kind = serializers.ChoiceField(choices=DatasetKind.choices)
    description = serializers.CharField()
    tokenizer = serializers.CharField(help_text="Its tokenizer's name; blank: server default.")
    created_by = serializers.CharField(source="created_by.username", allow_null=True, default=None)
    created_at = serializers.DateTimeField()
    version_count = serializers.IntegerField(required=False)
    latest_version = serializers.IntegerField(source="latest_number", allow_null=True, default=None)


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


class ExportOutput(serializers.Serializer):
    format = serializers.ChoiceField(choices=ExportFormat.choices)
    split = serializers.CharField()
    status = serializers.CharField(help_text="ready (offered), invalid (failed its linter), empty.")
    rows = serializers.IntegerField()
    size = serializers.IntegerField()
    sha256 = serializers.CharField()
    lint = serializers.JSONField(help_text="ok, rows, error_count, warning_count, errors, warnings")
    url = serializers.CharField(allow_null=True, help_text="The export endpoint, when offered.")


class VersionOutput(serializers.Serializer):
    dataset = serializers.IntegerField(source="dataset_id")
    number = serializers.IntegerField()
    kind = serializers.ChoiceField(
        source="dataset.kind",
        choices=DatasetKind.choices,
        help_text="Its dataset's kind (every version of a dataset has it): sft "
        "(demonstrations), rl_prompts (environment tasks; filters = {environments, "
        "capabilities, seeds}) or rollouts (scored rollouts of student groups; filters = "
        "{batches, variant}).",
    )
    status = serializers.ChoiceField(choices=VersionStatus.choices)
    job = JobOutput()
    rebuilt_from = serializers.IntegerField(
        source="rebuilt_from.number", allow_null=True, default=None
    )
    filters = serializers.JSONField()
    seed = serializers.IntegerField()
    validation_fraction = serializers.FloatField()
    demonstrations = serializers.IntegerField(
        help_text="sft: approved demonstrations matched (0 for the other kinds)."
    )
    train_rows = serializers.IntegerField(
        help_text="Train rows (rl_prompts: one per task and seed; rollouts: graded runs)."
    )
    validation_rows = serializers.IntegerField(help_text="sft only (0 for the other kinds).")
    excluded_eval = serializers.IntegerField(
        help_text="Eval-task demonstrations (sft) or task-and-seed rows (rl_prompts) kept out."
    )
    removed_duplicates = serializers.IntegerField(
        help_text="sft: exact duplicates left out (0 for the other kinds)."
    )
    removed_near_duplicates = serializers.IntegerField(
        help_text="sft: near-duplicates left out (retries collapsed, ids and dates masked)."
    )
    tokenizer = serializers.CharField(help_text="The tokenizer that counted; blank: estimate.")
    max_tokens = serializers.IntegerField(
        allow_null=True, help_text="The longest exported row in tokens; null: no limit."
    )
    long_trajectories = serializers.ChoiceField(
        choices=LongTrajectories.choices, help_text="sft only (the others keep the default)."
    )
    long_counts = serializers.JSONField(
        help_text="sft, per split: trajectories, over_limit, split_rows, dropped_rows, "
        "dropped_trajectories, rows (exported), longest (tokens), details (first 50)."
    )
    checksum = serializers.CharField()
    created_by = serializers.CharField(source="created_by.username", allow_null=True, default=None)
    created_at = serializers.DateTimeField()
    built_at = serializers.DateTimeField(allow_null=True)
    verified_at = serializers.DateTimeField(allow_null=True)
    verify_ok = serializers.BooleanField(allow_null=True)
    verify_message = serializers.CharField()


class VersionDetailOutput(VersionOutput):
    token_stats = serializers.JSONField(
        help_text="Per split (all, train, validation): rows, total, mean, p50, p95, max of the "
        "tokens per row (see token_counting)."
    )
    token_counting = serializers.CharField(help_text="How tokens were counted, in words.")
    removals = serializers.JSONField(
        help_text="sft: [{demonstration, kept, kind: exact|near, reason}] (the first 1000)"
    )
    groups = serializers.JSONField(
        help_text="sft: the split's groups [{key, split, rows, environments, "
        "joined_by_similarity}]; rollouts: one entry with rollout_groups and unscorable."
    )
    capability_mix = serializers.JSONField(
        help_text="sft: {slug: {train, validation}}; rl_prompts: {train: {slug: rows}}; "
        "rollouts: {}."
    )
    environments = serializers.JSONField(
        help_text="sft and rl_prompts: [{key, id, name, group, split, rows, revisions, "
        "spec_hashes}]; rollouts: [{name, split, rows, tasks: {task_key: rows}}]."
    )
    models_used = serializers.JSONField(help_text="[{model, policy, rows}]")
    exports = ExportOutput(many=True)
    dataset_info = serializers.JSONField(
        help_text="sft: LLaMA-Factory dataset_info.json entries ({} for the other kinds)."
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


def _kind(kind: str, what: str):
    """The ``kind`` of a row: its version's (and dataset's), the discriminator of the rows
    endpoint's items."""
    return serializers.ChoiceField(
        choices=DatasetKind.choices,
        read_only=True,
        default=kind,
        help_text=f"{kind}: {what} (the version's kind; every row of a page has it).",
    )


class RowOutput(serializers.Serializer):
    """A row of an SFT version: which demonstration (and which of its versions)."""

    kind = _kind(DatasetKind.SFT, "a demonstration row")
    split = serializers.CharField()
    position = serializers.IntegerField()
    demonstration = serializers.IntegerField(source="demonstration.id")
    demonstration_version = serializers.IntegerField(source="demonstration_version.id")
    demonstration_version_number = serializers.IntegerField(source="demonstration_version.number")
    task_key = serializers.CharField(source="demonstration.task_key")
    environment = serializers.CharField(source="demonstration.environment_name")
    model = serializers.CharField(source="demonstration.model_name")
    tokens = serializers.IntegerField()
    content_sha256 = serializers.CharField()


class PromptMessageOutput(serializers.Serializer):
    role = serializers.CharField(help_text="system or user.")
    content = serializers.CharField()


class PromptRowOutput(serializers.Serializer):
    """A row of an RL prompt version: one environment task and seed, with the prompt a
    trainer resets it with (as built: the version does not change with the environment)."""

    kind = _kind(DatasetKind.RL_PROMPTS, "a prompt row (environment task and seed)")
    split = serializers.CharField()
    position = serializers.IntegerField()
    environment = serializers.CharField(
        source="entry.environment", help_text="The environment's name when it was built."
    )
    environment_id = serializers.IntegerField(
        allow_null=True, help_text="null: the environment was deleted since."
    )
    revision = serializers.IntegerField(source="entry.revision", allow_null=True)
    spec_hash = serializers.CharField(source="entry.spec_hash")
    task_key = serializers.CharField()
    title = serializers.CharField(source="entry.title")
    seed = serializers.IntegerField()
    capabilities = serializers.ListField(
        source="entry.capabilities",
        child=serializers.CharField(),
        help_text="The task's capability slugs when it was built.",
    )
    turns = serializers.IntegerField(source="entry.turns")
    prompt = serializers.SerializerMethodField(
        help_text="The reset observation as chat messages: the system prompt (when there is "
        "one), then the first user message."
    )
    tools = serializers.ListField(
        source="entry.tools",
        child=serializers.DictField(),
        help_text="The tools offered, as OpenAI function tools.",
    )
    content_sha256 = serializers.CharField()

    @extend_schema_field(PromptMessageOutput(many=True))
    def get_prompt(self, row) -> list[dict]:
        return prompt_messages(row.entry)


class RolloutRowOutput(serializers.Serializer):
    """A row of a scored-rollout version: one graded member of a rollout group, with every
    reward variant and advantage of it (from the group's reward table) and where its
    transcript is."""

    kind = _kind(DatasetKind.ROLLOUTS, "a rollout row (a graded member of a rollout group)")
    split = serializers.CharField()
    position = serializers.IntegerField()
    group = serializers.IntegerField(source="group_id", help_text="The rollout group's id.")
    batch = serializers.IntegerField(source="group.batch_id", help_text="Its student batch.")
    member = serializers.IntegerField(help_text="The run's index in its group.")
    run = serializers.IntegerField(source="run_id")
    environment = serializers.CharField(source="group.environment_name")
    task_key = serializers.CharField(source="group.task_key")
    passed = serializers.BooleanField(
        source="run_passed", allow_null=True, help_text="Whether the run's grading passed."
    )
    reward = serializers.SerializerMethodField(
        help_text="The reward under the version's variant (filters.variant.reward)."
    )
    advantage = serializers.SerializerMethodField(
        help_text="The advantage under the version's variant (reward and advantage method)."
    )
    rewards = serializers.SerializerMethodField(
        help_text="Every reward variant: {score, raw, passed, strict} (null: unscorable)."
    )
    advantages = serializers.SerializerMethodField(
        help_text="Every advantage: {reward variant: {grpo, dr_grpo, rloo}}."
    )
    turn_rewards = serializers.SerializerMethodField(
        help_text="Per assistant turn, the reward-to-go of the score."
    )
    turn_advantages = serializers.SerializerMethodField(
        help_text="Per turn-credit method (grpo, dr_grpo), the per-turn advantages."
    )
    tokens = serializers.IntegerField()
    content_sha256 = serializers.CharField(help_text="sha256 of the exported line.")
    transcript = serializers.SerializerMethodField(
        help_text="The run's API endpoint, whose `transcript` is the conversation."
    )

    def _variant(self) -> dict:
        return self.context["variant"]

    @extend_schema_field(OpenApiTypes.DOUBLE)
    def get_reward(self, row) -> float | None:
        return row.group.variants["rewards"][self._variant()["reward"]][row.member]

    @extend_schema_field(OpenApiTypes.DOUBLE)
    def get_advantage(self, row) -> float:
        variant = self._variant()
        table = row.group.variants["advantages"][variant["reward"]]
        return table[variant["advantage"]][row.member]

    @extend_schema_field(serializers.DictField(child=serializers.FloatField(allow_null=True)))
    def get_rewards(self, row) -> dict:
        return {name: values[row.member] for name, values in row.group.variants["rewards"].items()}

    @extend_schema_field(
        serializers.DictField(child=serializers.DictField(child=serializers.FloatField()))
    )
    def get_advantages(self, row) -> dict:
        return {
            reward: {method: values[row.member] for method, values in methods.items()}
            for reward, methods in row.group.variants["advantages"].items()
        }

    @extend_schema_field(serializers.ListField(child=serializers.FloatField()))
    def get_turn_rewards(self, row) -> list:
        return row.group.variants["turn_rewards"][row.member]

    @extend_schema_field(
        serializers.DictField(child=serializers.ListField(child=serializers.FloatField()))
    )
    def get_turn_advantages(self, row) -> dict:
        return {
            method: values[row.member]
            for method, values in row.group.variants["turn_advantages"].items()
        }

    @extend_schema_field(OpenApiTypes.URI)
    def get_transcript(self, row) -> str:
        url = reverse("api:run_detail", args=[row.run_id])
        request = self.context.get("request")
        return request.build_absolute_uri(url) if request else url


ROW_OUTPUTS = {
    DatasetKind.SFT: RowOutput,
    DatasetKind.RL_PROMPTS: PromptRowOutput,
    DatasetKind.ROLLOUTS: RolloutRowOutput,
}


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


class VersionCreated(serializers.Serializer):
    version = VersionOutput()
    job = JobOutput()


def _export_url(request, version, export) -> str | None:
    if not export.offered:
        return None
    url = f"/api/v1/datasets/{version.dataset_id}/versions/{version.number}/export/"
    query = f"?format={export.format}" + (f"&split={export.split}" if export.split else "")
    return request.build_absolute_uri(url + query)


def _version_detail(request, version) -> dict:
    exports = []
    for export in version.exports.order_by("format", "split"):
        exports.append(
            {
                "format": export.format,
                "split": export.split,
                "status": export.status,
                "rows": export.rows,
                "size": export.size,
                "sha256": export.sha256,
                "lint": export.lint,
                "url": _export_url(request, version, export),
            }
        )
    data = VersionOutput(version).data
    data.update(
        {
            "token_stats": version.token_stats,
            "token_counting": version.token_counting,
            "removals": version.removals,
            "groups": version.groups,
            "capability_mix": version.capability_mix,
            "environments": version.environments,
            "models_used": version.models_used,
            "exports": exports,
            "dataset_info": dataset_info(version),
        }
    )
    return data


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
            return _error("seeds apply to RL prompt datasets only.", 400)
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
        return Response(_version_detail(request, version))


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


class _JsonErrorsOnly(DefaultContentNegotiation):
    """``?format=`` names the export format here, not a DRF renderer."""

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


EXPORT_FORMATS = [*ExportFormat.values, "dataset_info"]


class VersionExportApi(APIView):
    content_negotiation_class = _JsonErrorsOnly

    @extend_schema(
        operation_id="dataset_versions_export",
        parameters=[
            OpenApiParameter("format", str, enum=EXPORT_FORMATS, required=True),
            OpenApiParameter(
                "split",
                str,
                enum=RowSplit.values,
                required=False,
                description="Required for every format but card and dataset_info.",
            ),
            OpenApiParameter(
                "If-None-Match",
                str,
                OpenApiParameter.HEADER,
                required=False,
                description="The ETag of a copy you have: 304 when unchanged.",
            ),
        ],
        responses={
            (200, "application/jsonl"): OpenApiResponse(
                OpenApiTypes.BINARY,
                description="JSONL, one example per line (streamed; Content-Length when "
                "cached). Headers: ETag (the file's sha256), X-Dataset-Checksum, "
                "X-Dataset-Rows.",
            ),
            (200, ZIP_TYPE): OpenApiResponse(
                OpenApiTypes.BINARY,
                description="A split whose demonstrations show images (trl, sharegpt): a zip "
                "of its rows and images (trl: metadata.jsonl with file_names and images/; "
                "sharegpt: the file, dataset_info.json and images/). Save it as bytes.",
            ),
            (200, PARQUET_TYPE): OpenApiResponse(
                OpenApiTypes.BINARY,
                description="format=verl or trl_parquet: one Parquet file (trl_parquet: "
                "images inside, as a datasets Image feature).",
            ),
            (200, "text/markdown"): OpenApiResponse(OpenApiTypes.STR, description="format=card"),
            (200, "application/json"): OpenApiResponse(
                OpenApiTypes.OBJECT, description="format=dataset_info"
            ),
            304: OpenApiResponse(description="If-None-Match matched the ETag."),
            404: OpenApiResponse(description="No such version, or the split has no rows."),
            410: OpenApiResponse(
                description="A zip bundle or trl_parquet file gone from the cache: rebuild."
            ),
            409: OpenApiResponse(
                description="Still building, failed, or the export failed its linter "
                "(details.lint)."
            ),
        },
    )
    def get(self, request, pk, number):
        version = version_get_for_user(request.user, pk, number)
        fmt = request.query_params.get("format", "")
        split = request.query_params.get("split", "")
        if fmt not in EXPORT_FORMATS:
            return _error(f"format is one of {', '.join(EXPORT_FORMATS)}.", 400)
        if fmt == "dataset_info":
            return Response(dataset_info(version))
        if fmt != ExportFormat.CARD and split not in RowSplit.values:
            return _error(f"split is one of {', '.join(RowSplit.values)}.", 400)
        try:
            return export_response(request, version, export_for(version, fmt, split))
        except ExportUnavailable as exc:  # 410 from the response: a bundle gone from the cache
            return _error(exc.message, exc.status, exc.extra)


def _error(message: str, code: int, details: dict | None = None) -> Response:
    return Response({"message": message, "details": details or {}}, status=code)


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
