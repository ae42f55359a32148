"""The results table of an experiment, from run outcomes: plain functions, no database.

Each arm (the base model, after SFT, after GRPO) has outcomes on the held-out tasks; rows
group them (every held-out seed, by capability, by horizon, and the held-out family on a row
of its own: out of distribution). Per row and arm: tasks, runs, mean score, pass rate,
strict rate, pass@k and pass^k (the engine's estimators, as the runs' evaluation page), and
against the base the difference of the per-task mean score and pass rate with a paired
bootstrap 95% CI (tasks resampled with a seeded RNG, so a table renders the same twice).
"""

from __future__ import annotations

import csv
import io
import random
from collections import defaultdict
from dataclasses import asdict, dataclass

from coworkenv_engine.scoring import pass_at_k, pass_hat_k

ARMS = (("base", "Base"), ("sft", "After SFT"), ("grpo", "After GRPO"))
ALL = "all"
OUT_OF_DISTRIBUTION = "held-out family"
RESAMPLES = 2000
LEVEL = 0.95


@dataclass(frozen=True)
class Outcome:
    """One graded run of a held-out task."""

    run_id: int
    task: int
    score: float
    passed: bool
    strict: bool
    capabilities: tuple[str, ...] = ()
    horizon: str = ""
    out_of_distribution: bool = False


@dataclass(frozen=True)
class Difference:
    """``after - before`` of a per-task mean over the tasks both arms ran."""

    n: int
    mean: float
    low: float
    high: float

    @property
    def verdict(self) -> str:
        if self.low > 0:
            return "improved"
        if self.high < 0:
            return "worse"
        return "unchanged"


def _mean(values) -> float | None:
    values = list(values)
    return sum(values) / len(values) if values else None


def per_task(outcomes: list[Outcome], value) -> dict[int, float]:
    """Each task's mean of ``value(outcome)`` over its trials."""
    trials: dict[int, list[float]] = defaultdict(list)
    for outcome in outcomes:
        trials[outcome.task].append(float(value(outcome)))
    return {task: sum(v) / len(v) for task, v in trials.items()}


def _percentile(ordered: list[float], q: float) -> float:
    """The ``q`` quantile of sorted values, interpolated linearly between neighbours."""
    position = q * (len(ordered) - 1)
    below = int(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


def paired_bootstrap(
    before: dict[int, float],
    after: dict[int, float],
    *,
    seed: int = 0,
    resamples: int = RESAMPLES,
    level: float = LEVEL,
) -> Difference | None:
    """The mean of ``after - before`` over the tasks in both, with the percentile bootstrap
    CI at ``level`` (tasks drawn with replacement); None when no task is in both."""
    tasks = sorted(set(before) & set(after))
    if not tasks:
        return None
    differences = [after[t] - before[t] for t in tasks]
    rng = random.Random(seed)
    n = len(differences)
    means = sorted(sum(rng.choices(differences, k=n)) / n for _ in range(resamples))
    tail = (1 - level) / 2
    return Difference(
        n=n,
        mean=sum(differences) / n,
        low=_percentile(means, tail),
        high=_percentile(means, 1 - tail),
    )


def arm_stats(outcomes: list[Outcome], k: int) -> dict:
    """The figures of one arm in one row; pass@k and pass^k over the tasks with k trials."""
    trials: dict[int, list[Outcome]] = defaultdict(list)
    for outcome in outcomes:
        trials[outcome.task].append(outcome)
    eligible = [
        (len(runs), sum(1 for r in runs if r.passed)) for runs in trials.values() if len(runs) >= k
    ]
    return {
        "tasks": len(trials),
        "runs": len(outcomes),
        "mean_score": _mean(o.score for o in outcomes),
        "pass_rate": _mean(1.0 if o.passed else 0.0 for o in outcomes),
        "strict_rate": _mean(1.0 if o.strict else 0.0 for o in outcomes),
        "pass_at_k": _mean(pass_at_k(n, c, k) for n, c in eligible),
        "pass_hat_k": _mean(pass_hat_k(n, c, k) for n, c in eligible),
        "run_ids": sorted(o.run_id for o in outcomes),
    }


def groups_of(outcome: Outcome) -> list[str]:
    """The rows an outcome counts in: the held-out family's alone, or every held-out seed's,
    each of its capabilities' and its horizon's."""
    if outcome.out_of_distribution:
        return [OUT_OF_DISTRIBUTION]
    groups = [ALL, *(f"capability:{slug}" for slug in outcome.capabilities)]
    if outcome.horizon:
        groups.append(f"horizon:{outcome.horizon}")
    return groups


def _row_order(group: str) -> tuple:
    kind = group.split(":")[0]
    return ({ALL: 0, "capability": 1, "horizon": 2}.get(kind, 3), group)


def results_table(arms: dict[str, list[Outcome]], *, k: int, seed: int = 0) -> dict:
    """Rows (``groups_of``) by arms (``ARMS`` present in ``arms``), with each later arm's
    paired difference from the base in mean score and pass rate."""
    present = [arm for arm, _ in ARMS if arm in arms]
    by_group: dict[str, dict[str, list[Outcome]]] = defaultdict(lambda: defaultdict(list))
    for arm in present:
        for outcome in arms[arm]:
            for group in groups_of(outcome):
                by_group[group][arm].append(outcome)
    rows = []
    for group in sorted(by_group, key=_row_order):
        cells = by_group[group]
        row = {"group": group, "arms": {a: arm_stats(cells.get(a, []), k) for a in present}}
        row["deltas"] = {
            arm: _deltas(cells.get("base", []), cells.get(arm, []), seed)
            for arm in present
            if arm != "base" and "base" in present
        }
        rows.append(row)
    return {"k": k, "arms": present, "rows": rows}


def _deltas(base: list[Outcome], after: list[Outcome], seed: int) -> dict:
    return {
        "score": paired_bootstrap(
            per_task(base, lambda o: o.score), per_task(after, lambda o: o.score), seed=seed
        ),
        "pass_rate": paired_bootstrap(
            per_task(base, lambda o: o.passed), per_task(after, lambda o: o.passed), seed=seed
        ),
    }


def _figure(value) -> str:
    return "" if value is None else f"{value:.3f}"


COLUMNS = (
    "group",
    "arm",
    "tasks",
    "runs",
    "mean_score",
    "pass_rate",
    "strict_rate",
    "pass_at_k",
    "pass_hat_k",
    "delta_score",
    "delta_score_low",
    "delta_score_high",
    "delta_pass_rate",
    "delta_pass_rate_low",
    "delta_pass_rate_high",
)


def table_lines(table: dict) -> list[list[str]]:
    """One line per (row, arm), the ``COLUMNS`` in order; figures to three decimals."""
    lines = []
    for row in table["rows"]:
        for arm in table["arms"]:
            stats = row["arms"][arm]
            deltas = row["deltas"].get(arm, {})
            line = [row["group"], arm, str(stats["tasks"]), str(stats["runs"])]
            line += [
                _figure(stats[c])
                for c in ("mean_score", "pass_rate", "strict_rate", "pass_at_k", "pass_hat_k")
            ]
            for metric in ("score", "pass_rate"):
                difference = deltas.get(metric)
                line += (
                    [_figure(difference.mean), _figure(difference.low), _figure(difference.high)]
                    if difference
                    else ["", "", ""]
                )
            lines.append(line)
    return lines


def table_csv(table: dict) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([c.replace("_k", f"_{table['k']}") for c in COLUMNS])
    writer.writerows(table_lines(table))
    return out.getvalue()


def table_markdown(table: dict) -> str:
    """A paper's table: the CI of each difference in brackets beside it."""
    k = table["k"]
    header = ["Group", "Arm", "n", "Score", "Pass", "Strict", f"pass@{k}", f"pass^{k}"]
    header += ["Δ score [95% CI]", "Δ pass [95% CI]"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for line in table_lines(table):
        cells = [line[0], line[1], line[2], *line[4:9]]
        for start in (9, 12):
            mean, low, high = line[start : start + 3]
            cells.append(f"{mean} [{low}, {high}]" if mean else "—")
        lines.append("| " + " | ".join(cell or "—" for cell in cells) + " |")
    return "\n".join(lines) + "\n"


def _said(group: str) -> str:
    if group == ALL:
        return "the held-out tasks"
    if group == OUT_OF_DISTRIBUTION:
        return "the held-out family"
    return group.replace(":", " ")


def table_summary(table: dict) -> str:
    """A plain sentence per later arm: where the mean score improved (the CI above 0), got
    worse (below 0), and where it did not change measurably."""
    sentences = []
    for arm, label in ARMS:
        if arm == "base" or arm not in table["arms"]:
            continue
        verdicts = defaultdict(list)
        for row in table["rows"]:
            difference = row["deltas"].get(arm, {}).get("score")
            if difference is not None:
                verdicts[difference.verdict].append(_said(row["group"]))
        if not verdicts:
            continue
        parts = [
            f"{word} on {', '.join(verdicts[verdict])}"
            for verdict, word in (
                ("improved", "improved"),
                ("worse", "got worse"),
                ("unchanged", "did not change measurably"),
            )
            if verdicts[verdict]
        ]
        sentences.append(f"{label}, the mean score " + "; ".join(parts) + ".")
    return " ".join(sentences) or "No arm to compare with the base yet."


def table_json(table: dict) -> dict:
    """The table as JSON (each difference an object with n, mean, low, high)."""
    rows = [
        {
            "group": row["group"],
            "arms": row["arms"],
            "deltas": {
                arm: {m: (asdict(d) if d else None) for m, d in deltas.items()}
                for arm, deltas in row["deltas"].items()
            },
        }
        for row in table["rows"]
    ]
    return {"k": table["k"], "arms": table["arms"], "rows": rows}


def latest_arm(table: dict) -> str | None:
    """The last arm of ``ARMS`` the table has (after GRPO, else SFT, else the base)."""
    return table["arms"][-1] if table["arms"] else None


def weaknesses(table: dict) -> list[tuple[str, float]]:
    """(capability slug, pass^k of the latest arm), lowest first (ties by slug): the order a
    targeted synthesis gives them, so the weakest get the most tasks."""
    arm = latest_arm(table)
    found = [
        (row["group"].removeprefix("capability:"), row["arms"][arm]["pass_hat_k"])
        for row in table["rows"]
        if row["group"].startswith("capability:") and row["arms"][arm]["pass_hat_k"] is not None
    ]
    return sorted(found, key=lambda item: (item[1], item[0]))


def round_comparison(previous: dict, current: dict, targeted: list[str]) -> list[dict]:
    """Each targeted capability's pass^k in the latest arm of the previous round and of this
    one, and whether it improved."""
    before, after = dict(weaknesses(previous)), dict(weaknesses(current))
    rows = []
    for slug in targeted:
        was, now = before.get(slug), after.get(slug)
        improved = None if was is None or now is None else now > was
        rows.append({"capability": slug, "before": was, "after": now, "improved": improved})
    return rows
