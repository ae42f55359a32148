"""Synthesis benchmark: the pipeline's overhead above an endpoint's own limit.

    python bench/synthesis.py [--n 100] [--latency 0.2] [--capacity 4] [--workers 5]
                              [--template-n 30] [--baseline PATH]

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

That limit assumes the cores are the job's alone. On a shared machine the bench also reads
/proc/stat: the cores the other processes kept busy while the job ran, the cores left idle
(idle while the job was unfinished = the pipeline's own waiting), and the **CPU limit under
load** — the job's CPU (worker tree, plus this process: the loopback server and the poller)
over the cores the others left — with the wall time's ratio to it.

``--baseline PATH`` (an older checkout, e.g. ``git worktree add /tmp/base <commit>``) runs
the same job first with a worker running that checkout's code ("before"), then this tree's
("after"), in the same run against the same database, each in a project of its own.

Then the offline template generator: environments per second for generation alone and
for generation + validation (what a template slot does before saving), in process.

Nothing asserts on time. On 2 cores, ``--n 30`` finishes in about a minute.
"""

from __future__ import annotations

import argparse
import copy
import json
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

from bench.machine import cores, machine_busy  # noqa: E402

CAPABILITIES = ["clarify-before-acting", "resolve-conflicts"]


def setup_project() -> None:
    from django.contrib.auth import get_user_model

    call_command("migrate", verbosity=0)
    get_user_model().objects.create_user("bench", password="bench-pass-123")


def start_worker(concurrency: int, log: Path, tree: Path = ROOT) -> subprocess.Popen:
    """A Celery worker on the ``llm`` queue running the code of ``tree`` (this checkout, or
    an older one for a before/after in the same run: same database, same broker)."""
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(tree), str(tree / "engine")])
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
        cwd=tree,
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

    capabilities = list(Capability.objects.filter(project=endpoint.project, slug__in=CAPABILITIES))
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


def bench_llm(args, tree: Path, label: str, index: int) -> dict:
    """One synthesis job of N environments through a worker running ``tree``'s code, in a
    project of its own (so that runs do not see each other's near-duplicates)."""
    from django.contrib.auth import get_user_model

    from apps.capabilities.models import Capability
    from apps.capabilities.services import capability_catalogue_seed
    from apps.core.models import ACTIVE_JOB_STATUSES, Job
    from apps.llm.services import endpoint_create
    from apps.synthesis.generators import generate_environment
    from apps.synthesis.models import SynthesisAttempt, SynthesisSlot
    from apps.synthesis.selectors import synthesis_summary
    from apps.synthesis.services import synthesis_start
    from apps.workspace.services import project_start
    from tests.llm_server import LoopbackLLMServer, Reply

    user = get_user_model().objects.get(username="bench")
    project = project_start(
        name=f"Bench {index}", slug=f"bench-{index}", description="", creator=user
    )
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
    worker = start_worker(args.workers, TMP / f"worker-{index}.log", tree)
    try:
        wait_ready(server, endpoint)
        server.reset()
        capabilities = list(Capability.objects.filter(project=project, slug__in=CAPABILITIES))
        ours_before = cpu_seconds(os.getpid())  # this process (server, poller) + the worker's
        worker_before = cpu_seconds(worker.pid)
        busy_before = machine_busy()
        load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
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
        while Job.objects.get(pk=synthesis.job_id).status in ACTIVE_JOB_STATUSES:
            time.sleep(0.05)
        wall = time.monotonic() - started
        busy = machine_busy() - busy_before
        ours_after = cpu_seconds(os.getpid())
        worker_after = cpu_seconds(worker.pid)
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
    validation_ms = list(
        SynthesisAttempt.objects.filter(slot__synthesis=synthesis).values_list(
            "validation_ms", flat=True
        )
    )
    worker_cpu = sum(t - worker_before.get(pid, 0.0) for pid, t in worker_after.items())
    # the worker's main process (broker polling, dispatch) apart from its pool processes
    main_cpu = worker_after.get(worker.pid, 0.0) - worker_before.get(worker.pid, 0.0)
    ours = sum(t - ours_before.get(pid, 0.0) for pid, t in ours_after.items())
    n_cores = cores()
    cpu_limit = worker_cpu / n_cores
    validation_cpu_ms = validation_cpu(tree, spec) * 1000
    # What the other sessions on this machine used meanwhile, and what was left to us: the
    # CPU limit under load is our CPU (worker, server, poller) over the cores they left.
    others = max(0.0, busy - ours) if busy else float("nan")
    left = n_cores - others / wall
    loaded_limit = ours / left if left > 0 else float("inf")
    idle = max(0.0, n_cores * wall - busy) if busy else float("nan")
    return {
        "label": label,
        "tree": str(tree),
        "summary": summary["message"],
        "requests": calls,
        "calls_per_env": calls_per_env,
        "attempts": attempts,
        "max_in_flight": server.max_in_flight,
        "wall": wall,
        "ideal": ideal,
        "cpu_per_env": worker_cpu / args.n,
        "cpu_limit": cpu_limit,
        "main_per_env": main_cpu / args.n,
        "validation_cpu_ms": validation_cpu_ms,
        "ratio": wall / max(ideal, cpu_limit),
        "ours_per_env": ours / args.n,
        "others_cores": others / wall,
        "idle_cores": idle / wall,
        "loaded_limit": loaded_limit,
        "loaded_ratio": wall / max(ideal, loaded_limit),
        "validation_ms": sum(validation_ms) / max(1, len(validation_ms)),
        "throughput": args.n / wall,
        "load": (load_before, os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")),
        "cores": n_cores,
    }


_VALIDATE = r"""
import json, sys, time
tree = sys.argv[1]
sys.path[:0] = [tree, tree + "/engine"]
from coworkenv_engine.validation import validate_spec
doc = json.loads(sys.stdin.read())
validate_spec(doc)
best = float("inf")
for _ in range(3):
    started = time.process_time()
    validate_spec(doc)
    best = min(best, time.process_time() - started)
print(best)
"""


def validation_cpu(tree: Path, document: dict) -> float:
    """CPU seconds ``tree``'s validator takes for the answer (best of 3, in a fresh process):
    the part of the worker's CPU per environment that is validation."""
    done = subprocess.run(
        [sys.executable, "-c", _VALIDATE, str(tree)],
        input=json.dumps(document),
        capture_output=True,
        text=True,
        cwd=tree,
        check=True,
    )
    return float(done.stdout.split()[-1])


ROWS = [
    ("outcome", "summary", "{}"),
    ("requests (per environment)", "calls_per_env", "{:.2f}"),
    ("max requests in flight", "max_in_flight", "{}"),
    ("wall time", "wall", "{:.2f} s"),
    ("ideal N*calls*L/C", "ideal", "{:.2f} s"),
    ("CPU-s per environment (worker)", "cpu_per_env", "{:.3f}"),
    ("  of which the worker's main process", "main_per_env", "{:.3f}"),
    ("  of which validation (CPU, in process)", "validation_cpu_ms", "{:.0f} ms"),
    ("CPU limit (worker CPU / cores)", "cpu_limit", "{:.2f} s"),
    ("ratio wall / max(ideal, CPU limit)", "ratio", "{:.2f}"),
    ("CPU-s per env (worker+server+poller)", "ours_per_env", "{:.3f}"),
    ("cores busy with other sessions", "others_cores", "{:.2f}"),
    ("cores idle", "idle_cores", "{:.2f}"),
    ("CPU limit under load", "loaded_limit", "{:.2f} s"),
    ("ratio wall / max(ideal, limit under load)", "loaded_ratio", "{:.2f}"),
    ("validation per draft (wall, in worker)", "validation_ms", "{:.0f} ms"),
    ("throughput", "throughput", "{:.2f} env/s"),
    ("load average (start, end; 1 min)", "load", "{0[0]:.2f}, {0[1]:.2f}"),
]


def print_llm(args, runs: list[dict]) -> None:
    print()
    print(
        f"LLM path: N={args.n} environments, L={args.latency * 1000:.0f} ms, C={args.capacity}, "
        f"{args.workers} worker processes, {runs[0]['cores']} cores"
    )
    for run in runs:
        print(f"  {run['label']}: worker code from {run['tree']}")
    print(f"  {'':44}" + "".join(f"{run['label']:>18}" for run in runs))
    for title, key, fmt in ROWS:
        cells = [fmt.format(run[key]) for run in runs]
        if key == "summary":
            for run, cell in zip(runs, cells, strict=True):
                print(f"  {title + ' (' + run['label'] + ')':44}{cell}")
            continue
        print(f"  {title:44}" + "".join(f"{c:>18}" for c in cells))
    if len(runs) > 1:
        before, after = runs[0], runs[-1]
        print(
            f"  after/before: wall {after['wall'] / before['wall']:.2f}, CPU-s per environment "
            f"{after['cpu_per_env'] / before['cpu_per_env']:.2f}"
        )
    print(
        "  (the CPU limit assumes the cores are ours alone; under load it counts the cores the "
        "other sessions left, from /proc/stat. Idle cores while the job ran are the "
        "pipeline's own waiting.)"
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
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="an older checkout: its worker runs the same job first ('before'), same run",
    )
    args = parser.parse_args()
    args.workers = args.workers or args.capacity + 1
    print(f"Working directory: {TMP}")
    setup_project()
    runs = []
    if args.baseline is not None:
        runs.append(bench_llm(args, args.baseline.resolve(), "before", 1))
    runs.append(bench_llm(args, ROOT, "after" if runs else "this tree", 2))
    print_llm(args, runs)
    bench_template(args)


if __name__ == "__main__":
    main()
