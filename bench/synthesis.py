"""Synthesis benchmark: the pipeline's overhead above an endpoint's own limit.

    python bench/synthesis.py [--n 100] [--latency 0.2] [--capacity 4] [--workers 5]
                              [--template-n 30]

Everything runs in a throw-away directory (SQLite database and filesystem broker), so no
real data is touched. A loopback OpenAI-compatible server answers every request after a
fixed latency L and serves at most C requests at a time (more wait in its queue, like
vLLM); the model endpoint's concurrency limit is also C. One synthesis job of N
environments goes through the real path: the job's N slot tasks on the ``llm`` queue, a
Celery worker subprocess (``--workers`` processes), the real ``openai`` client, validation
of every draft, the environment saved with its near-duplicate sketch. Every answer is a
valid spec, so each environment costs exactly one call, and the ideal wall time is
``N * 1 * L / C``. The bench prints the wall time (from start to the job's end), the ideal,
the CPU limit — the worker processes' CPU seconds per environment (validation, import,
database writes; measured on the worker's process tree) x N / the cores this machine has —
and the ratio of the wall time to the larger of the two: on a small machine validation, not
the endpoint, is the real bottleneck (worker start-up is excluded by waiting for the worker
first).

Then the offline template generator: environments per second for generation alone and
for generation + validation (what a template slot does before saving), in process.

Nothing asserts on time. On 2 cores, ``--n 30`` finishes in about a minute.
"""

from __future__ import annotations

import argparse
import copy
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TMP = Path(tempfile.mkdtemp(prefix="coworkenv-bench-synthesis-"))
os.environ["COWORKENV_VAR_DIR"] = str(TMP)
os.environ["DATABASE_URL"] = f"sqlite://{TMP / 'bench.sqlite3'}"
os.environ.pop("CELERY_BROKER_URL", None)
os.environ["DJANGO_SETTINGS_MODULE"] = "coworkenv_web.settings"
os.environ["BENCH_LLM_API_KEY"] = "sk-bench"

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402

CAPABILITIES = ["clarify-before-acting", "resolve-conflicts"]


def setup_project():
    from django.contrib.auth import get_user_model

    from apps.workspace.services import project_start

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user("bench", password="bench-pass-123")
    return project_start(name="Bench", slug="bench", description="", creator=user), user


def start_worker(concurrency: int, log: Path) -> subprocess.Popen:
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "coworkenv_web",
            "worker",
            "-Q",
            "llm",
            "--concurrency",
            str(concurrency),
            "--loglevel",
            "WARNING",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ],
        cwd=ROOT,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def wait_ready(server, endpoint, timeout=60.0) -> None:
    """The worker is up once it has answered a one-environment warm-up job."""
    from apps.capabilities.models import Capability
    from apps.core.models import ACTIVE_JOB_STATUSES, Job
    from apps.synthesis.services import synthesis_start

    capabilities = list(Capability.objects.filter(slug__in=CAPABILITIES))
    warm = synthesis_start(
        project=endpoint.project,
        user=None,
        capabilities=capabilities,
        count=1,
        generator="llm",
        endpoint=endpoint,
        tasks_per_environment=2,
        seed=0,
    )
    deadline = time.monotonic() + timeout
    while Job.objects.get(pk=warm.job_id).status in ACTIVE_JOB_STATUSES:
        if time.monotonic() > deadline:
            raise SystemExit("The worker did not start; see its log in " + str(TMP))
        time.sleep(0.2)


def cpu_seconds(pid: int) -> dict[int, float]:
    """CPU seconds (user + system) of a process and each of its descendants, by pid, from
    /proc (Linux; empty elsewhere)."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    stats: dict[int, tuple[int, float]] = {}  # pid -> (parent, CPU seconds)
    for entry in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = entry.read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()  # after "pid (comm) "
        stats[int(entry.parent.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick)
    tree, frontier = {pid}, [pid]
    while frontier:
        parent = frontier.pop()
        for child, (ppid, _) in stats.items():
            if ppid == parent and child not in tree:
                tree.add(child)
                frontier.append(child)
    return {p: stats[p][1] for p in tree if p in stats}


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def bench_llm(args) -> None:
    from apps.capabilities.models import Capability
    from apps.capabilities.services import capability_catalogue_seed
    from apps.core.models import ACTIVE_JOB_STATUSES, Job
    from apps.llm.services import endpoint_create
    from apps.synthesis.generators import generate_environment
    from apps.synthesis.models import SynthesisSlot
    from apps.synthesis.selectors import synthesis_summary
    from apps.synthesis.services import synthesis_start
    from tests.llm_server import LoopbackLLMServer, Reply

    project, user = setup_project()
    capability_catalogue_seed(project=project)
    spec = generate_environment(seed=1, capabilities=CAPABILITIES, tasks_per_environment=2)
    server = LoopbackLLMServer(
        latency=args.latency,
        capacity=args.capacity,
        responder=lambda request: Reply.json(copy.deepcopy(spec)),
    ).start()
    endpoint = endpoint_create(
        project=project,
        created_by=user,
        name="loopback",
        base_url=server.base_url,
        model="bench",
        api_key_env="BENCH_LLM_API_KEY",
        request_timeout_s=60,
        max_concurrency=args.capacity,
    )
    worker = start_worker(args.workers, TMP / "worker.log")
    try:
        wait_ready(server, endpoint)
        server.reset()
        capabilities = list(Capability.objects.filter(project=project, slug__in=CAPABILITIES))
        cpu_before = cpu_seconds(worker.pid)
        started = time.monotonic()
        synthesis = synthesis_start(
            project=project,
            user=user,
            capabilities=capabilities,
            count=args.n,
            generator="llm",
            endpoint=endpoint,
            tasks_per_environment=2,
            seed=1,
        )
        last = -1
        while Job.objects.get(pk=synthesis.job_id).status in ACTIVE_JOB_STATUSES:
            done = Job.objects.get(pk=synthesis.job_id).progress_done
            if done != last and done % 10 == 0:
                print(f"  {done}/{args.n} after {time.monotonic() - started:.1f} s", flush=True)
                last = done
            time.sleep(0.05)
        wall = time.monotonic() - started
        cpu_after = cpu_seconds(worker.pid)
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        server.stop()

    summary = synthesis_summary(synthesis=synthesis)
    calls = len(server.chat_requests())
    calls_per_env = calls / args.n
    ideal = args.n * calls_per_env * args.latency / args.capacity
    attempts = sum(
        SynthesisSlot.objects.filter(synthesis=synthesis).values_list("attempts_count", flat=True)
    )
    from apps.synthesis.models import SynthesisAttempt

    validation_ms = list(
        SynthesisAttempt.objects.filter(slot__synthesis=synthesis).values_list(
            "validation_ms", flat=True
        )
    )
    worker_cpu = sum(t - cpu_before.get(pid, 0.0) for pid, t in cpu_after.items())
    cpu_per_env = worker_cpu / args.n
    n_cores = cores()
    cpu_limit = cpu_per_env * args.n / n_cores
    bound = max(ideal, cpu_limit)
    print()
    print(
        f"LLM path: N={args.n} environments, L={args.latency * 1000:.0f} ms, C={args.capacity}, "
        f"{args.workers} worker processes"
    )
    print(f"  outcome              {summary['message']}")
    print(
        f"  requests             {calls} ({calls_per_env:.2f} per environment), "
        f"{attempts} attempts, max in flight {server.max_in_flight}"
    )
    print(f"  wall time            {wall:8.2f} s")
    print(f"  ideal N*calls*L/C    {ideal:8.2f} s")
    print(
        f"  CPU limit            {cpu_limit:8.2f} s   ({cpu_per_env:.3f} CPU-s per environment"
        f" x {args.n} / {n_cores} cores; worker processes, all of their CPU)"
    )
    print(
        f"  validation           {sum(validation_ms) / max(1, len(validation_ms)):8.0f} ms per "
        f"draft (wall, in the worker; {len(validation_ms)} drafts)"
    )
    print(f"  ratio wall / ideal   {wall / ideal:8.2f}")
    print(
        f"  ratio wall / max(ideal, CPU limit) {wall / bound:8.2f}   (the bottleneck: "
        f"{'the endpoint' if ideal >= cpu_limit else 'CPU'})"
    )
    print(f"  throughput           {args.n / wall:8.2f} environments/s")
    if hasattr(os, "getloadavg"):  # other processes on the cores stretch the wall time
        print(
            f"  load average         {os.getloadavg()[0]:8.2f} (1 min, at the end; {n_cores} cores)"
        )


def bench_template(args) -> None:
    from apps.synthesis.generators import generate_environment
    from coworkenv_engine.validation import validate_spec

    started = time.perf_counter()
    documents = [
        generate_environment(seed=seed, capabilities=CAPABILITIES, tasks_per_environment=3)
        for seed in range(args.template_n)
    ]
    generated = time.perf_counter() - started
    started = time.perf_counter()
    valid = sum(1 for document in documents if validate_spec(document).valid)
    validated = time.perf_counter() - started
    print()
    print(f"Template generator: {args.template_n} environments of 3 tasks, in process")
    print(f"  generation only      {args.template_n / generated:8.1f} environments/s")
    print(
        f"  + validation         {args.template_n / (generated + validated):8.1f} "
        f"environments/s ({valid}/{args.template_n} valid)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100, help="environments (default 100)")
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per answer")
    parser.add_argument("--capacity", type=int, default=4, help="concurrent requests")
    parser.add_argument("--workers", type=int, default=None, help="worker processes (C+1)")
    parser.add_argument("--template-n", type=int, default=30)
    args = parser.parse_args()
    args.workers = args.workers or args.capacity + 1
    print(f"Working directory: {TMP}")
    bench_llm(args)
    bench_template(args)


if __name__ == "__main__":
    main()
