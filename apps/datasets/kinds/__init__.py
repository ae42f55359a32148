"""Dataset kinds: one module per kind implementing ``base.DatasetKindRows``."""

from __future__ import annotations

from apps.datasets.kinds.base import Built, DatasetKindRows, Recheck
from apps.datasets.kinds.prompts import PromptKind
from apps.datasets.kinds.rollouts import RolloutKind
from apps.datasets.kinds.sft import SftKind
from apps.datasets.models import DatasetKind, DatasetVersion

KINDS: dict[str, DatasetKindRows] = {
    DatasetKind.SFT: SftKind(),
    DatasetKind.RL_PROMPTS: PromptKind(),
    DatasetKind.ROLLOUTS: RolloutKind(),
}


def kind_of(version: DatasetVersion) -> DatasetKindRows:
    return KINDS[version.dataset.kind]


__all__ = ["KINDS", "Built", "DatasetKindRows", "Recheck", "kind_of"]
