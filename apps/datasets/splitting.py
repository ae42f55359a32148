"""Pure rules of a dataset version: the grouped, stratified split, row order, token
statistics, the checksum. No Django: the build service feeds these plain values.

Every key the split hashes comes from content, never from a database id, so the same rows
split and order the same in any database (another server, an import on a laptop):
``SPLIT_KEYS`` names this scheme on the version (blank: a version keyed by database ids).

- **Groups.** Every row starts in the group of the environment revision it was recorded
  against (``spec:<spec hash>``; ``transcript:<content sha256>`` for a row without one,
  ``row_group_key``). Rows join (union-find) when they share a join key: their
  environment (however many revisions its rows come from; the build passes its identity,
  which only decides who joins and never names or orders a group), or a leak key
  (``formats.similarity.leak_keys``: the same prompt or reply once names and numbers are
  masked), so neither an environment nor a near-duplicate cluster can straddle the split.
  Environments with an identical revision (the same spec hash) are one group. Groups are
  no coarser than that: the environments a template generated share a group only where
  their masked prompts or replies do. A group is named by its smallest key.
- **Split by group, stratified by capability.** Groups are ordered by
  ``sha256(f"{seed}:{key}")``. First, **coverage**: each capability found in two or more
  groups and still without validation rows (fewest groups first) sends its smallest group
  (first in seeded order on ties) to validation, unless that takes some capability's last
  train rows. Then, walking the seeded order, a group moves to validation when that lowers
  the cost: the distance of the validation share of rows from the requested fraction, plus
  the mean of the same distance per capability, plus a penalty for each capability left
  with validation rows and no train rows. With two or more groups and a fraction above 0,
  each side gets at least one group; with one group everything is train. So no group (and
  no environment) is on both sides, and the same seed over the same rows gives the same
  split, whatever order the rows come in.
- **Row order** inside a split is ``sha256(f"{seed}:row:{content sha256}")``: shuffled,
  but reproducible (kept rows never share a content hash: duplicates are removed first).
- **Checksum**: sha256 over one line per row, ``"{split}\\t{demonstration}\\t{version}\\t
  {content sha256}\\n"``, train rows then validation rows in their order. The content hash
  covers the exported messages and tools, so a changed transcript, a changed membership
  or a changed order all change the checksum.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Iterable

SPLITS = ("train", "validation")
SPLIT_KEYS = "content"


def _key_hash(seed: int, key: str) -> str:
    return hashlib.sha256(f"{seed}:{key}".encode()).hexdigest()


def group_order(seed: int, keys: Iterable[str]) -> list[str]:
    return sorted(set(keys), key=lambda key: (_key_hash(seed, key), key))


def row_group_key(spec_hash: str, content_sha256: str) -> str:
    """A row's base group: its environment revision's spec hash, else its own content."""
    return f"spec:{spec_hash}" if spec_hash else f"transcript:{content_sha256}"


def group_rows(rows: Iterable[tuple[object, str, Iterable[str]]]) -> dict[object, str]:
    """``rows``: ``(row id, base group, join keys)``. Returns each row's group: base groups
    joined through shared join keys, named by the smallest base group in the union."""
    parent: dict[str, str] = {}

    def find(key: str) -> str:
        parent.setdefault(key, key)
        while parent[key] != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    def union(a: str, b: str) -> None:
        a, b = find(a), find(b)
        if a != b:
            parent[max(a, b)] = min(a, b)

    base_of: dict[object, str] = {}
    owner: dict[str, str] = {}
    for row_id, base, keys in rows:
        base_of[row_id] = base
        find(base)
        for key in keys:
            if key in owner:
                union(owner[key], base)
            else:
                owner[key] = base
    return {row_id: find(base) for row_id, base in base_of.items()}


# Each capability left with validation rows and no train rows costs this much: more than
# any share can gain, so it happens only when no group can go to validation without it.
VALIDATION_ONLY_PENALTY = 1.0


def _cost(rows: int, by_cap: Counter, totals: tuple[int, Counter], fraction: float) -> float:
    total, caps = totals
    cost = abs(rows - fraction * total) / total
    if caps:
        cost += sum(abs(by_cap[c] - fraction * n) / n for c, n in caps.items()) / len(caps)
        cost += VALIDATION_ONLY_PENALTY * sum(1 for c, n in caps.items() if by_cap[c] >= n)
    return cost


def _takes_last_train_rows(by_cap: Counter, caps: Counter) -> bool:
    return any(by_cap[c] >= n for c, n in caps.items())


def _cover(keys: list[str], groups: dict[str, tuple[int, Counter]], caps: Counter) -> set[str]:
    """The coverage phase: a validation group for every capability that two or more groups
    hold, where one can go without taking a capability's last train rows."""
    holders = {c: [k for k in keys if groups[k][1][c] > 0] for c in caps}
    chosen: set[str] = set()
    by_cap: Counter = Counter()
    for cap in sorted(
        (c for c in holders if len(holders[c]) > 1), key=lambda c: (len(holders[c]), c)
    ):
        if by_cap[cap] or len(chosen) == len(keys) - 1:
            continue
        options = [
            k for k in holders[cap] if not _takes_last_train_rows(by_cap + groups[k][1], caps)
        ]
        if options:
            best = min(options, key=lambda k: groups[k][0])  # ties: the seeded order
            chosen.add(best)
            by_cap += groups[best][1]
    return chosen


def choose_validation(
    groups: dict[str, tuple[int, Counter]], *, seed: int, fraction: float
) -> set[str]:
    """The group keys that form the validation split (see the module docstring). ``groups``
    maps a key to ``(rows, rows per capability)``."""
    keys = group_order(seed, groups)
    total = sum(rows for rows, _ in groups.values())
    if fraction <= 0 or len(keys) < 2 or total == 0:
        return set()
    caps: Counter = Counter()
    for _, by_cap in groups.values():
        caps.update(by_cap)
    # sorted: the costs sum over capabilities in this order, whatever order the rows came in
    caps = Counter({c: n for c, n in sorted(caps.items()) if n > 0})
    totals = (total, caps)

    chosen = _cover(keys, groups, caps)
    rows = sum(groups[key][0] for key in chosen)
    by_cap = sum((groups[key][1] for key in chosen), Counter())
    cost = _cost(rows, by_cap, totals, fraction)
    for key in keys:
        if len(chosen) == len(keys) - 1:
            break
        if key in chosen:
            continue
        size, group_caps = groups[key]
        after = by_cap + group_caps
        new_cost = _cost(rows + size, after, totals, fraction)
        if new_cost < cost:
            chosen.add(key)
            rows, by_cap, cost = rows + size, after, new_cost
    if not chosen:
        # No single move helped (every group overshoots, or takes a capability's last train
        # rows): the group that costs least on its own, first in seeded order on ties.
        chosen.add(
            min(keys, key=lambda key: _cost(groups[key][0], groups[key][1], totals, fraction))
        )
    return chosen


def row_order_key(seed: int, content_sha256: str) -> str:
    return _key_hash(seed, f"row:{content_sha256}")


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
