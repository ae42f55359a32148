"""Reads for datasets: lists with their latest figures, a version's rows and exports."""

from __future__ import annotations

import json

from django.db.models import Count, F, OuterRef, QuerySet, Subquery
from django.db.models.fields.json import KeyTextTransform

from apps.datasets.models import (
    Dataset,
    DatasetExport,
    DatasetKind,
    DatasetRow,
    DatasetVersion,
    ExportFormat,
    PromptRow,
    RolloutRow,
    VersionStatus,
)


def sft_versions_ready(*, project) -> QuerySet[DatasetVersion]:
    """The project's built versions of SFT datasets (demonstrations), what supervised
    training takes (not RL prompts nor scored rollouts), by dataset then newest first."""
    return (
        DatasetVersion.objects.filter(
            dataset__project=project,
            dataset__kind=DatasetKind.SFT,
            status=VersionStatus.READY,
        )
        .select_related("dataset")
        .order_by("dataset__name", "-number")
    )


def version_ids_with_images(*, versions) -> set[int]:
    """Which of ``versions`` hold images: their train split exports a TRL bundle (the rows
    and their images, zipped), so a text model cannot train on them."""
    return set(
        DatasetExport.objects.filter(
            version__in=versions, format=ExportFormat.TRL, split="train", path__endswith=".zip"
        ).values_list("version_id", flat=True)
    )


def dataset_list(*, project) -> QuerySet[Dataset]:
    """The project's datasets with their version count and latest version number."""
    latest = DatasetVersion.objects.filter(dataset=OuterRef("pk")).order_by("-number")
    return (
        Dataset.objects.filter(project=project)
        .select_related("created_by")
        .annotate(
            version_count=Count("versions", distinct=True),
            latest_number=Subquery(latest.values("number")[:1]),
            latest_status=Subquery(latest.values("status")[:1]),
            latest_rows=Subquery(latest.values("train_rows")[:1]),
        )
        .order_by("name", "id")
    )


def version_list(*, dataset) -> QuerySet[DatasetVersion]:
    return (
        DatasetVersion.objects.filter(dataset=dataset)
        .select_related("job", "created_by", "rebuilt_from", "dataset")
        .order_by("-number")
    )


def version_rows(
    *, version, split: str | None = None, capability: str | None = None
) -> QuerySet[DatasetRow]:
    """The demonstration rows of an SFT version in export order; ``capability``: only the
    demonstrations that exercise it (by slug)."""
    rows = DatasetRow.objects.filter(version=version).select_related(
        "demonstration", "demonstration_version"
    )
    if split:
        rows = rows.filter(split=split)
    if capability:
        rows = rows.filter(demonstration__capabilities__slug=capability)
    return rows.order_by("split", "position").only(
        "id",
        "split",
        "position",
        "environment_key",
        "tokens",
        "content_sha256",
        "demonstration__id",
        "demonstration__task_key",
        "demonstration__environment_name",
        "demonstration__model_name",
        "demonstration_version__id",
        "demonstration_version__number",
    )


def version_prompt_rows(
    *, version, split: str | None = None, capability: str | None = None
) -> QuerySet[PromptRow]:
    """The rows of an RL prompt version in export order, with their prompt entries as built;
    ``capability``: only the tasks that exercised it when the version was built (the entry's
    ``capabilities``, not the task's current ones: a version does not change)."""
    rows = PromptRow.objects.filter(version=version)
    if split:
        rows = rows.filter(split=split)
    if capability:
        # The entry's list as JSON text holds '"<slug>"' exactly when the slug is in it
        # (a slug has no quote); portable where JSON containment is not (SQLite).
        rows = rows.annotate(_capabilities=KeyTextTransform("capabilities", "entry")).filter(
            _capabilities__contains=json.dumps(capability)
        )
    return (
        rows.select_related("environment")
        .order_by("split", "position")
        .only(
            "id",
            "split",
            "position",
            "task_key",
            "seed",
            "entry",
            "content_sha256",
            "environment__id",
            "environment__name",
        )
    )


def version_rollout_rows(
    *,
    version,
    split: str | None = None,
    group: int | None = None,
    passed: bool | None = None,
) -> QuerySet[RolloutRow]:
    """The rows of a scored-rollout version: which run of which group, in export order, with
    the group's reward table (``group.variants``) and the run's ``passed`` (annotated as
    ``run_passed``). ``group``: one rollout group's members; ``passed``: only the runs whose
    grading passed (True) or failed (False)."""
    rows = RolloutRow.objects.filter(version=version)
    if split:
        rows = rows.filter(split=split)
    if group is not None:
        rows = rows.filter(group_id=group)
    if passed is not None:
        rows = rows.filter(run__passed=passed)
    return (
        rows.select_related("group")
        .annotate(run_passed=F("run__passed"))
        .order_by("split", "position")
        .only(
            "id",
            "split",
            "position",
            "group_id",
            "member",
            "run_id",
            "environment_key",
            "tokens",
            "content_sha256",
            "group__id",
            "group__batch_id",
            "group__task_key",
            "group__environment_name",
            "group__variants",
        )
    )


def version_row_select(kind: str):
    """The selector of a version's rows for its dataset's kind."""
    return {
        DatasetKind.RL_PROMPTS: version_prompt_rows,
        DatasetKind.ROLLOUTS: version_rollout_rows,
    }.get(kind, version_rows)


def version_exports(*, version) -> dict[str, dict[str, DatasetExport]]:
    """``{format: {split: export}}`` for the JSONL formats (the card separately)."""
    table: dict[str, dict[str, DatasetExport]] = {}
    for export in DatasetExport.objects.filter(version=version).exclude(format=ExportFormat.CARD):
        table.setdefault(export.format, {})[export.split] = export
    return table


def version_sample_query(*, version: DatasetVersion) -> str:
    """The query string of a download a sample command can name (``format=…&split=…`` of an
    offered export), or "" when the version offers none."""
    from apps.datasets.card import sample_export

    exports = list(version.exports.values("format", "split", "status"))
    sample = sample_export(exports, version.dataset.kind)
    return f"format={sample[0]}&split={sample[1]}" if sample else ""
