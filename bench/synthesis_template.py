"""Template generator benchmark: environments per second, per family and overall.

    python bench/synthesis_template.py [--n 20] [--tasks 3] [--difficulty medium]

For each scenario family, ``n`` seeds of environments with ``tasks`` tasks (capabilities
round-robin over the catalogue): the rate of generation alone, and of generation plus the
engine's full validation (what a template synthesis slot does before saving), with the
share of valid documents and of tasks at grader sensitivity 1.0. Nothing here asserts.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from apps.synthesis.generators import CAPABILITY_PATTERNS, FAMILIES, generate_environment  # noqa: E402
from coworkenv_engine.validation import validate_spec  # noqa: E402

CATALOGUE = ROOT / "apps" / "capabilities" / "catalogue.json"


def capabilities() -> list[str]:
    if CATALOGUE.exists():
        return [c["slug"] for c in json.loads(CATALOGUE.read_text())["capabilities"]]
    return sorted(CAPABILITY_PATTERNS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20, help="environments per family")
    parser.add_argument("--tasks", type=int, default=3, help="tasks per environment")
    parser.add_argument("--difficulty", choices=("easy", "medium", "hard"), default="medium")
    args = parser.parse_args()
    caps = capabilities()
    print(
        f"Template generator: {args.n} environments x {args.tasks} tasks per family, "
        f"difficulty {args.difficulty}, {len(caps)} capabilities round-robin"
    )
    print(
        f"{'family':<22} {'gen env/s':>10} {'gen+val env/s':>14} {'ms/task val':>12} "
        f"{'valid':>7} {'sens 1.0':>9}"
    )
    total_gen = total_val = 0.0
    total_valid = total_tasks = total_sensitive = total_docs = 0
    for key in FAMILIES:
        docs, generated = [], 0.0
        for seed in range(args.n):
            # rotate the capabilities so each family sees all of them across seeds
            offset = (seed * args.tasks) % len(caps)
            chosen = caps[offset:] + caps[:offset]
            started = time.perf_counter()
            docs.append(
                generate_environment(
                    seed=seed,
                    capabilities=chosen,
                    family=key,
                    tasks_per_environment=args.tasks,
                    difficulty=args.difficulty,
                )
            )
            generated += time.perf_counter() - started
        started = time.perf_counter()
        reports = [validate_spec(doc) for doc in docs]
        validated = time.perf_counter() - started
        valid = sum(r.valid for r in reports)
        tasks = sum(len(r.tasks) for r in reports)
        sensitive = sum(t.sensitivity == 1.0 for r in reports for t in r.tasks)
        print(
            f"{key:<22} {args.n / generated:>10.1f} {args.n / (generated + validated):>14.1f} "
            f"{validated / tasks * 1000:>12.1f} {valid:>3}/{args.n:<3} {sensitive:>4}/{tasks:<4}"
        )
        total_gen += generated
        total_val += validated
        total_valid += valid
        total_tasks += tasks
        total_sensitive += sensitive
        total_docs += args.n
    print(
        f"{'all':<22} {total_docs / total_gen:>10.1f} "
        f"{total_docs / (total_gen + total_val):>14.1f} "
        f"{total_val / total_tasks * 1000:>12.1f} {total_valid:>3}/{total_docs:<3} "
        f"{total_sensitive:>4}/{total_tasks:<4}"
    )


if __name__ == "__main__":
    main()
