"""Dataset export benchmark: build a version over N synthetic approved demonstrations and
export it in every format, against the `datasets` library's ``to_json`` on the same rows.

    python bench/export.py                 # --rows 20000 (a few minutes on 2 cores)
    python bench/export.py --rows 100000   # the issue's figure (about 5x longer)
    python bench/export.py --small 10000 --rows 100000 --database-url postgres://…

What it does, in a throw-away directory (SQLite unless ``--database-url``):

1. writes N demonstrations straight to the database with ``bulk_create``: deterministic
   synthetic agent transcripts (system, user, 2 to 6 tool steps with JSON arguments and
   results, a final reply; some parallel calls, some excluded turns), 40 environments,
   3% eval-task rows, 1% exact duplicates; the first ``--small`` of them score 1.0, the rest
   0.8, so one filter (min score 0.9) gives a ``--small``-row version and none gives N;
2. builds both versions with the real build job (rows, near-duplicates, grouped split, checksum,
   figures, all exports linted and cached, the card) and times it;
3. for each format, exports each version again (``exports_write``, both splits, linting
   included) and, on the big version, writes the same rows with ``datasets``
   (``Dataset.from_list(rows).to_json(path)``).

Every measured step runs in a forked child process, so its peak memory is its own: the
figure is the child's peak resident set size (``getrusage``) minus its size when it started,
i.e. what the step added. Exports stream, so their peak
should stay flat from ``--small`` to N rows; ``datasets`` materialises the rows (and an
Arrow table) in memory, so its peak grows with N. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
parser.add_argument("--rows", type=int, default=20_000, help="demonstrations (default 20000)")
parser.add_argument("--small", type=int, default=None, help="the small version (default N/10)")
parser.add_argument("--database-url", default="", help="default: a fresh SQLite file")
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--skip-datasets", action="store_true", help="no `datasets` baseline")
ARGS = parser.parse_args()

TMP = Path(tempfile.mkdtemp(prefix="coworkenv-bench-export-"))
os.environ["COWORKENV_VAR_DIR"] = str(TMP)
os.environ["MEDIA_ROOT"] = str(TMP / "media")
os.environ["DATABASE_URL"] = ARGS.database_url or f"sqlite://{TMP / 'bench.sqlite3'}"
os.environ.pop("CELERY_BROKER_URL", None)
os.environ["DJANGO_SETTINGS_MODULE"] = "coworkenv_web.settings"
os.environ.setdefault("HF_DATASETS_CACHE", str(TMP / "hf-cache"))
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection, connections  # noqa: E402

FORMATS = ("openai", "trl", "sharegpt")
ENVIRONMENTS = 40

# --- synthetic data --------------------------------------------------------------------

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {key: {"type": kind} for key, kind in params.items()},
                "required": list(params)[:1],
            },
        },
    }
    for name, description, params in [
        ("search_email", "Search the inbox.", {"query": "string", "limit": "integer"}),
        ("send_email", "Send an email.", {"to": "string", "subject": "string", "body": "string"}),
        ("list_events", "List calendar events.", {"day": "string"}),
        (
            "create_event",
            "Create an event.",
            {"title": "string", "start": "string", "end": "string"},
        ),
        ("lookup_customer", "Find a CRM customer.", {"name": "string"}),
        ("update_ticket", "Update a ticket.", {"ticket_id": "string", "status": "string"}),
    ]
]
WORDS = [
    "budget",
    "review",
    "invoice",
    "quarterly",
    "Dana",
    "meeting",
    "refund",
    "platinum",
    "outage",
    "calendar",
    "Thursday",
    "approval",
    "policy",
    "customer",
    "ticket",
    "escalate",
    "summary",
    "draft",
    "confirm",
    "conflict",
    "schedule",
]


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def synthetic_transcript(index: int, seed: int = 0) -> list[dict]:
    """A deterministic agent transcript (about 1.5 to 4 KB of JSON)."""
    rng = random.Random(seed * 1_000_003 + index)
    messages = [
        {
            "role": "system",
            "content": f"You are the assistant of team {index % 97}. " + _text(rng, 25),
        },
        {"role": "user", "content": _text(rng, rng.randint(12, 40)) + "?"},
    ]
    call_no = 0
    for _step in range(rng.randint(2, 6)):
        calls = []
        for _ in range(2 if rng.random() < 0.1 else 1):
            call_no += 1
            tool = rng.choice(TOOLS)["function"]
            arguments = {
                key: (_text(rng, 4) if spec["type"] == "string" else rng.randint(1, 20))
                for key, spec in tool["parameters"]["properties"].items()
                if rng.random() < 0.8 or key in tool["parameters"]["required"]
            }
            calls.append(
                {
                    "id": f"call_{call_no}",
                    "type": "function",
                    "function": {"name": tool["name"], "arguments": json.dumps(arguments)},
                }
            )
        assistant = {"role": "assistant", "content": None, "tool_calls": calls}
        if rng.random() < 0.05:
            assistant["weight"] = 0
        messages.append(assistant)
        for call in calls:
            result = {"results": [{"id": f"r{rng.randint(1, 999)}", "text": _text(rng, 20)}]}
            messages.append(
                {"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)}
            )
    messages.append({"role": "assistant", "content": _text(rng, rng.randint(15, 60)) + "."})
    return messages


def seed_database(n: int, small: int) -> tuple:
    from django.contrib.auth import get_user_model

    from apps.accounts.models import Membership, Project, Role
    from apps.curation.models import Demonstration, DemonstrationVersion
    from apps.datasets.services import dataset_create

    user = get_user_model().objects.create_user("bench", password="bench-pass-123")
    project = Project.objects.create(name="Bench", slug="bench")
    Membership.objects.create(project=project, user=user, role=Role.ADMIN)
    batch = 2000
    for start in range(0, n, batch):
        demos = []
        transcripts = []
        for i in range(start, min(n, start + batch)):
            duplicate_of = i - 1 if i % 100 == 99 else i  # 1% exact duplicates
            transcripts.append(synthetic_transcript(duplicate_of, ARGS.seed))
            demos.append(
                Demonstration(
                    project=project,
                    run_ref=i,
                    task_key=f"task-{i % 250}",
                    environment_name=f"Bench environment {i % ENVIRONMENTS}",
                    split="eval" if i % 33 == 0 else "train",
                    capability_slugs=[f"capability-{i % 7}"]
                    + ([f"capability-{i % 3 + 7}"] if i % 2 else []),
                    model_name="teacher-large" if i % 4 else "teacher-small",
                    policy="endpoint",
                    score=1.0 if i < small else 0.8,
                    status="approved",
                )
            )
        Demonstration.objects.bulk_create(demos)
        DemonstrationVersion.objects.bulk_create(
            [
                DemonstrationVersion(
                    demonstration=demo,
                    number=1,
                    transcript=transcript,
                    tools=TOOLS,
                    score=demo.score,
                    passed=True,
                    environment_revision=1,
                    spec_hash=f"{demo.run_ref % ENVIRONMENTS:064x}",
                )
                for demo, transcript in zip(demos, transcripts, strict=True)
            ]
        )
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE curation_demonstration SET current_version_id = (SELECT v.id FROM "
            "curation_demonstrationversion v WHERE v.demonstration_id = curation_demonstration.id)"
        )
    dataset = dataset_create(project=project, name="Bench dataset", user=user)
    return user, dataset


# --- measuring in a child process -----------------------------------------------------


def _rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _quiet_enqueue() -> None:
    """The bench runs each job in process: nothing is sent to a broker."""
    from apps.datasets import tasks

    tasks.build_dataset_version_task.delay = lambda *args, **kwargs: None
    tasks.verify_dataset_version_task.delay = lambda *args, **kwargs: None


def measured(step):
    """Run ``step()`` (returning a dict) in a forked child; add its seconds and the peak
    resident memory it added (MiB: the child's ``ru_maxrss`` minus its size at the start)."""
    connections.close_all()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(read)
        status = 0
        try:
            connections.close_all()
            _quiet_enqueue()
            start_rss = _rss_kb()
            started = time.perf_counter()
            result = step()
            result["seconds"] = time.perf_counter() - started
            result["start_rss_kb"] = start_rss
            connections.close_all()
        except BaseException as exc:  # reported to the parent
            result = {"error": repr(exc)}
            status = 1
        os.write(write, json.dumps(result).encode())
        os.close(write)
        os._exit(status)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    _, _, usage = os.wait4(pid, 0)
    result = json.loads(b"".join(chunks) or b"{}")
    if "error" in result:
        raise RuntimeError(result["error"])
    result["rss_mib"] = max(0, usage.ru_maxrss - result.pop("start_rss_kb")) / 1024
    return result


def build_step(dataset_id: int, user_id: int, min_score):
    def step():
        from django.contrib.auth import get_user_model

        from apps.datasets.models import Dataset
        from apps.datasets.services import (
            VersionFilter,
            dataset_version_build_job,
            dataset_version_create,
        )

        version = dataset_version_create(
            dataset=Dataset.objects.get(pk=dataset_id),
            user=get_user_model().objects.get(pk=user_id),
            filters=VersionFilter(min_score=min_score),
            seed=ARGS.seed,
            validation_fraction=0.1,
        )
        dataset_version_build_job(version.job_id)
        version.refresh_from_db()
        return {"version": version.pk, "status": version.status, "rows": version.rows_total}

    return step


def export_step(version_id: int, fmt: str):
    def step():
        from apps.datasets.models import DatasetVersion
        from apps.datasets.services import exports_write

        version = DatasetVersion.objects.select_related("dataset").get(pk=version_id)
        rows = size = 0
        statuses = []
        for split in ("train", "validation"):
            for export in exports_write(version=version, split=split, formats=(fmt,)):
                rows += export.rows
                size += export.size
                statuses.append(export.status)
        return {"rows": rows, "bytes": size, "statuses": statuses}

    return step


def datasets_step(version_id: int, fmt: str):
    def step():
        import datasets

        from apps.datasets.formats import FORMATS as ROWS
        from apps.datasets.formats import normalize_messages, normalize_tools
        from apps.datasets.models import DatasetVersion
        from apps.datasets.services.exports import row_source

        datasets.disable_progress_bars()
        version = DatasetVersion.objects.select_related("dataset").get(pk=version_id)
        rows = []
        for split in ("train", "validation"):
            for _pk, transcript, tools in row_source(version, split):
                rows.append(
                    ROWS[fmt]["row"](normalize_messages(transcript), normalize_tools(tools))
                )
        table = datasets.Dataset.from_list(rows, on_mixed_types="use_json")
        out = TMP / f"hf-{fmt}.jsonl"
        table.to_json(str(out), lines=True, force_ascii=False)
        return {"rows": len(rows), "bytes": out.stat().st_size}

    return step


def _line(label: str, r: dict) -> str:
    return (
        f"  {label:17} {r['rows']:>7} {r['bytes'] / 2**20:8.1f} {r['seconds']:7.1f} "
        f"{r['rows'] / r['seconds']:8.0f} {r['rss_mib']:9.1f}"
    )


def main() -> None:
    n = ARGS.rows
    small = ARGS.small or max(1, n // 10)
    print(f"bench/export.py: --rows {n} --small {small} --seed {ARGS.seed}")
    print(f"database: {connection.vendor} ({os.environ['DATABASE_URL'].split('@')[-1]})")
    print(f"work dir: {TMP}  (cpus: {os.cpu_count()})")
    call_command("migrate", verbosity=0)
    started = time.perf_counter()
    user, dataset = seed_database(n, small)
    print(f"seeded {n} demonstrations in {time.perf_counter() - started:.1f} s")

    versions = {}
    print("\nbuild job (rows, split, checksum, figures, 3 formats x 2 splits linted, card)")
    for label, min_score in (("small", 0.9), ("full", None)):
        result = measured(build_step(dataset.pk, user.pk, min_score))
        versions[label] = result
        print(
            f"  {label:5} {result['rows']:>7} rows  {result['seconds']:7.1f} s  "
            f"{result['rows'] / result['seconds']:8.0f} rows/s  peak +{result['rss_mib']:.0f} MiB "
            f"[{result['status']}]"
        )

    print("\nexport per format (both splits, each line linted), streamed from the database")
    header = f"  {'format':17} {'rows':>7} {'file MiB':>8} {'s':>7} {'rows/s':>8} {'peak MiB':>9}"
    print(header)
    ours = {}
    for fmt in FORMATS:
        for label in ("small", "full"):
            r = measured(export_step(versions[label]["version"], fmt))
            ours[(fmt, label)] = r
            print(_line(f"{fmt} {label}", r))
    print("\n  flatness (peak at full / peak at small; 1.0 = flat):")
    for fmt in FORMATS:
        big, little = ours[(fmt, "full")], ours[(fmt, "small")]
        ratio = big["rss_mib"] / max(little["rss_mib"], 0.1)
        print(
            f"    {fmt:9} {big['rss_mib']:.1f} MiB at {big['rows']} rows vs "
            f"{little['rss_mib']:.1f} MiB at {little['rows']} rows (x{ratio:.2f})"
        )
    if ARGS.skip_datasets:
        return
    print("\n`datasets` baseline on the full version: rows built in memory, from_list, to_json")
    print(header)
    for fmt in FORMATS:
        r = measured(datasets_step(versions["full"]["version"], fmt))
        mine = ours[(fmt, "full")]
        print(
            _line(f"{fmt} datasets", r)
            + f"   ours x{r['seconds'] / mine['seconds']:.2f} the speed, "
            f"1/{r['rss_mib'] / max(mine['rss_mib'], 0.1):.0f} the peak memory"
        )


if __name__ == "__main__":
    main()
