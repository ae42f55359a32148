"""Environment server benchmark: prints figures and ratios measured in the same run.

    python bench/envserver.py [--quick] [--sessions 1,64,256] [--workers 1,2] [--clients K]

* the in-process engine: ``EpisodeSession.act`` steps per second (whole episodes, session
  creation and start included, as the server's resets are) and per-step latency, replaying
  the oracle's actions on every sample task (fault-free);
* the same actions through the OpenEnv-protocol server (``engine.server.serve`` in a
  subprocess on loopback, WebSocket sessions, probed: see ``_probe``) at 1, 64 and 256
  concurrent sessions: steps per second and its ratio to the in-process engine; p50 / p99
  step latency end to end (client send to reply: at n sessions mostly queueing behind the
  others, n / throughput); p50 / p99 of the handling time inside the server and of its
  overhead (handling minus the engine's ``act``), in wall time and in the handler thread's
  CPU time; the server process's CPU time per step. The issue's target is the server's
  overhead per step, < 1 ms p99 at 64 sessions;
* ``--workers 1,2``: each figure again with the server spread over that many worker
  processes (``serve --workers``: worker K on its own port, ids ``wK-…``), the WebSocket
  sessions dealt round robin over them, measured in the same run; ``--sessions 1024`` is
  the scale AWM trains at (1,024 environment instances per step). The figures are then
  over all the workers: steps/s in all, the p99 overhead of every step any worker took,
  the workers' CPU time summed. ``--clients K``: the sessions driven from K client
  processes (default 1), so that the client is not what limits 1,024 sessions;
* ``--against REV``: the same server measurements for the engine of a git revision (its
  ``engine/coworkenv_engine`` extracted to a temporary folder), interleaved with this
  checkout's in the same run, and the after/before ratios;
* a Claw-Eval-style HTTP mock service (``bench/engine.py``'s: one POST per tool call to a
  stdlib threading server, one client) over the same samples' reference calls, for scale:
  the server's single-session steps/s against the mock's calls/s.

Nothing here asserts on time. Loops are bounded and the server is stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from coworkenv_engine.policies import OraclePolicy, PolicyView, ToolCall  # noqa: E402
from coworkenv_engine.session import EpisodeSession  # noqa: E402
from coworkenv_engine.spec import load_spec  # noqa: E402

SAMPLES = sorted((ROOT / "samples").glob("*.json"))


def oracle_scripts() -> list[tuple[str, str, list[dict]]]:
    """(environment, task key, wire actions) of the fault-free oracle on every sample task."""
    scripts = []
    for path in SAMPLES:
        spec = load_spec(json.loads(path.read_text("utf-8")))
        for task in spec.tasks:
            session = EpisodeSession(spec, task.key, faults=False)
            obs = session.start()
            messages, results, rnd, actions = list(obs["messages"]), [], 0, []
            while not obs["done"]:
                view = PolicyView(
                    messages, obs["tools"] or [], session._turn, rnd, task, spec, tuple(results)
                )
                action = OraclePolicy().act(view)
                wire = {
                    "reply": action.reply,
                    "tool_calls": [
                        {"name": c.name, "arguments": c.arguments} for c in action.tool_calls
                    ],
                }
                actions.append(wire)
                obs = session.act(action.reply, list(action.tool_calls))
                if action.tool_calls:
                    rnd += 1
                    results.extend(
                        (c, type("R", (), {"ok": r["ok"], "retryable": r["retryable"]}))
                        for c, r in zip(action.tool_calls, obs["tool_results"], strict=True)
                    )
                if obs["turn_ended"]:
                    rnd, results = 0, []
            scripts.append((spec.name, task.key, actions))
    return scripts


def in_process(scripts, episodes: int) -> tuple[list[float], float]:
    """Per-step latencies and the wall time of whole episodes (session creation and start
    included, as a server's reset is)."""
    specs = {}
    for path in SAMPLES:
        spec = load_spec(json.loads(path.read_text("utf-8")))
        specs[spec.name] = spec
    latencies = []
    start = time.perf_counter()
    for i in range(episodes):
        env, key, actions = scripts[i % len(scripts)]
        session = EpisodeSession(specs[env], key, faults=False)
        session.start()
        for a in actions:
            calls = [ToolCall(c["name"], c["arguments"]) for c in a["tool_calls"]]
            t0 = time.perf_counter()
            session.act(a["reply"], calls)
            latencies.append(time.perf_counter() - t0)
    return latencies, time.perf_counter() - start


def _probe(port: int, out: str, worker: int | None) -> None:
    """The server of this checkout (or of ``--against``'s, by PYTHONPATH) with probes:
    for each step, the time from the WebSocket message's arrival in the handler to the
    observation's send returning, and the engine's ``act`` inside it; written to ``out``
    when the server stops."""
    import signal

    from starlette.websockets import WebSocket

    from coworkenv_engine.server import serve
    from coworkenv_engine.session import EpisodeSession

    samples: list[tuple[float, float, float, float]] = []
    clock, cpu = time.perf_counter, time.thread_time
    current: list = [None]
    receive, act = WebSocket.receive_text, EpisodeSession.act

    async def receive_text(self):
        text = await receive(self)
        self._bench_t, self._bench_c, self._bench_act = clock(), cpu(), None
        current[0] = self  # the handler runs on to act() without yielding
        return text

    def timed_act(self, *args, **kwargs):
        t0, c0 = clock(), cpu()
        try:
            return act(self, *args, **kwargs)
        finally:
            current[0]._bench_act = (clock() - t0, cpu() - c0)

    def sender(original):
        async def send(self, *args, **kwargs):
            await original(self, *args, **kwargs)
            if getattr(self, "_bench_act", None) is not None:
                wall, used = clock() - self._bench_t, cpu() - self._bench_c
                samples.append((wall, self._bench_act[0], used, self._bench_act[1]))
                self._bench_act = None

        return send

    WebSocket.receive_text = receive_text
    EpisodeSession.act = timed_act
    WebSocket.send_text = sender(WebSocket.send_text)
    WebSocket.send_json = sender(WebSocket.send_json)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    specs = [load_spec(json.loads(p.read_text("utf-8"))) for p in SAMPLES]
    with contextlib.suppress(KeyboardInterrupt):  # uvicorn re-raises the signal it caught
        worker_id = {} if worker is None else {"worker_id": worker}  # older engines: none
        serve(specs, port=port, max_sessions=1024, **worker_id)
    Path(out).write_text(json.dumps(samples))


def start_server(engine: Path, out: Path, worker: int | None) -> tuple[subprocess.Popen, str]:
    """A probed server (``_probe``) on a free port, its engine imported from ``engine``;
    ``worker``: its worker id, when it is one of several."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    path = os.pathsep.join([str(engine), str(ROOT), os.environ.get("PYTHONPATH", "")])
    proc = subprocess.Popen(
        [
            sys.executable,
            str(Path(__file__).resolve()),
            "--probe",
            str(port),
            str(out),
            "" if worker is None else str(worker),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": path},
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=1):
                return proc, url
        except OSError:
            time.sleep(0.1)
    proc.terminate()
    raise RuntimeError("the server did not start")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def engine_at(rev: str, into: Path) -> Path:
    """The engine package of git revision ``rev``, extracted under ``into``."""
    archive = subprocess.run(
        ["git", "archive", rev, "engine/coworkenv_engine"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    )
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into / "engine"


async def through_server(urls: list[str], scripts, sessions: range, episodes_each: int):
    """Run ``sessions`` (their numbers) over WebSockets dealt round robin over ``urls``;
    the per-step latencies and the start and end of the whole (``perf_counter``: one
    clock across processes)."""
    from websockets.asyncio.client import connect

    latencies: list[float] = []

    async def worker(w: int) -> None:
        url = urls[w % len(urls)].replace("http://", "ws://") + "/ws"
        async with connect(url, max_size=2**24, open_timeout=300, ping_interval=None) as ws:
            for e in range(episodes_each):
                env, key, actions = scripts[(w + e) % len(scripts)]
                await ws.send(
                    json.dumps(
                        {
                            "type": "reset",
                            "data": {"environment": env, "task_key": key, "faults": False},
                        }
                    )
                )
                await ws.recv()
                for a in actions:
                    t0 = time.perf_counter()
                    await ws.send(json.dumps({"type": "step", "data": a}))
                    reply = json.loads(await ws.recv())
                    latencies.append(time.perf_counter() - t0)
                    if reply["type"] != "observation":
                        raise RuntimeError(reply)

    start = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in sessions))
    return latencies, start, time.perf_counter()


def _client(urls: list[str], scripts, sessions: range, episodes_each: int):
    """One client process's share of the sessions (``--clients``)."""
    return asyncio.run(through_server(urls, scripts, sessions, episodes_each))


def drive(urls: list[str], scripts, n: int, episodes_each: int, clients: int):
    """``n`` sessions from ``clients`` processes (in this one when 1): the latencies and the
    wall time from the first start to the last end."""
    if clients == 1:
        runs = [_client(urls, scripts, range(n), episodes_each)]
    else:
        shares = [range(c, n, clients) for c in range(clients)]
        with concurrent.futures.ProcessPoolExecutor(clients) as pool:
            futures = [pool.submit(_client, urls, scripts, r, episodes_each) for r in shares]
            runs = [f.result() for f in futures]
    latencies = [x for lat, _, _ in runs for x in lat]
    return latencies, max(end for _, _, end in runs) - min(start for _, start, _ in runs)


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def measure(engine: Path, scripts, n: int, episodes_each: int, tmp: Path, **shape) -> dict:
    """``shape``: ``workers`` (server processes) and ``clients`` (client processes)."""
    workers, clients = shape["workers"], shape["clients"]
    outs = [
        tmp / f"samples-{n}-{workers}-{k}-{abs(hash(str(engine)))}.json" for k in range(workers)
    ]
    servers = [start_server(engine, out, k if workers > 1 else None) for k, out in enumerate(outs)]
    try:
        cpu0 = sum(cpu_seconds(proc.pid) for proc, _ in servers)
        lat, wall = drive([url for _, url in servers], scripts, n, episodes_each, clients)
        cpu = sum(cpu_seconds(proc.pid) for proc, _ in servers) - cpu0
    finally:
        for proc, _ in servers:
            proc.send_signal(signal.SIGINT)
        for proc, _ in servers:
            proc.wait(timeout=60)
    samples = [sample for out in outs for sample in json.loads(out.read_text())]
    handling = [h for h, _, _, _ in samples]
    overhead = [h - a for h, a, _, _ in samples]
    overhead_cpu = [c - a for _, _, c, a in samples]
    return {
        "rate": len(lat) / wall,
        "p50": pct(lat, 0.5),
        "p99": pct(lat, 0.99),
        "handling_p50": pct(handling, 0.5),
        "handling_p99": pct(handling, 0.99),
        "overhead_p50": pct(overhead, 0.5),
        "overhead_p99": pct(overhead, 0.99),
        "overhead_cpu_p50": pct(overhead_cpu, 0.5),
        "overhead_cpu_p99": pct(overhead_cpu, 0.99),
        "cpu_per_step": cpu / len(lat),
        "engine_cpu_mean": statistics.mean(a for _, _, _, a in samples),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sessions", default="1,64,256")
    parser.add_argument(
        "--against",
        metavar="REV",
        default=None,
        help="also measure the server of this git revision (before/after in the same run)",
    )
    parser.add_argument(
        "--workers", default="1", help="server processes to spread the sessions over (1,2)"
    )
    parser.add_argument("--clients", type=int, default=1, help="client processes")
    parser.add_argument("--probe", nargs=3, help=argparse.SUPPRESS)  # PORT OUT WORKER
    args = parser.parse_args()
    if args.probe:
        port, out, worker = args.probe
        _probe(int(port), out, int(worker) if worker else None)
        return
    steps_target = 2_000 if args.quick else 10_000

    scripts = oracle_scripts()
    mean_steps = statistics.mean(len(a) for _, _, a in scripts)
    local, local_wall = in_process(scripts, max(1, int(steps_target / mean_steps)))
    local_rate = len(local) / local_wall
    print(f"oracle scripts: {len(scripts)} tasks, {mean_steps:.1f} steps per episode")
    print(
        f"in process      {local_rate:10.0f} steps/s   p50 {pct(local, 0.5) * 1e3:6.3f} ms   "
        f"p99 {pct(local, 0.99) * 1e3:6.3f} ms   mean {statistics.mean(local) * 1e3:6.3f} ms"
    )
    from bench.engine import bench_http, reference_calls

    mock_rates = []
    for path in SAMPLES:
        doc = json.loads(path.read_text("utf-8"))
        mock_rates.append(bench_http(load_spec(doc), reference_calls(doc), steps_target // 4))
    mock_rate = statistics.mean(mock_rates)
    print(f"HTTP mock       {mock_rate:10.0f} calls/s (Claw-Eval style, 1 client, tool calls only)")
    print(
        "server: end-to-end = client send to reply (queueing at n sessions included); "
        "handling = message in the handler to its reply sent; overhead = handling minus the "
        "engine's act() (wall time, and the handler thread's CPU time, which leaves out "
        "the time other processes of a busy machine take); CPU/step = the server process's "
        "CPU time per step, event loop and WebSocket framing included"
    )
    clients = args.clients
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        versions = [("this checkout", ROOT / "engine")]
        if args.against:
            versions.insert(0, (args.against, engine_at(args.against, tmp)))
        results: dict[tuple[str, int, int], dict] = {}
        sessions = [int(x) for x in args.sessions.split(",")]
        spreads = [int(x) for x in args.workers.split(",")]
        for n in sessions:
            episodes_each = max(1, int(steps_target / mean_steps / n))
            for workers in spreads:
                for label, engine in versions:
                    r = results[label, n, workers] = measure(
                        engine, scripts, n, episodes_each, tmp, workers=workers, clients=clients
                    )
                    report(f"{label[:14]:<14}", n, workers, r, local_rate, mock_rate)
        for n in sessions:
            if args.against:
                for workers in spreads:
                    compare(
                        f"x{n:<4} {workers} workers after/before",
                        results["this checkout", n, workers],
                        results[args.against, n, workers],
                    )
            for workers in spreads[1:]:
                compare(
                    f"x{n:<4} {workers} workers / {spreads[0]}",
                    results["this checkout", n, workers],
                    results["this checkout", n, spreads[0]],
                )


def report(label: str, n: int, workers: int, r: dict, local_rate: float, mock_rate: float) -> None:
    print(
        f"{label} x{n:<4} w{workers} {r['rate']:7.0f} steps/s "
        f"({local_rate / r['rate']:5.1f}x slower than in process, "
        f"{r['rate'] / mock_rate:4.2f}x the mock)   "
        f"end-to-end p50 {r['p50'] * 1e3:7.3f} p99 {r['p99'] * 1e3:8.3f} ms   "
        f"handling p50 {r['handling_p50'] * 1e3:6.3f} p99 "
        f"{r['handling_p99'] * 1e3:6.3f} ms   overhead p50 "
        f"{r['overhead_p50'] * 1e3:6.3f} p99 {r['overhead_p99'] * 1e3:6.3f} ms "
        f"(CPU p50 {r['overhead_cpu_p50'] * 1e3:6.3f} p99 "
        f"{r['overhead_cpu_p99'] * 1e3:6.3f} ms)   "
        f"CPU/step {r['cpu_per_step'] * 1e3:6.3f} ms "
        f"({(r['cpu_per_step'] - r['engine_cpu_mean']) * 1e3:6.3f} over the engine)"
    )


def compare(label: str, after: dict, before: dict) -> None:
    print(
        f"{label}: overhead p99 "
        f"{after['overhead_p99'] / before['overhead_p99']:4.2f}x (CPU "
        f"{after['overhead_cpu_p99'] / before['overhead_cpu_p99']:4.2f}x), "
        "overhead p50 "
        f"{after['overhead_p50'] / before['overhead_p50']:4.2f}x, CPU/step "
        f"{after['cpu_per_step'] / before['cpu_per_step']:4.2f}x, steps/s "
        f"{after['rate'] / before['rate']:4.2f}x"
    )


if __name__ == "__main__":
    main()
