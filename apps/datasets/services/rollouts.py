"""Scored-rollout versions: the graded runs of student rollout groups, with their rewards
and advantages under one variant, as an immutable, checksummed dataset version for offline
RL: the versions of a dataset of kind ``rollouts`` (``DatasetKind.ROLLOUTS``). This module
checks the batches and creates the version from ``filters = {"batches": [ids], "variant":
{reward, advantage, credit}}``; its rows, export, card and verify are ``kinds/rollouts.py``'s,
driven by ``build.py``.
"""

from __future__ import annotations

from django.db import transaction

from apps.core.exceptions import ApplicationError
from apps.datasets.models import (
    Dataset,
    DatasetKind,
    DatasetVersion,
)
from apps.runs.models import RolloutGroup, RunBatch, RunRole
from apps.runs.rollouts import Variant

ROW_BATCH = 500
MAX_BATCHES = 100


def rollout_filters(batches, variant: Variant) -> dict:
    return {"batches": sorted(set(batches)), "variant": variant.to_dict()}


def _check_batches(project, batch_ids) -> list[RunBatch]:
    ids = sorted(set(batch_ids))
    if not ids:
        raise ApplicationError(
            "Choose at least one student batch with rollout groups.",
            {"fields": {"batches": ["Required."]}},
        )
    if len(ids) > MAX_BATCHES:
        raise ApplicationError(
            f"At most {MAX_BATCHES} batches per version.",
            {"fields": {"batches": [f"At most {MAX_BATCHES}."]}},
        )
    found = {b.pk: b for b in RunBatch.objects.filter(project=project, pk__in=ids)}
    if missing := [pk for pk in ids if pk not in found]:
        raise ApplicationError(
            f"No run batch {', '.join(map(str, missing))} in this project.",
            {"fields": {"batches": ["Choose batches of this project."]}},
        )
    plain = [pk for pk in ids if not found[pk].group_size or found[pk].role != RunRole.STUDENT]
    if plain:
        raise ApplicationError(
            f"Batch {', '.join(map(str, plain))} has no rollout groups: scored rollouts come "
            "from student batches started with a group size.",
            {"fields": {"batches": ["Only student batches with a group size."]}},
        )
    if not RolloutGroup.objects.filter(batch_id__in=ids).exists():
        raise ApplicationError(
            "Nothing to build yet: no group of these batches is scored (a group is scored "
            "once all its runs have finished).",
            {"fields": {"batches": ["No scored group yet."]}},
        )
    return [found[pk] for pk in ids]


@transaction.atomic
def rollout_version_create(
    *,
    dataset: Dataset,
    user,
    batches,
    variant: Variant,
    rebuilt_from: DatasetVersion | None = None,
    enqueue: bool = True,
) -> DatasetVersion:
    """Number the next version of ``dataset`` as a scored-rollout version of ``batches``
    under ``variant`` and create its build job (enqueued once this commits; with
    ``enqueue=False`` the caller runs ``dataset_version_build_job``). Batches of another
    project, without groups or with none scored yet are refused before anything exists, and
    so is a dataset of another kind (SFT, RL prompts)."""
    from apps.datasets.services.datasets import (
        dataset_kind_check,
        version_numbered,
        version_tokenizer,
    )

    dataset_kind_check(dataset, DatasetKind.ROLLOUTS)
    chosen = _check_batches(dataset.project, batches)
    tokenizer = version_tokenizer(dataset)
    return version_numbered(
        dataset=dataset,
        user=user,
        enqueue=enqueue,
        label=" (scored rollouts)",
        filters=rollout_filters([b.pk for b in chosen], variant),
        seed=0,
        validation_fraction=0.0,
        rebuilt_from=rebuilt_from,
        tokenizer=tokenizer,
    )


def rollout_version_rebuild(*, version: DatasetVersion, user) -> DatasetVersion:
    return rollout_version_create(
        dataset=version.dataset,
        user=user,
        batches=version.filters["batches"],
        variant=Variant.parse(**version.filters["variant"]),
        rebuilt_from=version,
    )
