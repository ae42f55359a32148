"""Environment server benchmark: prints figures and ratios measured in the same run.

    python bench/envserver.py [--quick] [--sessions 1,64,256]

* the in-process engine: ``EpisodeSession.act`` steps per second (whole episodes, session
  creation and start included, as the server's resets are) and per-step latency, replaying
  the oracle's actions on every sample task (fault-free);
* the same actions through the OpenEnv-protocol server (``python -m coworkenv_engine
  serve`` in a subprocess on loopback, WebSocket sessions) at 1, 64 and 256 concurrent
  sessions: steps per second, p50 / p99 step latency (send to reply), and the ratio to the
  in-process engine; the p99 overhead over the in-process step is the issue's target
  (< 1 ms at 64 sessions);
* a Claw-Eval-style HTTP mock service (``bench/engine.py``'s: one POST per tool call to a
  stdlib threading server, one client) over the same samples' reference calls, for scale:
  the server's single-session steps/s against the mock's calls/s.

Nothing here asserts on time. Loops are bounded and the server is stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
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


def start_server() -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "coworkenv_engine",
            "serve",
            *map(str, SAMPLES),
            "--port",
            str(port),
            "--max-sessions",
            "1024",
        ],
        cwd=ROOT,
        env={**os.environ, "COWORKENV_ENV_TOKEN": ""},
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=1):
                return proc, url
        except OSError:
            time.sleep(0.1)
    proc.terminate()
    raise RuntimeError("the server did not start")


async def through_server(url: str, scripts, sessions: int, episodes_each: int):
    from websockets.asyncio.client import connect

    latencies: list[float] = []

    async def worker(w: int) -> None:
        async with connect(url.replace("http://", "ws://") + "/ws", max_size=2**24) as ws:
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
    await asyncio.gather(*(worker(w) for w in range(sessions)))
    return latencies, time.perf_counter() - start


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sessions", default="1,64,256")
    args = parser.parse_args()
    steps_target = 2_000 if args.quick else 10_000

    scripts = oracle_scripts()
    mean_steps = statistics.mean(len(a) for _, _, a in scripts)
    local, local_wall = in_process(scripts, max(1, int(steps_target / mean_steps)))
    local_rate = len(local) / local_wall
    local_mean = statistics.mean(local)
    print(f"oracle scripts: {len(scripts)} tasks, {mean_steps:.1f} steps per episode")
    print(
        f"in process      {local_rate:10.0f} steps/s   p50 {pct(local, 0.5) * 1e3:6.3f} ms   "
        f"p99 {pct(local, 0.99) * 1e3:6.3f} ms"
    )
    from bench.engine import bench_http, reference_calls

    mock_rates = []
    for path in SAMPLES:
        doc = json.loads(path.read_text("utf-8"))
        mock_rates.append(bench_http(load_spec(doc), reference_calls(doc), steps_target // 4))
    mock_rate = statistics.mean(mock_rates)
    print(f"HTTP mock       {mock_rate:10.0f} calls/s (Claw-Eval style, 1 client, tool calls only)")
    proc, url = start_server()
    try:
        for n in (int(x) for x in args.sessions.split(",")):
            episodes_each = max(1, int(steps_target / mean_steps / n))
            lat, wall = asyncio.run(through_server(url, scripts, n, episodes_each))
            rate = len(lat) / wall
            p50, p99 = pct(lat, 0.5), pct(lat, 0.99)
            print(
                f"server x{n:<4}     {rate:10.0f} steps/s   p50 {p50 * 1e3:6.3f} ms   "
                f"p99 {p99 * 1e3:6.3f} ms   in-process/server {local_rate / rate:6.1f}x   "
                f"p99 overhead {(p99 - local_mean) * 1e3:7.3f} ms   "
                f"server/mock {rate / mock_rate:5.2f}x"
            )
    finally:
        proc.terminate()
        proc.wait(timeout=30)


if __name__ == "__main__":
    main()
