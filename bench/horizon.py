"""Cost as the horizon grows: tasks of about 5, 20, 60 and 200 reference calls.

    python bench/horizon.py             # 5, 20, 60, 200 calls
    python bench/horizon.py --quick     # 5, 20, 60 (validation of a 200-call task is the
                                        # slow part: its mutants and adversaries replay it)

The tasks come from the template generator (one multi-day project each: ``--horizon long``
for 20 and 60 calls, a wider project shape for 200, a short task for 5). For each it prints

* per-step engine time: the oracle's fault-free episode (``run_task``) divided by its calls,
  and the same for the last tenth of the calls alone (flat when a step does not get slower
  as the audit log and transcript grow);
* validation time per task (``validate_spec``: oracle, replays, null, echo, mutants,
  adversaries);
* run storage: the JSON a run stores (transcript, tools, audit log, exogenous log,
  verdicts), in all and per call;
* viewer render time: the run page's timeline (``run_timeline`` and its template);
* export time: the trajectory normalised and rendered in every format with its linter; and
  the same after splitting it by turn under a limit of half its tokens (each split row holds
  the history before its turn, so the split output grows with turns x length: expected);
* the engine's median step time (and of the last tenth of the calls: flat means the
  growing audit log and transcript cost a step nothing).

The last lines give each figure per call relative to the smallest task: about 1.0 means
linear growth (per-step cost flat), growing ratios mean super-linear. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from apps.synthesis.generators import generate_environment  # noqa: E402
from apps.synthesis.generators.long_horizon import Shape  # noqa: E402
from coworkenv_engine.policies import OraclePolicy  # noqa: E402
from coworkenv_engine.runner import reference_footprint, run_task  # noqa: E402
from coworkenv_engine.simulator import Episode, Limits  # noqa: E402
from coworkenv_engine.spec import load_spec  # noqa: E402
from coworkenv_engine.validation import validate_spec  # noqa: E402


def shape_for(size: int) -> Shape:
    """A project shape of about ``size`` reference calls (batches of several items a day)."""
    items = max(2, size // 15)
    return Shape(
        turns=(max(6, size // 16), max(8, size // 14)),
        calls=(size - 3, size + 12),
        share=1.0,
        kickoff=(items, items + 1),
        batch=(items, items + 1),
    )


def task_of(size: int, seed: int) -> dict:
    """A one-task environment with about ``size`` reference calls."""
    common = {"seed": seed, "family": "finance-close", "tasks_per_environment": 1}
    if size <= 8:
        return generate_environment(capabilities=["cross-service-orchestration"], **common)
    return generate_environment(
        capabilities=["cross-service-orchestration"],
        horizon="long",
        shape=shape_for(size),
        **common,
    )


def calls_of(doc: dict) -> int:
    return sum(len(step["calls"]) for step in doc["tasks"][0]["reference_solution"])


def timed(fn, repeat: int = 5):
    best, value = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - start)
    return best, value


def engine_steps(doc: dict) -> tuple[float, float, object]:
    """(seconds per step over the episode, seconds per step over its last tenth, result)."""
    spec = load_spec(doc)
    key = doc["tasks"][0]["key"]
    reference_footprint(spec, key)  # computed once per spec; not a step's cost
    _, result = timed(lambda: run_task(spec, key, OraclePolicy(), faults=False))
    steps = doc["tasks"][0]["reference_solution"]
    limits = Limits(max_calls=10**6, max_state_bytes=10**9)

    def all_calls() -> list[float]:
        """Each reference call timed alone, its turn's updates applied first."""
        ep = Episode(spec, key, faults=False, limits=limits)
        stamps = []
        for step in steps:
            while ep.turn_index < step["turn"]:
                ep.advance_turn()
            for c in step["calls"]:
                start = time.perf_counter()
                ep.call(c["tool"], c["arguments"])
                stamps.append(time.perf_counter() - start)
        return stamps

    best: list[float] = []
    for _ in range(3):
        stamps = all_calls()
        if not best or sum(stamps) < sum(best):
            best = stamps
    tail = sorted(best[-max(1, len(best) // 10) :])
    # Medians: on a shared machine a few calls take another process's time slice.
    return sorted(best)[len(best) // 2], tail[len(tail) // 2], result


def storage(result) -> int:
    stored = {
        "transcript": result.transcript,
        "tools": result.tools,
        "audit_log": result.audit_log,
        "exogenous_log": json.loads(json.dumps(result.exogenous_log, default=str)),
        "verdicts": [v.__dict__ for v in result.grading.verdicts],
    }
    return len(json.dumps(stored, ensure_ascii=False, default=str).encode())


def render_viewer(result) -> float:
    from django.template.loader import render_to_string

    from apps.runs.timeline import run_timeline

    exogenous = json.loads(json.dumps(result.exogenous_log, default=str))

    def render():
        items = run_timeline(
            transcript=result.transcript, audit_log=result.audit_log, exogenous_log=exogenous
        )
        return render_to_string("runs/_timeline.html", {"items": items, "prefix": ""})

    seconds, _ = timed(render)
    return seconds


def export(result) -> tuple[float, float, int]:
    """(seconds to export the whole trajectory in every format with its linter, seconds to
    split it by turn under half its tokens and export those rows, how many rows)."""
    from apps.datasets.formats import FORMATS, format_rows, normalize_messages, normalize_tools
    from apps.datasets.formats.long import SPLIT, fit, row_tokens

    def estimate(text: str) -> int:
        return -(-len(text) // 4)

    def write(rows, tools) -> None:
        for fmt, spec in FORMATS.items():
            linter = spec["linter"]("validation")
            for row in rows:
                for line in format_rows(fmt, row, tools):
                    linter.check_line(json.dumps(line, ensure_ascii=False), ref=1)
            linter.finish()

    def whole():
        messages = normalize_messages(result.transcript)
        write([messages], normalize_tools(result.tools))

    def split():
        messages = normalize_messages(result.transcript)
        tools = normalize_tools(result.tools)
        limit = row_tokens(messages, tools, estimate) // 2
        rows = fit(messages, tools, max_tokens=limit, policy=SPLIT, count=estimate)
        write(rows, tools)
        return len(rows)

    seconds, _ = timed(whole)
    split_seconds, rows = timed(split)
    return seconds, split_seconds, rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the 200-call task")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "coworkenv_web.settings")
    import django

    django.setup()

    sizes = (5, 20, 60) if args.quick else (5, 20, 60, 200)
    rows = []
    header = (
        f"{'target':>6} {'calls':>5} {'turns':>5} {'days':>4} {'step µs':>8} {'tail µs':>8} "
        f"{'valid s':>8} {'run KB':>8} {'B/call':>7} {'view ms':>8} {'export ms':>9} "
        f"{'split ms':>8} {'rows':>4}"
    )
    print(header)
    for size in sizes:
        doc = task_of(size, args.seed)
        task = doc["tasks"][0]
        n = calls_of(doc)
        times = [t["time"][:10] for t in task["turns"] if t.get("time")]
        days = len({doc["clock"]["start"][:10], *times})
        step, tail, result = engine_steps(doc)
        start = time.perf_counter()
        report = validate_spec(doc)
        validation = time.perf_counter() - start
        size_bytes = storage(result)
        view = render_viewer(result)
        export_s, split_s, split_rows = export(result)
        rows.append(
            {
                "calls": n,
                "step": step,
                "validation": validation,
                "bytes": size_bytes,
                "view": view,
                "export": export_s,
                "split": split_s,
            }
        )
        print(
            f"{size:>6} {n:>5} {len(task['turns']):>5} {days:>4} {step * 1e6:>8.1f} "
            f"{tail * 1e6:>8.1f} {validation:>8.2f} {size_bytes / 1024:>8.1f} "
            f"{size_bytes / n:>7.0f} {view * 1e3:>8.2f} {export_s * 1e3:>9.2f} "
            f"{split_s * 1e3:>8.2f} {split_rows:>4}" + ("" if report.valid else "  (INVALID)")
        )
    base = rows[0]
    print("\nper call, relative to the smallest task (1.0 = linear growth, flat per-step cost):")
    print(
        f"{'calls':>5} {'step':>6} {'valid':>6} {'store':>6} {'view':>6} {'export':>6} {'split':>6}"
    )
    for row in rows:

        def rel(key: str, row=row) -> float:
            return (row[key] / row["calls"]) / (base[key] / base["calls"])

        print(
            f"{row['calls']:>5} {row['step'] / base['step']:>6.2f} {rel('validation'):>6.2f} "
            f"{rel('bytes'):>6.2f} {rel('view'):>6.2f} {rel('export'):>6.2f} "
            f"{rel('split'):>6.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
