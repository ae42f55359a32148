"""Adversary sweep: how many tasks each adversary passes, samples + template environments.

    python bench/adversaries.py [--root TREE] [--envs 30] [--timing]

``--root`` runs the sweep against another checkout's generator, engine and samples (e.g. a
worktree of an older commit) with THIS tree's adversaries copied in beside its engine, so
old and new templates are measured with the same agents. Prints pass rates per adversary
and per capability, faults off and on, and (``--timing``) validation seconds per
environment. Nothing here asserts anything. ``--envs 30`` (99 tasks, about 1,400
adversary runs) takes a few minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
ADVERSARIES = HERE / "engine/coworkenv_engine/adversaries.py"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", type=Path, default=HERE)
    ap.add_argument("--envs", type=int, default=30)
    ap.add_argument("--timing", action="store_true")
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    root = args.root.resolve()
    if root != HERE:
        for name in ("adversaries.py", "adversary_greedy.py", "guessing.py", "sightings.py"):
            shutil.copy(ADVERSARIES.parent / name, root / "engine/coworkenv_engine" / name)
    sys.path.insert(0, str(root))
    import json

    from apps.synthesis.generators.patterns import CAPABILITY_PATTERNS
    from apps.synthesis.generators.template import generate_environment
    from coworkenv_engine.adversaries import ADVERSARIES as REG
    from coworkenv_engine.runner import run_task
    from coworkenv_engine.spec import load_spec, parse_spec

    caps = sorted(CAPABILITY_PATTERNS)
    docs = [json.loads(p.read_text()) for p in sorted((root / "samples").glob("*.json"))]
    specs = [("sample:" + d["name"], load_spec(d)) for d in docs]
    rng = random.Random(18)
    for i in range(args.envs):
        chosen = rng.sample(caps, rng.randint(1, 3))
        difficulty = rng.choice(["easy", "medium", "hard"])
        doc = generate_environment(
            seed=1000 + i,
            capabilities=chosen,
            tasks_per_environment=3,
            turns=(1, 3),
            difficulty=difficulty,
        )
        docs.append(doc)
        specs.append((f"tmpl:{1000 + i}:{difficulty}", parse_spec(doc)))
    names = [n for n in REG if not args.only or n in args.only.split(",")]
    tasks = Counter()
    passes: dict[tuple[str, bool], int] = Counter()
    by_cap: dict[str, Counter] = defaultdict(Counter)
    cap_tasks = Counter()
    examples: list[str] = []
    scores: dict[tuple[str, bool], list[float]] = defaultdict(list)
    started, cpu_started, runs = time.perf_counter(), time.process_time(), 0
    for label, spec in specs:
        for task in spec.tasks:
            cap = task.capabilities[0] if task.capabilities else "?"
            for faults in (False, True):
                tasks[faults] += 1
                if not faults:
                    cap_tasks[cap] += 1
                any_pass = False
                for name in names:
                    entry = REG[name]
                    if not entry.applies(task):
                        continue
                    r = run_task(spec, task.key, entry.factory(), faults=faults, seed=3)
                    runs += 1
                    scores[(name, faults)].append(r.grading.score)
                    if r.grading.passed or r.grading.strict:
                        passes[(name, faults)] += 1
                        any_pass = True
                        if not faults:
                            by_cap[cap][name] += 1
                        if len(examples) < 40:
                            examples.append(
                                f"{label} {task.key} {name} faults={faults} "
                                f"score={r.grading.score:.2f} "
                                f"passed={[v.grader_id for v in r.grading.verdicts if v.passed]}"
                            )
                if any_pass:
                    passes[("ANY", faults)] += 1
        print(
            f"{label}: tasks {tasks[False]}, any-pass {passes[('ANY', False)]}/"
            f"{passes[('ANY', True)]}",
            file=sys.stderr,
            flush=True,
        )
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    samples = sum(1 for label, _ in specs if label.startswith("sample:"))
    print(
        f"root={root} environments={len(specs)} ({samples} samples + "
        f"{len(specs) - samples} template) tasks={tasks[False]}"
    )
    print(
        f"{runs} adversary runs in {elapsed:.1f} s wall, {cpu:.1f} s CPU "
        f"({cpu / max(1, runs) * 1e3:.1f} ms CPU a run)"
    )
    print("  pass rate (passed or strict) of tasks it applies to; mean score; faults off | on")
    for name in [*names, "ANY"]:
        off, on = passes[(name, False)], passes[(name, True)]
        n_off = len(scores[(name, False)]) or tasks[False]
        n_on = len(scores[(name, True)]) or tasks[True]
        mean = {
            f: sum(scores[(name, f)]) / len(scores[(name, f)]) if scores[(name, f)] else 0.0
            for f in (False, True)
        }
        shown = {f: "  -  " if name == "ANY" else f"{mean[f]:.3f}" for f in (False, True)}
        print(
            f"  {name:16s} off {off:3d}/{n_off:<3d} ({100 * off / n_off:4.1f}%) "
            f"mean {shown[False]}   on {on:3d}/{n_on:<3d} ({100 * on / n_on:4.1f}%) "
            f"mean {shown[True]}"
        )
    for cap in sorted(by_cap):
        row = ", ".join(f"{n} {c}" for n, c in sorted(by_cap[cap].items()))
        print(f"  [{cap}] of {cap_tasks[cap]} tasks: {row}")
    for line in examples:
        print("   ", line)
    if args.timing:
        from coworkenv_engine.validation import validate_spec

        t0 = time.perf_counter()
        for doc in docs:
            validate_spec(doc)
        dt = time.perf_counter() - t0
        print(f"validation: {dt / len(docs):.3f} s per environment ({len(docs)} environments)")


if __name__ == "__main__":
    main()
