"""Self-check: ``python -m apps.synthesis.generators --seed 1 --capability SLUG [--validate]``."""

from __future__ import annotations

import argparse
import json
import sys
import time

from .families import FAMILIES
from .long_horizon import HORIZONS
from .template import generate_environment


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m apps.synthesis.generators",
        description="Generate one environment from the templates and print it (or its report).",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--capability", action="append", required=True, help="capability slug (repeatable)"
    )
    parser.add_argument("--family", choices=sorted(FAMILIES))
    parser.add_argument("--service", action="append", help="standard service to include")
    parser.add_argument("--tasks", type=int, default=3)
    parser.add_argument("--turns", type=int, nargs=2, default=(1, 3), metavar=("LO", "HI"))
    parser.add_argument("--difficulty", choices=("easy", "medium", "hard"), default="medium")
    parser.add_argument(
        "--horizon",
        choices=HORIZONS,
        default="short",
        help="short: today's tasks; medium: every second task, long: every task a multi-day "
        "project",
    )
    parser.add_argument(
        "--validate", action="store_true", help="validate and print a summary, not the document"
    )
    args = parser.parse_args(argv)
    try:
        doc = generate_environment(
            seed=args.seed,
            capabilities=args.capability,
            services=args.service,
            tasks_per_environment=args.tasks,
            turns=tuple(args.turns),
            difficulty=args.difficulty,
            family=args.family,
            horizon=args.horizon,
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not args.validate:
        print(json.dumps(doc, indent=2, ensure_ascii=False))
        return 0
    from coworkenv_engine.validation import validate_spec

    started = time.perf_counter()
    report = validate_spec(doc)
    elapsed = time.perf_counter() - started
    print(f"{doc['name']} ({doc['metadata']['family']}), hash {report.spec_hash[:12]}")
    for task, result in zip(doc["tasks"], report.tasks, strict=True):
        print(
            f"  {task['key']:<40} {task['split']:<5} turns={len(task['turns'])} "
            f"calls={sum(len(s['calls']) for s in task['reference_solution'])} "
            f"oracle={result.oracle_score} null={result.null_score} echo={result.echo_score} "
            f"sensitivity={result.sensitivity}"
        )
    for problem in report.problems:
        print(f"  {problem.severity}: {problem.code} {problem.pointer} {problem.message}")
    print(f"{'valid' if report.valid else 'INVALID'} in {elapsed * 1000:.0f} ms")
    return 0 if report.valid else 1


if __name__ == "__main__":
    sys.exit(main())
