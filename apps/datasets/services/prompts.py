"""RL prompt versions: environment tasks (not demonstrations) for trainers that roll out
themselves, versioned and checksummed like SFT versions. This module checks a filter
(``PromptFilter``: environments, capabilities, seeds) and creates the version; its rows,
exports, card and verify are ``kinds/prompts.py``'s, driven by ``build.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction

from apps.capabilities.models import Capability
from apps.core.exceptions import ApplicationError
from apps.datasets.models import (
    Dataset,
    DatasetKind,
    DatasetVersion,
)
from apps.environments.models import Environment, EnvironmentStatus, Split, Task

SERVED_STATUSES = (EnvironmentStatus.VALID, EnvironmentStatus.APPROVED)
MAX_SEEDS = 64
MAX_SEED = 2**31 - 1


@dataclass(frozen=True)
class PromptFilter:
    """Which tasks an RL prompt version draws from, and with which seeds (one row each)."""

    environments: tuple[int, ...] = ()
    capabilities: tuple[str, ...] = ()
    seeds: tuple[int, ...] = (0,)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": DatasetKind.RL_PROMPTS.value,
            "environments": sorted(self.environments),
            "capabilities": sorted(self.capabilities),
            "seeds": list(self.seeds),
            "splits": ["train"],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PromptFilter:
        return cls(
            environments=tuple(int(pk) for pk in data.get("environments") or ()),
            capabilities=tuple(data.get("capabilities") or ()),
            seeds=tuple(int(s) for s in data.get("seeds") or (0,)),
        )


def prompt_environments(project, filters: PromptFilter):
    environments = Environment.objects.filter(project=project, status__in=SERVED_STATUSES)
    if filters.environments:
        environments = environments.filter(pk__in=filters.environments)
    return environments.order_by("created_at", "pk")


def _seed_ok(seed: Any) -> bool:
    return isinstance(seed, int) and not isinstance(seed, bool) and 0 <= seed <= MAX_SEED


def _check(project, filters: PromptFilter) -> None:
    problems: dict[str, list[str]] = {}
    if filters.environments:
        known = set(
            Environment.objects.filter(project=project, pk__in=filters.environments).values_list(
                "pk", flat=True
            )
        )
        unknown = sorted(set(filters.environments) - known)
        if unknown:
            problems["environments"] = [
                f"Not in this project: {', '.join(str(pk) for pk in unknown)}."
            ]
    if filters.capabilities:
        known_slugs = set(
            Capability.objects.filter(project=project, slug__in=filters.capabilities).values_list(
                "slug", flat=True
            )
        )
        unknown_slugs = sorted(set(filters.capabilities) - known_slugs)
        if unknown_slugs:
            problems["capabilities"] = [f"Not in this project: {', '.join(unknown_slugs)}."]
    seeds = filters.seeds
    if not seeds or len(seeds) > MAX_SEEDS:
        problems["seeds"] = [f"Between 1 and {MAX_SEEDS} seeds."]
    elif len(set(seeds)) != len(seeds):
        problems["seeds"] = ["Each seed once."]
    elif not all(_seed_ok(s) for s in seeds):
        problems["seeds"] = [f"Integers from 0 to {MAX_SEED}."]
    if problems:
        first = next(iter(problems.values()))[0]
        raise ApplicationError(f"The filter is not valid: {first}", {"fields": problems})
    tasks = Task.objects.filter(
        environment__in=prompt_environments(project, filters), split=Split.TRAIN
    )
    if filters.capabilities:
        tasks = tasks.filter(capability_links__capability__slug__in=filters.capabilities)
    if not tasks.exists():
        raise ApplicationError(
            "Nothing to build: no train task of a valid or approved environment matches this "
            "filter. Validate environments (eval tasks never enter), or widen the filter."
        )


@transaction.atomic
def prompt_version_create(
    *,
    dataset: Dataset,
    user,
    filters: PromptFilter,
    rebuilt_from: DatasetVersion | None = None,
    enqueue: bool = True,
) -> DatasetVersion:
    """Number the next version of an RL prompt dataset and create its build job (enqueued
    once this commits; ``enqueue=False``: the caller runs ``dataset_version_build_job``)."""

    from apps.datasets.services.datasets import dataset_kind_check, version_numbered

    dataset_kind_check(dataset, DatasetKind.RL_PROMPTS)
    _check(dataset.project, filters)

    return version_numbered(
        dataset=dataset,
        user=user,
        enqueue=enqueue,
        filters=filters.to_dict(),
        seed=0,
        validation_fraction=0.0,
        rebuilt_from=rebuilt_from,
    )
