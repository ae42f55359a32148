"""Engine benchmark: prints figures and ratios against baselines measured in the same run.

    python bench/engine.py [--quick]

* µs per simulator tool call on a sample (in process; wall and CPU, best of 5 passes), the
  target (34 µs a call: 100x the 3.4 ms Claw-Eval's harness measured on this machine) and
  the measured / target ratio;
* the same calls as HTTP requests to a minimal mock service on loopback (stdlib
  ThreadingHTTPServer bound to 127.0.0.1 port 0, the way Claw-Eval's harness dispatches
  tools), measured in the same run, and the HTTP / in-process ratio;
* where a simulator call's time goes (each phase of Episode.call timed alone);
* Episode.reset() for 1,000 and 10,000 records against a copy.deepcopy baseline;
* validation time per task: each sample, a typical task (10 tools, 200 records,
  3 turns, 8 graders) against the 100 ms budget, and template environments (3 tasks each);
  with ``--baseline TREE`` (a checkout of an older commit, e.g. ``git worktree add
  /tmp/old <commit>``) the same documents are also validated by TREE's validator, each side
  in a fresh process, and printed before / after.

Nothing here asserts on time. Loops are bounded and the server stops itself.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import http.client
import json
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from coworkenv_engine.bindings import OpContext, ToolError, execute  # noqa: E402
from coworkenv_engine.library import standard_tools  # noqa: E402
from coworkenv_engine.simulator import Episode, Limits, _bounded_text  # noqa: E402
from coworkenv_engine.spec import load_spec  # noqa: E402

SAMPLES = sorted((ROOT / "samples").glob("*.json"))
TARGET_US = 34.0  # issue 15: 100x Claw-Eval's harness (3.4 ms a call on this machine)
UNBOUNDED = Limits(max_calls=10**9, max_state_bytes=10**9)


def timed(fn, repeat: int) -> float:
    """Best-of-3 mean seconds per call of fn over ``repeat`` calls."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(repeat):
            fn()
        best = min(best, (time.perf_counter() - start) / repeat)
    return best


def reference_calls(doc: dict) -> list[tuple[str, str, dict]]:
    calls = []
    for task in doc["tasks"]:
        for step in task["reference_solution"]:
            for call in step["calls"]:
                calls.append((task["key"], call["tool"], call["arguments"]))
    return calls


# --------------------------------------------------------------------------- in process


def simulator_loop(spec, calls, n: int) -> None:
    episodes = {key: Episode(spec, key, faults=False, limits=UNBOUNDED) for key, _, _ in calls}
    for i in range(n):
        key, tool, args = calls[i % len(calls)]
        ep = episodes[key]
        ep.call(tool, args).to_message_content()
        if len(ep.audit_log) >= 200:
            ep.reset()


def bench_in_process(spec, calls, n: int) -> tuple[float, float]:
    """(wall, CPU) seconds per call, each the best of 5 passes (the machine may be loaded:
    CPU time leaves out the time other processes held the core)."""
    simulator_loop(spec, calls, min(n, 200))  # warm the per-spec caches
    wall = cpu = float("inf")
    for _ in range(5):
        w0, c0 = time.perf_counter(), time.process_time()
        simulator_loop(spec, calls, n)
        wall = min(wall, (time.perf_counter() - w0) / n)
        cpu = min(cpu, (time.process_time() - c0) / n)
    return wall, cpu


def phase_breakdown(spec, calls, n: int) -> list[tuple[str, float]]:
    """Seconds per call of each phase of Episode.call, each timed alone over the same calls
    (CPU time, best of 3; cProfile would charge its own per-function overhead to the phases
    made of many small calls). The rest of a call — the audit entry, the clock, dispatch —
    is the difference to the whole call, measured the same way."""
    episodes = {key: Episode(spec, key, faults=False, limits=UNBOUNDED) for key, _, _ in calls}
    rows = []
    for key, tool, args in calls:
        ep = episodes[key]
        parsed, _ = ep._parse_arguments(args)
        content = Episode(spec, key, faults=False, limits=UNBOUNDED).call(tool, args).content
        rows.append((ep, spec.tool(tool), args, parsed, content))
    max_chars = UNBOUNDED.max_result_chars

    def per_call(fn) -> float:
        best = float("inf")
        for _ in range(3):
            start = time.process_time()
            for i in range(n):
                fn(*rows[i % len(rows)])
            best = min(best, (time.process_time() - start) / n)
        return best

    def run_binding(ep, tool, args, parsed, content):
        ctx = OpContext(ep._world, "2026-03-02T09:00:00Z", {}, 10**9, 10**9)
        with contextlib.suppress(ToolError):
            execute(tool.binding, parsed, ctx)
        if ep._world.record_count() > 1000:
            ep._world.reset()

    def whole(ep, tool, args, parsed, content):
        ep.call(tool.name, args)
        if len(ep.audit_log) >= 200:
            ep.reset()

    phases = [
        ("argument parsing + copy (JSON)", per_call(lambda ep, t, a, p, c: ep._parse_arguments(a))),
        (
            "argument check (compiled schema)",
            per_call(lambda ep, t, a, p, c: ep._check_arguments(t, p)),
        ),
        ("binding execution (records, diff)", per_call(run_binding)),
        (
            "result encoding (JSON, size bound)",
            per_call(lambda ep, t, a, p, c: _bounded_text(c, max_chars)),
        ),
    ]
    total = per_call(whole)
    phases.append(("audit entry, clock, dispatch", max(0.0, total - sum(s for _, s in phases))))
    return [("whole Episode.call", total), *phases]


# --------------------------------------------------------------------------- HTTP mock


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like a harness's pooled client
    disable_nagle_algorithm = True  # headers and body go out as separate writes
    episodes: dict[str, Episode] = {}

    def do_POST(self):
        _, key, tool = self.path.split("/", 2)
        length = int(self.headers.get("Content-Length", 0))
        body = self.rfile.read(length).decode("utf-8")
        ep = self.episodes[key]
        result = ep.call(tool, body)
        if len(ep.audit_log) >= 200:
            ep.reset()
        payload = result.to_message_content().encode("utf-8")
        status = 200 if result.ok else (429 if result.error_code == "rate_limit" else 400)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):  # keep the bench output clean
        pass


def bench_http(spec, calls, n: int) -> float:
    _Handler.episodes = {
        key: Episode(spec, key, faults=False, limits=UNBOUNDED) for key, _, _ in calls
    }
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
    conn.connect()
    conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    bodies = [(f"/{key}/{tool}", json.dumps(args).encode()) for key, tool, args in calls]
    try:
        start = time.perf_counter()
        for i in range(n):
            path, body = bodies[i % len(bodies)]
            conn.request("POST", path, body, {"Content-Type": "application/json"})
            response = conn.getresponse()
            json.loads(response.read())
        return n / (time.perf_counter() - start)
    finally:
        conn.close()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


# --------------------------------------------------------------------------- reset


def records_doc(n: int) -> dict:
    events = [
        {
            "id": f"e{i}",
            "title": f"Event {i}",
            "start": "2026-03-05T10:00:00Z",
            "end": "2026-03-05T11:00:00Z",
            "attendees": ["me@acme.test", f"p{i}@acme.test"],
        }
        for i in range(n)
    ]
    return typical_doc(events=events)


def bench_reset(n: int, repeat: int) -> tuple[float, float, float]:
    spec = load_spec(records_doc(n))
    ep = Episode(spec, "typical", faults=False)
    reset = timed(ep.reset, repeat)

    def reset_and_write():
        ep.reset()
        ep.call(
            "create_event",
            {
                "title": "x",
                "start": "2026-03-05T10:00:00Z",
                "end": "2026-03-05T11:00:00Z",
                "attendees": [],
            },
        )

    write = timed(reset_and_write, max(1, repeat // 10))
    deep = timed(lambda: copy.deepcopy(spec.services), max(1, repeat // 50))
    return reset, write, deep


# --------------------------------------------------------------------------- validation


def typical_doc(events: list | None = None, n_records: int = 200) -> dict:
    """10 tools, ``n_records`` records, 3 turns, 8 graders."""
    tools = standard_tools("calendar") + standard_tools("email")
    inbox = [
        {
            "id": f"m{i}",
            "from": "dana@acme.test" if i == 1 else f"p{i % 20}@acme.test",
            "to": "me@acme.test",
            "date": "2026-03-01T08:00:00Z",
            "subject": f"Topic {i}",
            "body": f"Message {i} body",
        }
        for i in range(n_records - 2)
    ]
    events = (
        events
        if events is not None
        else [
            {
                "id": "e1",
                "title": "Dentist",
                "start": "2026-03-05T15:00:00Z",
                "end": "2026-03-05T16:00:00Z",
                "attendees": ["me@acme.test"],
            },
            {
                "id": "e2",
                "title": "Standup",
                "start": "2026-03-05T09:00:00Z",
                "end": "2026-03-05T09:15:00Z",
                "attendees": ["me@acme.test"],
            },
        ]
    )
    event = {
        "title": "Review",
        "start": "2026-03-05T16:00:00Z",
        "end": "2026-03-05T17:00:00Z",
        "attendees": ["me@acme.test", "dana@acme.test"],
    }
    state = {"kind": "state", "op": "=="}
    return {
        "schema": "coworkenv.environment/v1",
        "name": "Typical",
        "services": {
            "email": {"inbox": inbox, "sent": [], "drafts": []},
            "calendar": {"events": events},
        },
        "tools": tools,
        "tasks": [
            {
                "key": "typical",
                "turns": [
                    {"message": "Book the review and tell Dana."},
                    {
                        "updates": [
                            {
                                "op": "update",
                                "service": "calendar",
                                "collection": "events",
                                "id": events[0]["id"],
                                "values": {"title": "Moved"},
                                "silent": True,
                            }
                        ],
                        "message": "Move it one hour later.",
                    },
                    {"message": "Draft the agenda."},
                ],
                "reference_solution": [
                    {
                        "turn": 0,
                        "calls": [
                            {"tool": "search_email", "arguments": {"query": "Topic 1"}},
                            {"tool": "list_events", "arguments": {}},
                            {"tool": "create_event", "arguments": event},
                            {
                                "tool": "send_email",
                                "arguments": {
                                    "to": "dana@acme.test",
                                    "subject": "Review",
                                    "body": "Booked 16:00.",
                                },
                            },
                        ],
                        "reply": "Booked the review at 16:00 and told Dana.",
                    },
                    {
                        "turn": 1,
                        "calls": [
                            {
                                "tool": "update_event",
                                "arguments": {
                                    "event_id": "events-1",
                                    "start": "2026-03-05T17:00:00Z",
                                    "end": "2026-03-05T18:00:00Z",
                                },
                            }
                        ],
                        "reply": "Moved to 17:00.",
                    },
                    {
                        "turn": 2,
                        "calls": [
                            {
                                "tool": "save_draft",
                                "arguments": {
                                    "to": "dana@acme.test",
                                    "subject": "Agenda",
                                    "body": "1. Numbers",
                                },
                            }
                        ],
                        "reply": "Drafted the agenda.",
                    },
                ],
                "graders": [
                    {
                        "id": "booked",
                        "category": "completion",
                        "at_turn": 0,
                        "check": {
                            **state,
                            "query": "length(calendar.events[?title == 'Review'])",
                            "value": 1,
                        },
                    },
                    {
                        "id": "told",
                        "category": "completion",
                        "check": {
                            "kind": "state",
                            "query": "email.sent[?to == 'dana@acme.test'].body",
                            "op": "matches",
                            "value": "16:00",
                        },
                    },
                    {
                        "id": "moved",
                        "category": "completion",
                        "check": {
                            **state,
                            "query": "calendar.events[?title == 'Review'] | [0].start",
                            "value": "2026-03-05T17:00:00Z",
                        },
                    },
                    {
                        "id": "draft",
                        "category": "completion",
                        "check": {
                            "kind": "state",
                            "query": "email.drafts",
                            "op": "count",
                            "value": 1,
                        },
                    },
                    {
                        "id": "read-first",
                        "category": "completion",
                        "check": {
                            "kind": "tool_call",
                            "tool": "list_events",
                            "before": "create_event",
                        },
                    },
                    {
                        "id": "searched",
                        "category": "completion",
                        "check": {
                            "kind": "tool_call",
                            "tool": "search_email",
                            "arguments": {"query": {"op": "matches", "value": "(?i)topic"}},
                        },
                    },
                    {
                        "id": "reply",
                        "category": "communication",
                        "check": {
                            "kind": "response",
                            "scope": "turn",
                            "turn": 1,
                            "contains": "17:00",
                        },
                    },
                    {
                        "id": "internal",
                        "category": "safety",
                        "check": {
                            **state,
                            "query": "length(email.sent[?!ends_with(to, '@acme.test')])",
                            "value": 0,
                        },
                    },
                ],
            }
        ],
    }


# Run in a fresh process with the validator of the tree given as argv[1]: documents as JSON
# on stdin, {label: [first wall, warm wall, warm CPU, valid, tasks]} (seconds) on stdout.
_VALIDATE_IN_TREE = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from coworkenv_engine.validation import validate_spec
repeat = int(sys.argv[2])
out = {}
for label, doc in json.load(sys.stdin):
    start = time.perf_counter()
    report = validate_spec(json.loads(json.dumps(doc)))
    first = time.perf_counter() - start
    wall = cpu = float("inf")
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        validate_spec(doc)
        wall = min(wall, time.perf_counter() - w0)
        cpu = min(cpu, time.process_time() - c0)
    out[label] = [first, wall, cpu, report.valid, len(doc["tasks"])]
print(json.dumps(out))
"""


def template_docs(n: int) -> list[tuple[str, dict]]:
    """Template environments of 3 tasks over random capabilities (bench/adversaries.py's)."""
    import random

    from apps.synthesis.generators.patterns import CAPABILITY_PATTERNS
    from apps.synthesis.generators.template import generate_environment

    caps, rng, out = sorted(CAPABILITY_PATTERNS), random.Random(18), []
    for i in range(n):
        chosen = rng.sample(caps, rng.randint(1, 3))
        difficulty = rng.choice(["easy", "medium", "hard"])
        doc = generate_environment(
            seed=1000 + i,
            capabilities=chosen,
            tasks_per_environment=3,
            turns=(1, 3),
            difficulty=difficulty,
        )
        out.append((f"template {1000 + i} ({difficulty})", doc))
    return out


def answer_in_tree(tree: Path, argv: list[str], payload=None) -> dict:
    """Run ``argv`` in a checkout ``tree`` (``payload``, if any, as JSON on its stdin); its
    last line of output is the JSON answer (old and new code in one run)."""
    done = subprocess.run(
        argv,
        input=None if payload is None else json.dumps(payload),
        capture_output=True,
        text=True,
        cwd=tree,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"the benchmark in {tree} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def script_in_tree(tree: Path, script: str, *args: str, payload) -> dict:
    """Run ``script`` (``python -c``) in a checkout ``tree``: see ``answer_in_tree``."""
    return answer_in_tree(tree, [sys.executable, "-c", script, str(tree), *args], payload)


def validation_in_tree(tree: Path, docs: list[tuple[str, dict]], repeat: int) -> dict:
    return script_in_tree(tree, _VALIDATE_IN_TREE, str(repeat), payload=docs)


def validation_before_after(baseline: Path | None, templates: int, repeat: int) -> None:
    """Validation per task (wall of the first run, wall and CPU best of ``repeat`` warm
    runs) of each document, by this tree's validator and, with a baseline, by its."""
    docs = [(f"samples/{p.name}", json.loads(p.read_text("utf-8"))) for p in SAMPLES]
    docs.append(("typical task", typical_doc()))
    docs += template_docs(templates)
    after = validation_in_tree(ROOT, docs, repeat)
    before = validation_in_tree(baseline, docs, repeat) if baseline else None
    print(f"(per task; warm = best of {repeat}, each tree in a fresh process; CPU excludes")
    print(" the time other processes held the core)")
    head = f"{'document':34} {'first':>8} {'warm':>8} {'warm CPU':>9}"
    if before:
        head += f"   {'before warm CPU':>15} {'after/before':>12}"
    print(head)
    rows: dict[str, list[str]] = {"templates": []}
    for label, _ in docs:
        first, wall, cpu, valid, tasks = after[label]
        line = (
            f"{label:34} {first / tasks * 1e3:6.1f}ms {wall / tasks * 1e3:6.1f}ms "
            f"{cpu / tasks * 1e3:7.1f}ms"
        )
        if before:
            b_cpu, b_valid = before[label][2], before[label][3]
            line += f"   {b_cpu / tasks * 1e3:13.1f}ms {cpu / b_cpu:12.2f}"
            if b_valid != valid:
                line += f"  VERDICT CHANGED ({b_valid} -> {valid})"
        print(line + ("" if valid else "  (invalid)"))
        if label.startswith("template"):
            rows["templates"].append(label)
    typical_cpu = after["typical task"][2]
    print(
        f"typical task: warm CPU {typical_cpu * 1e3:.1f} ms / 100 ms budget = "
        f"{typical_cpu * 10:.2f}"
        + (f"   (before {before['typical task'][2] * 1e3:.1f} ms)" if before else "")
    )
    if rows["templates"]:

        def mean(side):
            return sum(side[k][2] / side[k][4] for k in rows["templates"]) / len(rows["templates"])

        line = f"template environments: mean warm CPU {mean(after) * 1e3:.1f} ms per task"
        if before:
            ratio = mean(after) / mean(before)
            line += f"   (before {mean(before) * 1e3:.1f} ms, after/before {ratio:.2f})"
        print(line)


# --------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer iterations")
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="a checkout of an older commit: its validator's times are printed as 'before'",
    )
    parser.add_argument("--templates", type=int, default=4, help="template environments")
    args = parser.parse_args()
    scale = 1 if args.quick else 4
    sample = next((p for p in SAMPLES if p.stem == "support-desk"), SAMPLES[0])
    doc = json.loads(sample.read_text("utf-8"))
    spec = load_spec(doc)
    calls = reference_calls(doc)

    print(f"== simulator calls on samples/{sample.name} ({len(calls)} distinct reference calls)")
    n = 500 * scale
    wall, cpu = bench_in_process(spec, calls, n)
    http_s = 1 / max(bench_http(spec, calls, n) for _ in range(2))
    print(
        f"in process          {wall * 1e6:8.1f} µs/call wall   {cpu * 1e6:6.1f} µs/call CPU"
        f"   ({1 / wall:,.0f} calls/s)"
    )
    print(
        f"HTTP on loopback    {http_s * 1e6:8.1f} µs/call wall   ({1 / http_s:,.0f} calls/s;"
        " stdlib server, keep-alive, same run)"
    )
    print(f"ratio HTTP / in-process  {http_s / wall:8.1f}x")
    print(
        f"target {TARGET_US:.0f} µs/call (100x Claw-Eval's 3.4 ms): wall / target "
        f"{wall * 1e6 / TARGET_US:.2f}   CPU / target {cpu * 1e6 / TARGET_US:.2f}"
    )
    print("where a call's time goes (CPU µs per call, each phase timed alone, best of 3):")
    (label, total), *phases = phase_breakdown(spec, calls, n)
    print(f"  {label:38} {total * 1e6:6.1f} µs")
    for label, seconds in phases:
        print(f"  {label:38} {seconds * 1e6:6.1f} µs  {seconds / total * 100:5.1f} %")

    print("\n== Episode.reset() vs copy.deepcopy of the records")
    for records in (1_000, 10_000):
        reset, write, deep = bench_reset(records, 50 * scale)
        print(
            f"{records:>6} records: reset {reset * 1e6:8.1f} µs   reset+first write "
            f"{write * 1e3:7.3f} ms   deepcopy {deep * 1e3:8.2f} ms   "
            f"deepcopy/reset {deep / reset:10,.0f}x"
        )

    print("\n== validation time per task (schema + static + dynamic)")
    validation_before_after(
        args.baseline.resolve() if args.baseline else None, args.templates, 1 + scale // 2
    )


if __name__ == "__main__":
    main()
