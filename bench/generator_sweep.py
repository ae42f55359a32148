"""Template generator sweep: every family x capability x horizon over a range of seeds.

    python -m bench.generator_sweep --seeds 0-29 [--horizon short] [--family support-desk]
        [--capability resolve-conflicts] [--tasks 1] [--slowest 5]

Each draw (one environment of ``--tasks`` tasks, all of one capability) is generated and
validated with the engine's validator (unbounded time budget), as a template synthesis slot
does before saving. Every invalid draw is printed with its seed, family, capability and
horizon and each problem's code and pointer; so is any draw with a task below grader
sensitivity 1.0 or with a problem other than ``mutants_sampled`` (the validator's note on
long projects). The ``receipts`` family (one capability, images) is swept over the same
seeds. The summary gives counts and the time per environment (generation and validation)
per horizon. The exit status is 1 when any draw was invalid, 0 otherwise.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from apps.synthesis.generators import CAPABILITY_PATTERNS, FAMILIES, generate_environment  # noqa: E402
from apps.synthesis.generators.long_horizon import HORIZONS  # noqa: E402
from apps.synthesis.generators.receipts import CAPABILITY as RECEIPTS_CAPABILITY  # noqa: E402
from apps.synthesis.generators.receipts import FAMILY_KEY as RECEIPTS_FAMILY  # noqa: E402
from apps.synthesis.generators.receipts import generate_receipts_environment  # noqa: E402
from coworkenv_engine.validation import validate_spec  # noqa: E402

NOTES = {"mutants_sampled"}  # informational: long projects replay a sample of mutants


def seed_range(text: str) -> list[int]:
    """``"0-29"``, ``"3"`` or ``"0,3,7-9"`` as a list of seeds."""
    seeds: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        seeds.extend(range(int(lo), int(hi or lo) + 1))
    return seeds


def draw(seed: int, family: str, capability: str, horizon: str, tasks: int):
    """(document, attachment resolver or None) of one draw."""
    if family == RECEIPTS_FAMILY:
        doc, files = generate_receipts_environment(seed=seed, tasks=tasks)
        return doc, files.get
    doc = generate_environment(
        seed=seed,
        capabilities=[capability],
        family=family,
        tasks_per_environment=tasks,
        horizon=horizon,
    )
    return doc, None


def check(doc, attachments) -> list[str]:
    """Every finding of the validator on ``doc`` except informational notes, as text."""
    report = validate_spec(doc, attachments=attachments, time_budget=None)
    found = [
        f"{p.severity} {p.code} {p.pointer}: {p.message}"
        for p in report.problems
        if p.code not in NOTES
    ]
    if report.valid:
        found += [
            f"sensitivity {t.key}: {t.sensitivity}" for t in report.tasks if t.sensitivity != 1.0
        ]
    if not report.valid and not found:
        found.append("invalid (no problem listed)")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.generator_sweep", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--seeds", type=seed_range, default=seed_range("0-9"))
    parser.add_argument("--horizon", action="append", choices=HORIZONS)
    parser.add_argument("--family", action="append", choices=[*FAMILIES, RECEIPTS_FAMILY])
    parser.add_argument("--capability", action="append", choices=sorted(CAPABILITY_PATTERNS))
    parser.add_argument("--tasks", type=int, default=1, help="tasks per environment")
    parser.add_argument("--slowest", type=int, default=5, help="list the N slowest draws")
    args = parser.parse_args(argv)
    horizons = args.horizon or list(HORIZONS)
    families = args.family or [*FAMILIES, RECEIPTS_FAMILY]
    capabilities = args.capability or sorted(CAPABILITY_PATTERNS)

    combos = []
    for horizon in horizons:
        for family in families:
            if family == RECEIPTS_FAMILY:
                if horizon == "short" and (
                    args.capability is None or RECEIPTS_CAPABILITY in capabilities
                ):
                    combos.append((family, RECEIPTS_CAPABILITY, horizon))
                continue
            combos.extend((family, capability, horizon) for capability in capabilities)
    print(
        f"Sweeping {len(combos)} family x capability x horizon combinations over "
        f"{len(args.seeds)} seeds ({len(combos) * len(args.seeds)} environments, "
        f"{args.tasks} task(s) each)",
        flush=True,
    )
    gen_time: dict[str, float] = defaultdict(float)
    val_time: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    bad: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    crashed = 0
    timings = []
    started_all = time.perf_counter()
    for family, capability, horizon in combos:
        for seed in args.seeds:
            label = f"seed={seed} {family} {capability} {horizon}"
            started = time.perf_counter()
            try:
                doc, attachments = draw(seed, family, capability, horizon, args.tasks)
            except Exception as exc:  # a generator crash is a finding too
                crashed += 1
                bad[(family, capability, horizon)].append(seed)
                print(f"CRASH {label}: {type(exc).__name__}: {exc}", flush=True)
                continue
            generated = time.perf_counter()
            found = check(doc, attachments)
            validated = time.perf_counter()
            gen_time[horizon] += generated - started
            val_time[horizon] += validated - generated
            count[horizon] += 1
            timings.append((validated - started, label))
            if found:
                bad[(family, capability, horizon)].append(seed)
                print(f"INVALID {label} ({(validated - started) * 1000:.0f} ms)", flush=True)
                for line in found:
                    print(f"    {line}", flush=True)
    total = sum(count.values()) + crashed
    n_bad = sum(len(seeds) for seeds in bad.values())
    print()
    print(f"{'horizon':<8} {'envs':>6} {'gen ms/env':>11} {'val ms/env':>11} {'total ms/env':>13}")
    for horizon in horizons:
        n = count[horizon]
        if n:
            print(
                f"{horizon:<8} {n:>6} {gen_time[horizon] / n * 1000:>11.1f} "
                f"{val_time[horizon] / n * 1000:>11.1f} "
                f"{(gen_time[horizon] + val_time[horizon]) / n * 1000:>13.1f}"
            )
    print(f"slowest {args.slowest}:")
    for seconds, label in sorted(timings, reverse=True)[: args.slowest]:
        print(f"    {seconds * 1000:8.0f} ms  {label}")
    for (family, capability, horizon), seeds in sorted(bad.items()):
        print(f"  bad: {family} {capability} {horizon}: seeds {seeds}")
    print(
        f"{total - n_bad}/{total} environments valid at sensitivity 1.0, {n_bad} not "
        f"({crashed} crashed) in {time.perf_counter() - started_all:.0f} s"
    )
    return 1 if n_bad else 0


if __name__ == "__main__":
    sys.exit(main())
