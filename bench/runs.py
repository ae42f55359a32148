"""Runs benchmark: a teacher batch through the real Celery path, against the endpoint's limit.

    python bench/runs.py [--n 100] [--latency 0.2] [--concurrency 4] [--workers 4]

Everything runs in a throw-away directory (SQLite database and filesystem broker). A
loopback OpenAI-compatible server plays a fixed teacher script after a fixed latency L per
answer, serving at most C requests at a time; the model endpoint's limit and the batch's
concurrency are also C. Each trial of the task costs exactly 3 model calls (list the
calendar, send the email, reply), so the ideal wall time of N task-trials is
``N * 3 * L / C``. The bench prints the wall time (batch created → job finished; worker
start-up is excluded by a warm-up batch), the ideal, their ratio (the run pipeline's
overhead above the endpoint's own limit: claiming, the engine, grading, storing the run,
progress, dispatch), and the engine's share of a step: the same episode replayed in process
with a scripted policy (no HTTP, no database), per step, against the wall time per step of
one concurrency lane.

Nothing asserts on time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TMP = Path(tempfile.mkdtemp(prefix="coworkenv-bench-runs-"))
os.environ["COWORKENV_VAR_DIR"] = str(TMP)
os.environ["DATABASE_URL"] = f"sqlite://{TMP / 'bench.sqlite3'}"
os.environ.pop("CELERY_BROKER_URL", None)
os.environ["DJANGO_SETTINGS_MODULE"] = "coworkenv_web.settings"
os.environ["BENCH_LLM_API_KEY"] = "sk-bench"

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402

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
                "turns": [{"message": "Check my Thursday, then tell Dana 16:00 works."}],
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
                            "query": "length(email.sent[?to == 'dana@acme.test'])",
                            "op": ">=",
                            "value": 1,
                        },
                    },
                    {
                        "id": "looked",
                        "category": "completion",
                        "check": {"kind": "tool_call", "tool": "list_events"},
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

    from apps.environments.models import Environment, EnvironmentStatus
    from apps.environments.services import environment_import
    from apps.llm.services import endpoint_create
    from apps.workspace.services import project_start

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user("bench", password="bench-pass-123")
    project = project_start(name="Bench", slug="bench", description="", creator=user)
    envs = [
        environment_import(project=project, spec=spec(i), user=user) for i in range(environments)
    ]
    Environment.objects.filter(project=project).update(status=EnvironmentStatus.VALID)
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


def start_worker(concurrency: int, log: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "coworkenv_web", "worker", "-Q", "llm",
         "--concurrency", str(concurrency), "--loglevel", "WARNING", "--without-gossip",
         "--without-mingle", "--without-heartbeat"],
        cwd=ROOT, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100, help="Task-trials (multiple of 20).")
    parser.add_argument("--latency", type=float, default=0.2, help="L: seconds per answer.")
    parser.add_argument("--concurrency", type=int, default=4, help="C: endpoint limit.")
    parser.add_argument("--workers", type=int, default=0, help="Worker processes (default C).")
    args = parser.parse_args()

    from apps.runs.models import Run, RunStatus
    from tests.llm_server import LoopbackLLMServer

    trials = 20
    environments = max(1, args.n // trials)
    n = environments * trials
    server = LoopbackLLMServer(latency=args.latency, capacity=args.concurrency, responder=teacher)
    server.start()
    worker = None
    try:
        project, user, envs, endpoint = setup(server, args.concurrency, environments)
        worker = start_worker(args.workers or args.concurrency, TMP / "worker.log")
        warm = batch(project, user, endpoint, envs[:1], 1, 1)
        wait(warm.job_id, 120)
        server.reset()
        server.responder = teacher

        started = time.monotonic()
        timed = batch(project, user, endpoint, envs, trials, args.concurrency)
        wait(timed.job_id, 600)
        wall = time.monotonic() - started
    finally:
        if worker is not None:
            worker.terminate()
            worker.wait(timeout=30)
        server.stop()

    runs = Run.objects.filter(batch=timed)
    graded = runs.filter(status=RunStatus.SUCCEEDED, passed=True).count()
    calls = len(server.chat_requests())
    ideal = n * CALLS_PER_TRIAL * args.latency / args.concurrency
    step_wall_ms = wall / (n * CALLS_PER_TRIAL) * args.concurrency * 1000
    engine_ms = engine_step_ms()
    print(
        f"runs bench: N={n} task-trials, L={args.latency:.3f}s, C={args.concurrency}, "
        f"{args.workers or args.concurrency} worker processes, SQLite + filesystem broker"
    )
    print(
        f"  passed runs         {graded}/{n}   model calls {calls} "
        f"(expected {n * CALLS_PER_TRIAL}), peak in flight {server.max_in_flight}"
    )
    print(f"  wall time           {wall:8.2f} s")
    print(f"  ideal N*calls*L/C   {ideal:8.2f} s")
    print(f"  ratio               {wall / ideal:8.2f}x")
    print(f"  wall per step/lane  {step_wall_ms:8.2f} ms   (L = {args.latency * 1000:.0f} ms)")
    print(f"  engine per step     {engine_ms:8.3f} ms   "
          f"(share of a step: {engine_ms / step_wall_ms * 100:.2f}%)")  # fmt: skip
    print(f"  files in {TMP}")


if __name__ == "__main__":
    main()
