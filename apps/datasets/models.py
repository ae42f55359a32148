"""Datasets, their immutable versions, the rows a version contains, and its cached exports.

A ``DatasetVersion`` is built once by a job from a filter and a seed and never changes
afterwards: its rows (``DatasetRow``: which demonstration, which of its versions, which
split, in which position) and its checksum are fixed, so it can be verified and rebuilt.
Eval-task demonstrations never enter a version (they are only counted), duplicates and
near-duplicates are left out with the reason recorded, and the split keeps each
environment and near-duplicate cluster on one side, keyed by content so that it is the
same in any database (``splitting.py``); exports are files
under MEDIA_ROOT, one per (version, format, split), linted before they are offered.
"""

from django.conf import settings
from django.core.validators import MaxLengthValidator, MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

MAX_VALIDATION_FRACTION = 0.5


# A dataset's description opens its card: a paragraph, bounded like all free text.
DESCRIPTION_MAX_LENGTH = 2000


class DatasetKind(models.TextChoices):
    """What a dataset holds; every version of a dataset holds the same (a version's kind is
    its dataset's, ``DatasetVersion.kind``), so kinds are never mixed in one dataset."""

    SFT = "sft", "SFT (approved demonstrations)"
    RL_PROMPTS = "rl_prompts", "RL prompts (environment tasks)"
    ROLLOUTS = "rollouts", "Scored rollouts (student rollout groups)"


class Dataset(models.Model):
    project = models.ForeignKey(
        "accounts.Project", on_delete=models.CASCADE, related_name="datasets"
    )
    name = models.CharField(max_length=120)
    kind = models.CharField(
        max_length=16,
        choices=DatasetKind.choices,
        default=DatasetKind.SFT,
        help_text="sft: versions of approved demonstrations (DatasetRow); rl_prompts: versions "
        "of environment tasks (PromptRow: prompts that name the task) for trainers that roll "
        "out themselves; rollouts: versions of the graded runs of student rollout groups "
        "(RolloutRow, filters = {batches, variant}) for offline RL. Fixed at creation.",
    )
    description = models.TextField(
        blank=True,
        max_length=DESCRIPTION_MAX_LENGTH,
        validators=[MaxLengthValidator(DESCRIPTION_MAX_LENGTH)],
    )
    tokenizer = models.CharField(
        max_length=120,
        blank=True,
        help_text="Name of a tokenizer in settings.DATASET_TOKENIZERS that counts the tokens of "
        "its versions; blank: the server's default (DATASET_TOKENIZER_DEFAULT), else an "
        "estimate.",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "id"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="dataset_unique_name"),
            models.CheckConstraint(
                condition=Q(kind__in=[choice.value for choice in DatasetKind]),
                name="dataset_kind_valid",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class VersionStatus(models.TextChoices):
    BUILDING = "building", "Building"
    READY = "ready", "Ready"
    FAILED = "failed", "Failed"


class LongTrajectories(models.TextChoices):
    """What the exports do with a trajectory over the version's token limit
    (apps.datasets.formats.long)."""

    SPLIT = "split", "Split by turn (history as context, the turn's steps as targets)"
    DROP = "drop", "Drop it"


MAX_TOKENS_LIMIT = 10_000_000


class DatasetVersion(models.Model):
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    job = models.OneToOneField("core.Job", on_delete=models.PROTECT, related_name="dataset_version")
    status = models.CharField(
        max_length=16, choices=VersionStatus.choices, default=VersionStatus.BUILDING, db_index=True
    )
    rebuilt_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="rebuilds"
    )
    # The filter, as given: {"capabilities": [slugs], "environments": [ids], "min_score":
    # float|null, "min_agreement": float|null, "splits": ["train"]} (approved only, always).
    filters = models.JSONField(default=dict)
    seed = models.IntegerField(default=0)
    validation_fraction = models.FloatField(
        default=0.1, validators=[MinValueValidator(0.0), MaxValueValidator(MAX_VALIDATION_FRACTION)]
    )
    split_keys = models.CharField(
        max_length=32,
        blank=True,
        help_text="What the sft split's groups and row order were keyed by: 'content' (spec "
        "and content hashes, the same in any database); blank: database ids (built before).",
    )

    demonstrations = models.PositiveIntegerField(
        default=0, help_text="Approved demonstrations the filter matched."
    )
    train_rows = models.PositiveIntegerField(default=0)
    validation_rows = models.PositiveIntegerField(default=0)
    excluded_eval = models.PositiveIntegerField(
        default=0, help_text="Matched demonstrations of eval tasks, kept out of the version."
    )
    removed_duplicates = models.PositiveIntegerField(
        default=0, help_text="Exact duplicates left out (the oldest demonstration kept)."
    )
    removed_near_duplicates = models.PositiveIntegerField(
        default=0,
        help_text="Near-duplicates left out: the same once retries after injected faults are "
        "collapsed and ids and dates masked.",
    )
    removals = models.JSONField(
        default=list,
        blank=True,
        help_text="What was left out and why: [{demonstration, kept, kind: exact|near, reason}] "
        "(the first 1000).",
    )
    groups = models.JSONField(
        default=list,
        blank=True,
        help_text="The split's groups: [{key, split, rows, environments, joined_by_similarity}].",
    )
    tokenizer = models.CharField(
        max_length=120, blank=True, help_text="The tokenizer that counted tokens; blank: estimate."
    )
    token_counting = models.TextField(blank=True, help_text="How tokens were counted, in words.")
    token_stats = models.JSONField(default=dict, blank=True)
    capability_mix = models.JSONField(default=dict, blank=True)
    environments = models.JSONField(
        default=list, blank=True, help_text="Lineage: each environment's split, rows, revisions."
    )
    models_used = models.JSONField(default=list, blank=True)
    checksum = models.CharField(max_length=64, blank=True)
    max_tokens = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_TOKENS_LIMIT)],
        help_text="The longest row the exports hold, in tokens (as counted for the version); "
        "blank: no limit.",
    )
    long_trajectories = models.CharField(
        max_length=8, choices=LongTrajectories.choices, default=LongTrajectories.SPLIT
    )
    long_counts = models.JSONField(
        default=dict,
        blank=True,
        help_text="Per split: trajectories, over_limit, split_rows, dropped_rows, "
        "dropped_trajectories, rows, longest, details.",
    )

    verify_job = models.ForeignKey(
        "core.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    verified_at = models.DateTimeField(null=True, blank=True)
    verify_ok = models.BooleanField(null=True, blank=True)
    verify_message = models.TextField(blank=True)

    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    built_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["dataset_id", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["dataset", "number"], name="dataset_version_unique"),
            models.CheckConstraint(
                condition=Q(validation_fraction__gte=0)
                & Q(validation_fraction__lte=MAX_VALIDATION_FRACTION),
                name="dataset_version_fraction_range",
            ),
            models.CheckConstraint(condition=Q(number__gte=1), name="dataset_version_positive"),
            models.CheckConstraint(
                condition=Q(long_trajectories__in=["split", "drop"]),
                name="dataset_version_long_trajectories_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.dataset} v{self.number}"

    @property
    def rows_total(self) -> int:
        return self.train_rows + self.validation_rows

    @property
    def capabilities_without_validation(self) -> list[str]:
        """The capabilities with train rows and no validation row, when the version has a
        validation split at all (its metrics say nothing about these)."""
        if not self.validation_rows:
            return []
        return sorted(  # jsonb keeps no key order on PostgreSQL
            slug
            for slug, c in (self.capability_mix or {}).items()
            if slug and c.get("train", 0) and not c.get("validation", 0)
        )

    @property
    def kind(self) -> str:
        """Its dataset's kind (``DatasetKind``): a version has no kind of its own."""
        return self.dataset.kind


class RowSplit(models.TextChoices):
    TRAIN = "train", "Train"
    VALIDATION = "validation", "Validation"


class DatasetRow(models.Model):
    """One demonstration version in one split of a dataset version, at a fixed position.

    RESTRICT: a demonstration (or its version) that a dataset version contains cannot be
    deleted on its own — the version must stay verifiable — but deleting the whole project
    still removes both."""

    version = models.ForeignKey(DatasetVersion, on_delete=models.CASCADE, related_name="rows")
    split = models.CharField(max_length=16, choices=RowSplit.choices)
    position = models.PositiveIntegerField()
    demonstration = models.ForeignKey(
        "curation.Demonstration", on_delete=models.RESTRICT, related_name="dataset_rows"
    )
    demonstration_version = models.ForeignKey(
        "curation.DemonstrationVersion", on_delete=models.RESTRICT, related_name="dataset_rows"
    )
    environment_key = models.CharField(max_length=220)
    group_key = models.CharField(
        max_length=240, blank=True, help_text="The split group (template family or cluster)."
    )
    tokens = models.PositiveIntegerField(
        default=0, help_text="The version's tokenizer's count, or characters / 4 (its estimate)."
    )
    content_sha256 = models.CharField(max_length=64)

    class Meta:
        ordering = ["version_id", "split", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["version", "split", "position"], name="dataset_row_unique_position"
            ),
            models.UniqueConstraint(
                fields=["version", "demonstration"], name="dataset_row_unique_demonstration"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.version} {self.split} #{self.position}"


class RolloutRow(models.Model):
    """One graded member of a rollout group in a scored-rollout version, at a fixed position.
    RESTRICT, as for demonstrations: the runs and groups a version contains stay while it
    does (deleting the whole project still removes both)."""

    version = models.ForeignKey(
        DatasetVersion, on_delete=models.CASCADE, related_name="rollout_rows"
    )
    split = models.CharField(max_length=16, choices=RowSplit.choices, default=RowSplit.TRAIN)
    position = models.PositiveIntegerField()
    group = models.ForeignKey(
        "runs.RolloutGroup", on_delete=models.RESTRICT, related_name="dataset_rows"
    )
    member = models.PositiveSmallIntegerField(help_text="The run's index in its group.")
    run = models.ForeignKey("runs.Run", on_delete=models.RESTRICT, related_name="dataset_rows")
    environment_key = models.CharField(max_length=220)
    tokens = models.PositiveIntegerField(default=0)
    content_sha256 = models.CharField(max_length=64, help_text="sha256 of the exported line.")

    class Meta:
        ordering = ["version_id", "split", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["version", "split", "position"], name="rollout_row_unique_position"
            ),
            models.UniqueConstraint(fields=["version", "run"], name="rollout_row_unique_run"),
        ]

    def __str__(self) -> str:
        return f"{self.version} rollout #{self.position}"


class PromptRow(models.Model):
    """One (task, seed) of an RL prompt version, at a fixed position, with its prompt entry
    as built (``formats.rl_prompts.prompt_entry``: the reset observation's system prompt,
    first user message and tools, and the environment's revision and spec hash), so the
    version's files can be rendered again after the environment changes. SET_NULL: deleting
    the environment keeps the version (its name and spec hash stay in the entry)."""

    version = models.ForeignKey(
        DatasetVersion, on_delete=models.CASCADE, related_name="prompt_rows"
    )
    split = models.CharField(max_length=16, choices=RowSplit.choices)
    position = models.PositiveIntegerField()
    environment = models.ForeignKey(
        "environments.Environment",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    task_key = models.CharField(max_length=100)
    seed = models.PositiveIntegerField(default=0)
    entry = models.JSONField()
    content_sha256 = models.CharField(max_length=64)

    class Meta:
        ordering = ["version_id", "split", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["version", "split", "position"], name="prompt_row_unique_position"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.version} {self.split} #{self.position} {self.task_key}"


class ExportFormat(models.TextChoices):
    OPENAI = "openai", "OpenAI chat fine-tuning JSONL"
    TRL = "trl", "TRL messages + tools JSONL"
    SHAREGPT = "sharegpt", "LLaMA-Factory ShareGPT JSONL"
    TRL_PARQUET = "trl_parquet", "TRL Parquet (images as an Image feature)"
    TRL_TURNS = "trl_turns", "TRL prompt-completion JSONL (one row per trained turn)"
    SHAREGPT_TURNS = "sharegpt_turns", "LLaMA-Factory ShareGPT JSONL (one row per trained turn)"
    ROLLOUTS = "rollouts", "Scored rollouts JSONL (offline RL)"
    CARD = "card", "Dataset card (Markdown)"
    GRPO = "grpo", "TRL GRPO prompts JSONL"
    VERL = "verl", "verl RL parquet"
    NEMO_GYM = "nemo_gym", "NeMo Gym rows JSONL"
    VERIFIERS = "verifiers", "verifiers rows JSONL"


class ExportStatus(models.TextChoices):
    READY = "ready", "Ready"
    INVALID = "invalid", "Failed its linter"
    EMPTY = "empty", "No rows"


class DatasetExport(models.Model):
    """A cached export file (path relative to MEDIA_ROOT), its size, sha256 and lint
    report. ``split`` is empty for the card, which covers the whole version."""

    version = models.ForeignKey(DatasetVersion, on_delete=models.CASCADE, related_name="exports")
    format = models.CharField(max_length=16, choices=ExportFormat.choices)
    split = models.CharField(max_length=16, blank=True)
    status = models.CharField(max_length=16, choices=ExportStatus.choices)
    path = models.CharField(max_length=500)
    rows = models.PositiveIntegerField(default=0)
    size = models.PositiveBigIntegerField(default=0)
    sha256 = models.CharField(max_length=64)
    lint = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["version_id", "format", "split"]
        constraints = [
            models.UniqueConstraint(
                fields=["version", "format", "split"], name="dataset_export_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.version} {self.format} {self.split or 'card'}"

    @property
    def offered(self) -> bool:
        return self.status == ExportStatus.READY
