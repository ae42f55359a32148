"""The API's output shapes of datasets, versions, exports and rows (apis.py takes the
input)."""

from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    extend_schema_field,
)
from rest_framework import serializers

from apps.core.apis import JobOutput
from apps.datasets.formats.rl_prompts import prompt_messages
from apps.datasets.models import (
    DatasetKind,
    ExportFormat,
    LongTrajectories,
    VersionStatus,
)
from apps.datasets.services import (
    dataset_info,
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
    split_keys = serializers.CharField(
        help_text="sft: what the split's groups and row order are keyed by: content (spec and "
        "content hashes, the same in any database); blank: database ids (versions built "
        "before content keys; blank too for the other kinds, which draw no split)."
    )
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


class VersionCreated(serializers.Serializer):
    version = VersionOutput()
    job = JobOutput()


def export_url(request, version, export) -> str | None:
    if not export.offered:
        return None
    url = f"/api/v1/datasets/{version.dataset_id}/versions/{version.number}/export/"
    query = f"?format={export.format}" + (f"&split={export.split}" if export.split else "")
    return request.build_absolute_uri(url + query)


def version_detail(request, version) -> dict:
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
                "url": export_url(request, version, export),
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
