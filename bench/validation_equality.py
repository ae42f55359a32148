"""Validation verdicts before and after a speed change: the same, report for report.

    python bench/validation_equality.py --baseline /path/to/older/checkout [--templates 20]
    python bench/validation_equality.py                 # this tree, sharing on vs off

Validates the samples, every scenario family at every horizon (short, medium, long) and
``--templates`` random template environments (``bench/engine.py``'s) plus a ~200-call
long-horizon task, in two trees (each in a fresh process), and compares for every document:
the whole validation report (problems, per-task scores, sensitivities, adversary scores) and,
for every episode validation ran, its policy, seed, faults setting, stop reason, state hash,
audit log, transcript and grading. Prints one line per document, the CPU seconds of each
side, and exits 1 on any difference. Without ``--baseline`` the two sides are this tree
with shared replays (replays.py) on and off.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.engine import script_in_tree  # noqa: E402

_IN_TREE = r"""
import hashlib, json, sys, time
tree, share = sys.argv[1], sys.argv[2] == "1"
sys.path[:0] = [tree, tree + "/engine"]
import coworkenv_engine.validation.dynamic as dynamic
from coworkenv_engine.validation import validate_spec
from coworkenv_engine.spec import canonical_json
if hasattr(dynamic, "SHARE_REPLAYS"):
    dynamic.SHARE_REPLAYS = share
runs = []
original = dynamic.run_task
def recording(*args, **kw):
    r = original(*args, **kw)
    runs.append(canonical_json([r.policy, r.seed, r.faults, r.stop_reason, r.state_hash,
        r.audit_log, r.transcript, r.grading.to_dict(), r.exogenous_log]))
    return r
dynamic.run_task = recording
docs = json.loads(sys.stdin.read())
out = {}
for label, doc in docs:
    runs.clear()
    c = time.process_time()
    report = validate_spec(doc).to_dict()
    cpu = time.process_time() - c
    out[label] = {
        "report": hashlib.sha256(canonical_json(report).encode()).hexdigest(),
        "runs": [hashlib.sha256(r.encode()).hexdigest() for r in runs],
        "valid": report["valid"], "problems": len(report["problems"]), "cpu": cpu,
        "text": canonical_json(report),
    }
print(json.dumps(out))
"""


def documents(templates: int, long_calls: int) -> list[tuple[str, dict]]:
    sys.path[:0] = [str(ROOT), str(ROOT / "engine")]
    from apps.synthesis.generators.families import FAMILIES
    from apps.synthesis.generators.template import generate_environment
    from bench.engine import SAMPLES, template_docs, typical_doc
    from bench.horizon import task_of

    docs = [(f"samples/{p.name}", json.loads(p.read_text("utf-8"))) for p in SAMPLES]
    docs.append(("typical task", typical_doc()))
    for i, family in enumerate(sorted(FAMILIES)):
        for horizon in ("short", "medium", "long"):
            doc = generate_environment(
                seed=500 + i,
                capabilities=["cross-service-orchestration"],
                family=family,
                tasks_per_environment=2,
                horizon=horizon,
            )
            docs.append((f"{family} {horizon}", doc))
    docs += template_docs(templates)
    if long_calls:
        docs.append((f"long ~{long_calls} calls", task_of(long_calls, 1)))
    return docs


def in_tree(tree: Path, docs: list[tuple[str, dict]], share: bool) -> dict:
    return script_in_tree(tree, _IN_TREE, "1" if share else "0", payload=docs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, default=None, help="an older checkout")
    parser.add_argument("--templates", type=int, default=20)
    parser.add_argument("--long", type=int, default=200, help="calls of the long task (0: none)")
    args = parser.parse_args()
    docs = documents(args.templates, args.long)
    new = in_tree(ROOT, docs, True)
    old = in_tree(args.baseline, docs, True) if args.baseline else in_tree(ROOT, docs, False)
    side = "baseline" if args.baseline else "sharing off"
    print(f"{len(docs)} documents; 'before' = {side}, 'after' = this tree")
    print(f"{'document':34} {'runs':>5} {'valid':>6} {'before CPU':>10} {'after CPU':>10}  same")
    differ = 0
    for label, _ in docs:
        a, b = old[label], new[label]
        same = a["report"] == b["report"] and a["runs"] == b["runs"]
        differ += not same
        print(
            f"{label:34} {len(b['runs']):5} {b['valid']!s:>6} {a['cpu']:9.2f}s {b['cpu']:9.2f}s"
            f"  {'yes' if same else 'NO'}"
        )
        if not same and a["text"] != b["text"]:
            digest = hashlib.sha256(a["text"].encode()).hexdigest()[:12]
            print(f"   report differs (before {digest}): {b['text'][:300]}")
    cpu_a = sum(v["cpu"] for v in old.values())
    cpu_b = sum(v["cpu"] for v in new.values())
    print(f"total CPU before {cpu_a:.2f}s  after {cpu_b:.2f}s  after/before {cpu_b / cpu_a:.2f}")
    print("all reports and episodes identical" if not differ else f"{differ} documents DIFFER")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
