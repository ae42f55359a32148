"""Runs benchmark: a teacher batch through the real Celery path, against the endpoint's limit.

    python bench/runs.py [--n 100] [--latency 0.2] [--concurrency 4]
                         [--pool threads|prefork] [--procs P] [--workers W] [--debug]
                         [--postgres postgres://postgres@127.0.0.1:5432/cw_x --redis redis://127.0.0.1:6379/4]

By default everything runs in a throw-away directory (SQLite database and filesystem
broker). With ``--postgres`` and ``--redis`` it runs against a fresh database
``<name>_bench`` (dropped and created) and that Redis database (flushed): the team-server
mode, with the endpoint's limit in Redis. A loopback OpenAI-compatible server plays a fixed
teacher script after a fixed latency L per answer, serving at most C requests at a time;
the model endpoint's limit and the batch's concurrency are also C. Each trial of the task
costs exactly 3 model calls (list the calendar, send the email, reply), so the ideal wall
time of N task-trials is ``N * 3 * L / C``.

Workers: ``--pool threads`` (default) starts ``--procs`` worker processes (default 2) of
C/P threads each; ``--pool prefork`` starts one worker of ``--workers`` processes (default
C). The bench prints the wall time (batch created → job finished; worker start-up is
excluded by a warm-up batch), the ideal, their ratio (the run pipeline's overhead above the
endpoint's own limit), the peak of requests in flight at the server, the workers' CPU
seconds per step, and where one lane's time goes, per run: every run appends its phases
(``RUN_TIMINGS_FILE``, see ``apps.core.timings``), and the time from a run being sent to
being claimed is read from its row. The engine's share of a step is measured apart: the
same episode replayed in process with a scripted policy (no HTTP, no database).

``--profile`` profiles one lane in process instead (cProfile on this thread's CPU time):
how the breakdown above was found.

Nothing asserts on time.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TMP = Path(tempfile.mkdtemp(prefix="coworkenv-bench-runs-"))
TIMINGS = TMP / "timings.jsonl"


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100, help="Task-trials (multiple of 20).")
    parser.add_argument("--latency", type=float, default=0.2, help="L: seconds per answer.")
    parser.add_argument("--concurrency", type=int, default=4, help="C: endpoint limit.")
    parser.add_argument("--pool", choices=["threads", "prefork"], default="threads")
    parser.add_argument("--procs", type=int, default=2, help="Worker processes (threads pool).")
    parser.add_argument("--workers", type=int, default=0, help="Pool processes (prefork; C).")
    parser.add_argument("--postgres", default="", help="A PostgreSQL URL: uses <name>_bench.")
    parser.add_argument("--redis", default="", help="A Redis URL (its database is flushed).")
    parser.add_argument("--lane-max", type=int, default=None, help="RUN_LANE_MAX_S (0: off).")
    parser.add_argument(
        "--debug",
        action="store_true",
        help="DEBUG=true, as in the local mode (Django then logs every query it runs).",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="Instead: profile one lane in this process (cProfile, thread CPU time).",
    )
    return parser.parse_args()


ARGS = arguments() if __name__ == "__main__" else None


def configure(args) -> str:
    """Point Django at the bench's database and broker; returns a label for the output."""
    os.environ["COWORKENV_VAR_DIR"] = str(TMP)
    os.environ["DJANGO_SETTINGS_MODULE"] = "coworkenv_web.settings"
    os.environ["BENCH_LLM_API_KEY"] = "sk-bench"
    os.environ["RUN_TIMINGS_FILE"] = str(TIMINGS)
    # As a worker host is deployed (DEBUG=false: Django keeps no log of the queries it runs;
    # no difference above the noise here); --debug measures the local mode's default.
    os.environ["DEBUG"] = "true" if args.debug else "false"
    os.environ.setdefault("SECRET_KEY", "bench-only-secret-key")
    os.environ["LLM_ALLOWED_NETWORKS"] = "127.0.0.0/8"  # the loopback model server (a lab's vLLM)
    os.environ["LLM_KEY_HOSTS"] = "any"  # the bench's own key, to its own loopback server
    if args.lane_max is not None:
        os.environ["RUN_LANE_MAX_S"] = str(args.lane_max)
    if args.postgres:
        import psycopg

        url = urlparse(args.postgres)
        name = url.path.lstrip("/") + "_bench"
        admin = url._replace(path="/postgres").geturl()
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
        os.environ["DATABASE_URL"] = url._replace(path=f"/{name}").geturl()
    else:
        os.environ["DATABASE_URL"] = f"sqlite://{TMP / 'bench.sqlite3'}"
    if args.redis:
        import redis

        redis.Redis.from_url(args.redis).flushdb()
        os.environ["CELERY_BROKER_URL"] = args.redis
    else:
        os.environ.pop("CELERY_BROKER_URL", None)
    database = "PostgreSQL" if args.postgres else "SQLite"
    broker = "Redis broker, endpoint limit in Redis" if args.redis else "filesystem broker"
    return f"{database} + {broker}, DEBUG={'true' if args.debug else 'false'}"


if ARGS is not None:
    LABEL = configure(ARGS)

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402

from bench.machine import cores, machine_busy  # noqa: E402

CALLS_PER_TRIAL = 3
SEND = {"to": "dana@acme.test", "subject": "Q3 review", "body": "Booked Thursday 16:00."}


def spec(index: int) -> dict:
    from coworkenv_engine.library import standard_tools

    tools = standard_tools("calendar", names=["list_events"]) + standard_tools(
        "email", names=["send_email"]
    )
    return {
        "schema": "coworkenv.environment/v1",
        "name": f"Bench {index}",
        "services": {
            "calendar": {
                "events": [
                    {
                        "id": "e1",
                        "title": "Dentist",
                        "start": "2026-03-05T15:00:00Z",
                        "end": "2026-03-05T16:00:00Z",
                        "attendees": ["me@acme.test"],
                    }
                ]
            },
            "email": {"inbox": [], "sent": []},
        },
        "tools": tools,
        "tasks": [
            {
                "key": "tell-dana",
                "system": "You are the assistant of me@acme.test.",
                "turns": [
                    {
                        # The grader matches subject and body exactly, so the request gives
                        # them word for word (exact_match_rejects_variant).
                        "message": "Check my Thursday, then email Dana (dana@acme.test) with "
                        "the subject 'Q3 review' and the body 'Booked Thursday 16:00.'"
                    }
                ],
                "reference_solution": [
                    {
                        "turn": 0,
                        "calls": [
                            {"tool": "list_events", "arguments": {}},
                            {"tool": "send_email", "arguments": SEND},
                        ],
                        "reply": "Told Dana.",
                    }
                ],
                "graders": [
                    {
                        "id": "told",
                        "category": "completion",
                        "check": {
                            "kind": "state",
                            "query": "email.sent[?to == 'dana@acme.test' && subject == "
                            "'Q3 review' && body == 'Booked Thursday 16:00.']",
                            "op": "count",
                            "value": 1,
                        },
                    },
                    {
                        "id": "looked",
                        "category": "robustness",
                        "check": {"kind": "tool_call", "tool": "list_events"},
                    },
                    {
                        "id": "no-collateral",
                        "category": "safety",
                        "check": {"kind": "side_effects"},
                    },
                ],
            }
        ],
    }


def teacher(request):
    """The fixed script: list the calendar, send the email, reply — by conversation state."""
    from tests.llm_server import Reply

    tools_seen = sum(1 for m in request.messages if m.get("role") == "tool")
    if tools_seen == 0:
        return Reply.tool_call("list_events", {})
    if tools_seen == 1:
        return Reply.tool_call("send_email", SEND)
    return Reply.text("Checked your Thursday and told Dana that 16:00 works.")


def setup(server, concurrency: int, environments: int):
    from django.contrib.auth import get_user_model

    from apps.environments.models import Environment
    from apps.environments.services import environment_import, environment_validate
    from apps.llm.services import endpoint_create
    from apps.workspace.services import project_start

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user("bench", password="bench-pass-123")
    project = project_start(name="Bench", slug="bench", description="", creator=user)
    envs = [
        environment_import(project=project, spec=spec(i), user=user) for i in range(environments)
    ]
    # Validated as every environment a batch plays is: the workers then load each spec as
    # its validation certified it, without checking it again (``LoadedSpecs``).
    for environment in envs:
        assert environment_validate(environment=environment).valid
    envs = list(Environment.objects.filter(pk__in=[e.pk for e in envs]).order_by("pk"))
    endpoint = endpoint_create(
        project=project,
        name="teacher",
        base_url=server.base_url,
        model="bench-teacher",
        api_key_env="BENCH_LLM_API_KEY",
        request_timeout_s=30,
        max_concurrency=concurrency,
    )
    return project, user, envs, endpoint


def start_workers(args, log: Path) -> list[subprocess.Popen]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if args.pool == "threads":
        procs = max(1, min(args.procs, args.concurrency))
        sizes = [args.concurrency // procs + (i < args.concurrency % procs) for i in range(procs)]
    else:
        sizes = [args.workers or args.concurrency]
    return [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "coworkenv_web",
                "worker",
                "-Q",
                "llm",
                "--pool",
                args.pool,
                "--concurrency",
                str(size),
                "--loglevel",
                "WARNING",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "--hostname",
                f"bench{i}@%h",
            ],
            cwd=ROOT,
            env=env,
            stdout=log.with_suffix(f".{i}.log").open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        for i, size in enumerate(sizes)
    ]


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU of these processes and their children (from /proc)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    seen = set()
    todo = list(pids)
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / ticks
            for task in Path(f"/proc/{pid}/task").iterdir():
                children = (task / "children").read_text().split()
                todo.extend(int(child) for child in children)
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


def batch(project, user, endpoint, envs, trials: int, concurrency: int):
    from apps.runs.models import PolicyKind, RunRole
    from apps.runs.services import BatchSettings, TaskSelection, run_batch_create

    return run_batch_create(
        project=project,
        user=user,
        policy_kind=PolicyKind.ENDPOINT,
        endpoint=endpoint,
        role=RunRole.TEACHER,
        selection=TaskSelection(environments=tuple(e.pk for e in envs)),
        settings=BatchSettings(trials=trials, concurrency=concurrency, faults=False),
    )


def wait(job_id: int, timeout: float) -> None:
    from apps.core.models import Job

    deadline = time.monotonic() + timeout
    while Job.objects.get(pk=job_id).is_active:
        if time.monotonic() > deadline:
            raise SystemExit(f"The batch did not finish in {timeout:.0f} s; logs in {TMP}")
        time.sleep(0.05)


def engine_step_ms(repeats: int = 200) -> float:
    """The engine alone: the same episode with an in-process scripted policy, per step."""
    from coworkenv_engine.policies import PolicyAction, ToolCall
    from coworkenv_engine.runner import run_task
    from coworkenv_engine.spec import load_spec

    class Scripted:
        name = "scripted"

        def act(self, view):
            if view.round == 0:
                return PolicyAction(tool_calls=[ToolCall("list_events", {})])
            if view.round == 1:
                return PolicyAction(tool_calls=[ToolCall("send_email", SEND)])
            return PolicyAction(reply="Checked your Thursday and told Dana that 16:00 works.")

    loaded = load_spec(spec(0))
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        result = run_task(loaded, "tell-dana", Scripted(), faults=False)
        times.append(time.perf_counter() - started)
        assert result.grading.strict
    return statistics.median(times) * 1000 / CALLS_PER_TRIAL


PHASES = [
    ("queue_wait", "sent → claimed (broker, dispatch of the next run)"),
    ("claim", "claim (conditional UPDATE + load)"),
    ("start", "job marked running"),
    ("slot_wait", "endpoint slot: acquire (incl. waiting)"),
    ("slot_release", "endpoint slot: release"),
    ("model", "model wait (HTTP request to the endpoint)"),
    ("call_log", "LLM call log writes"),
    ("cancel_check", "cancellation checks"),
    ("checkpoint", "turn checkpoints (transcript so far)"),
    ("engine", "engine + agent glue (play minus the above)"),
    ("store", "transcript + outcome stored"),
    ("take", "next run taken (a lane's, in the same transaction)"),
    ("close", "that transaction's lock wait, BEGIN and COMMIT"),
    ("dispatch", "batch progress + dispatch of the next run"),
    ("heartbeat", "heartbeat writes (background thread)"),
]
# Measured inside "play" (the run's call log is written after it, so it is not among them).
IN_PLAY = ("slot_wait", "slot_release", "model", "cancel_check", "checkpoint")


def breakdown(runs) -> tuple[dict[str, float], int]:
    """Mean seconds per run for each phase, and how many runs reported."""
    lines = [json.loads(line) for line in TIMINGS.read_text().splitlines() if line.strip()]
    totals: dict[str, float] = dict.fromkeys([name for name, _ in PHASES] + ["play"], 0.0)
    for line in lines:
        for name, seconds in line["seconds"].items():
            totals[name] = totals.get(name, 0.0) + seconds
    totals["engine"] = totals.pop("play") - sum(totals[name] for name in IN_PLAY)
    # The run's closing transaction holds its call log, outcome and take: what is left of
    # it is the wait for the write lock (SQLite), BEGIN and COMMIT.
    inside = totals["call_log"] + totals["store"] + totals["take"]
    totals["close"] = max(0.0, totals["close"] - inside)
    waits = [
        (started - enqueued).total_seconds()
        for enqueued, started in runs.values_list("enqueued_at", "started_at")
        if enqueued and started
    ]
    totals["queue_wait"] = sum(max(0.0, w) for w in waits)
    count = max(1, len(lines))
    return {name: seconds / count for name, seconds in totals.items()}, len(lines)


def profile_lane(args) -> None:
    """One lane in this process: ``run_execute`` with a lane plays a batch's runs one after
    another (no worker, no broker hop), under cProfile measuring this thread's CPU time (the
    loopback server's threads are not counted). Prints the top functions by own CPU time."""
    import cProfile
    import pstats

    from apps.runs.models import Run
    from apps.runs.services import run_execute
    from tests.llm_server import LoopbackLLMServer

    server = LoopbackLLMServer(latency=args.latency, responder=teacher).start()
    try:
        project, user, envs, endpoint = setup(server, 1, 1)
        for trials in (2, 20):  # a warm-up batch, then the profiled one
            timed = batch(project, user, endpoint, envs, trials, 1)
            first = Run.objects.filter(batch=timed).order_by("id").values_list("pk", flat=True)[0]
            profiler = cProfile.Profile(time.thread_time)
            cpu = time.thread_time()
            profiler.enable()
            run_execute(run_id=first, lane=lambda: True)
            profiler.disable()
            cpu = time.thread_time() - cpu
    finally:
        server.stop()
    steps = 20 * CALLS_PER_TRIAL
    print(f"one lane, 20 runs in process, L={args.latency:.3f}s: this thread's CPU "
          f"{cpu / steps * 1000:.2f} ms per step (with the profiler's own overhead)")  # fmt: skip
    stats = pstats.Stats(profiler)
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(60)


def main() -> None:
    args = ARGS
    if args.profile:
        profile_lane(args)
        return
    from apps.core.models import Job
    from apps.runs.models import Run, RunStatus
    from tests.llm_server import LoopbackLLMServer

    trials = 20
    environments = max(1, args.n // trials)
    n = environments * trials
    server = LoopbackLLMServer(latency=args.latency, capacity=args.concurrency, responder=teacher)
    server.start()
    workers = []
    try:
        project, user, envs, endpoint = setup(server, args.concurrency, environments)
        workers = start_workers(args, TMP / "worker.log")
        warm = batch(project, user, endpoint, envs[:1], max(2, len(workers) * 2), len(workers) * 2)
        wait(warm.job_id, 120)
        server.reset()
        server.responder = teacher
        TIMINGS.write_text("")

        pids = [w.pid for w in workers]
        cpu_before = cpu_seconds(pids)
        own_before = sum(os.times()[:2])
        busy_before = machine_busy()
        started = time.time()
        timed = batch(project, user, endpoint, envs, trials, args.concurrency)
        wait(timed.job_id, 900)
        # batch created → its job finished, as the worker stamped it (not when this
        # process's polling noticed, up to a poll interval later)
        wall = Job.objects.get(pk=timed.job_id).finished_at.timestamp() - started
        busy = machine_busy() - busy_before
        worker_cpu = cpu_seconds(pids) - cpu_before
        own_cpu = sum(os.times()[:2]) - own_before
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:  # a loaded machine: stop it the hard way
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait(timeout=30)
        server.stop()

    runs = Run.objects.filter(batch=timed)
    graded = runs.filter(status=RunStatus.SUCCEEDED, passed=True).count()
    calls = len(server.chat_requests())
    steps = n * CALLS_PER_TRIAL
    ideal = steps * args.latency / args.concurrency
    lane_run_ms = wall / n * args.concurrency * 1000
    step_wall_ms = lane_run_ms / CALLS_PER_TRIAL
    engine_ms = engine_step_ms()
    phases, reported = breakdown(runs)
    lanes = runs.exclude(enqueued_at=None).count()
    load = os.getloadavg()
    if args.pool == "threads":
        shape = f"threads pool: {len(workers)} worker processes, {args.concurrency} threads in all"
    else:
        shape = f"prefork pool: {args.workers or args.concurrency} processes"
    print(f"runs bench: N={n} task-trials, L={args.latency:.3f}s, C={args.concurrency}, {LABEL}")
    print(f"  {shape}; lanes up to RUN_LANE_MAX_S; load average {load[0]:.2f} {load[1]:.2f}")
    print(
        f"  passed runs         {graded}/{n}   model calls {calls} "
        f"(expected {steps}), peak in flight {server.max_in_flight} (limit {args.concurrency})"
    )
    print(f"  wall time           {wall:8.2f} s")
    print(f"  ideal N*calls*L/C   {ideal:8.2f} s")
    print(f"  ratio               {wall / ideal:8.2f}x")
    # What the CPU allows: all the CPU seconds spent (workers, and this process with the
    # LLM server) over the machine's cores, as if nobody else used them.
    n_cores = cores()
    cpu_limit = (worker_cpu + own_cpu) / n_cores
    print(f"  CPU limit           {cpu_limit:8.2f} s   ({worker_cpu + own_cpu:.1f} CPU-s / "
          f"{n_cores} cores); wall / the larger of the two "
          f"{wall / max(ideal, cpu_limit):.2f}x")  # fmt: skip
    if busy:
        # The whole machine over the same time: the database server, the broker and other
        # sessions' processes take cores too, which the limit above leaves out.
        rest = max(0.0, busy - worker_cpu - own_cpu)
        print(f"  machine busy        {busy / wall:8.2f} of {n_cores} cores   (workers "
              f"{worker_cpu / wall:.2f}, bench + LLM server {own_cpu / wall:.2f}, the rest — "
              f"database, broker, other sessions — {rest / wall:.2f})")  # fmt: skip
    print(f"  wall per step/lane  {step_wall_ms:8.2f} ms   (L = {args.latency * 1000:.0f} ms)")
    print(f"  worker CPU per step {worker_cpu / steps * 1000:8.2f} ms   "
          f"({worker_cpu:.1f} CPU-s in all; the bench process, LLM server included, "
          f"{own_cpu:.1f} CPU-s)")  # fmt: skip
    print(f"  engine per step     {engine_ms:8.3f} ms   "
          f"(share of a step: {engine_ms / step_wall_ms * 100:.2f}%)")  # fmt: skip
    print(f"  one lane, per run ({reported} runs reported, {lanes} sent; lane time per run "
          f"{lane_run_ms:.0f} ms = {CALLS_PER_TRIAL} steps):")  # fmt: skip
    accounted = 0.0
    for name, label in PHASES:
        ms = phases.get(name, 0.0) * 1000
        if name != "heartbeat":
            accounted += ms
        print(f"    {label:<52} {ms:8.2f} ms  {ms / lane_run_ms * 100:5.1f}%")
    rest = lane_run_ms - accounted
    print(f"    {'other (lane idle: batch start/end, polling)':<52} {rest:8.2f} ms  "
          f"{rest / lane_run_ms * 100:5.1f}%")  # fmt: skip
    print(f"  files in {TMP}")


if __name__ == "__main__":
    main()
