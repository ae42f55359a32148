"""Pure rules of a dataset version: the split by environment, row order, token statistics,
the checksum. No Django: the build service feeds these plain values.

- **Split by environment.** Environments are ordered by ``sha256(f"{seed}:{key}")``. Walking
  that order, an environment moves to validation when that brings the validation share of
  rows closer to the requested fraction. With two or more environments and a fraction above
  0, each side gets at least one environment; with one environment everything is train.
  So no environment is on both sides, and the same seed over the same rows gives the same
  split.
- **Row order** inside a split is ``sha256(f"{seed}:row:{demonstration id}")``: shuffled,
  but reproducible.
- **Checksum**: sha256 over one line per row, ``"{split}\\t{demonstration}\\t{version}\\t
  {content sha256}\\n"``, train rows then validation rows in their order. The content hash
  covers the exported messages and tools, so a changed transcript, a changed membership
  or a changed order all change the checksum.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable

SPLITS = ("train", "validation")


def _key_hash(seed: int, key: str) -> str:
    return hashlib.sha256(f"{seed}:{key}".encode()).hexdigest()


def environment_order(seed: int, keys: Iterable[str]) -> list[str]:
    return sorted(set(keys), key=lambda key: (_key_hash(seed, key), key))


def choose_validation(
    rows_by_environment: dict[str, int], *, seed: int, fraction: float
) -> set[str]:
    """The environment keys that form the validation split (see the module docstring)."""
    keys = environment_order(seed, rows_by_environment)
    total = sum(rows_by_environment.values())
    if fraction <= 0 or len(keys) < 2 or total == 0:
        return set()
    target = fraction * total
    chosen: set[str] = set()
    rows = 0
    for key in keys:
        if len(chosen) == len(keys) - 1:
            break
        size = rows_by_environment[key]
        if abs(rows + size - target) < abs(rows - target):
            chosen.add(key)
            rows += size
    if not chosen:
        # Every environment overshoots alone: take the smallest (first in seeded order on ties).
        chosen.add(min(keys, key=lambda key: rows_by_environment[key]))
    return chosen


def row_order_key(seed: int, demonstration_id: int) -> str:
    return _key_hash(seed, f"row:{demonstration_id}")


def percentile(sorted_values: list[int], q: float) -> int:
    """Nearest-rank percentile of already sorted values (0 for none)."""
    if not sorted_values:
        return 0
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def token_stats(values: Iterable[int]) -> dict[str, float | int]:
    ordered = sorted(values)
    if not ordered:
        return {"rows": 0, "total": 0, "mean": 0, "p50": 0, "p95": 0, "max": 0}
    total = sum(ordered)
    return {
        "rows": len(ordered),
        "total": total,
        "mean": round(total / len(ordered), 1),
        "p50": percentile(ordered, 50),
        "p95": percentile(ordered, 95),
        "max": ordered[-1],
    }


class Checksum:
    """Feed rows in order (train first, then validation); ``hexdigest()`` is the checksum."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()
        self.rows = 0

    def add(self, *, split: str, demonstration: int, version: int, content_sha256: str) -> None:
        self._hash.update(f"{split}\t{demonstration}\t{version}\t{content_sha256}\n".encode())
        self.rows += 1

    def hexdigest(self) -> str:
        return self._hash.hexdigest()
