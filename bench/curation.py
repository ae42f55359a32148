"""Curation benchmark: a finished teacher batch's passing runs becoming demonstrations.

    python bench/curation.py [--runs 640] [--repeats 3] [--database-url postgres://…]

In a throw-away directory (SQLite unless ``--database-url``, which must name an empty
database: it is migrated), the bench imports the sample environments (every task a train
task), runs one oracle trial of each task through the project's own services
(``run_batch_create`` + ``run_batch_execute_inline``, as an EVAL batch so that nothing is
promoted yet), copies those graded runs (transcripts, tools, logs, verdicts) up to
``--runs`` runs of the batch, makes it a TEACHER batch and times
``demonstrations_from_batch`` on it: CPU seconds of this process (``time.process_time``,
which includes the database's own work on SQLite, not on PostgreSQL) and the queries it ran
(counted with ``connection.execute_wrapper``: ``CaptureQueriesContext`` keeps only the last
9000). Each repeat deletes the demonstrations it made first.

Nothing asserts on time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--runs", type=int, default=640, help="runs in the batch (default 640)")
parser.add_argument("--repeats", type=int, default=3)
parser.add_argument("--database-url", default="", help="default: a fresh SQLite file")
ARGS = parser.parse_args()

TMP = Path(tempfile.mkdtemp(prefix="coworkenv-bench-curation-"))
os.environ["COWORKENV_VAR_DIR"] = str(TMP)
os.environ["MEDIA_ROOT"] = str(TMP / "media")
os.environ["DATABASE_URL"] = ARGS.database_url or f"sqlite://{TMP / 'bench.sqlite3'}"
os.environ.pop("CELERY_BROKER_URL", None)
os.environ["DJANGO_SETTINGS_MODULE"] = "coworkenv_web.settings"

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402


def teacher_batch(runs: int):
    from django.contrib.auth import get_user_model

    from apps.accounts.models import Membership, Project, Role
    from apps.environments.models import Environment, EnvironmentStatus
    from apps.environments.services import environment_import
    from apps.runs.models import Executor, Run, RunRole, RunStatus
    from apps.runs.services import (
        BatchSettings,
        TaskSelection,
        run_batch_create,
        run_batch_execute_inline,
    )

    user = get_user_model().objects.create_user("bench", password="bench-pass-123")
    project = Project.objects.create(name="Bench", slug="bench")
    Membership.objects.create(project=project, user=user, role=Role.ADMIN)
    environments = []
    for path in sorted((ROOT / "samples").glob("*.json")):
        spec = json.loads(path.read_text())
        for task in spec["tasks"]:
            task["split"] = "train"
        environment = environment_import(project=project, spec=spec, user=user)
        Environment.objects.filter(pk=environment.pk).update(status=EnvironmentStatus.VALID)
        environments.append(environment.pk)
    batch = run_batch_create(
        project=project,
        user=user,
        role=RunRole.EVAL,
        selection=TaskSelection(environments=tuple(environments)),
        settings=BatchSettings(trials=1),
        executor=Executor.INLINE,
    )
    run_batch_execute_inline(batch=batch)
    graded = list(Run.objects.filter(batch=batch, status=RunStatus.SUCCEEDED, passed=True))
    copies = []
    for i in range(runs - len(graded)):
        fields = {
            f.attname: getattr(graded[i % len(graded)], f.attname)
            for f in Run._meta.concrete_fields
        }
        fields.update(id=None, trial=2 + i // len(graded))
        copies.append(Run(**fields))
    Run.objects.bulk_create(copies, batch_size=500)
    batch.role = RunRole.TEACHER
    batch.save(update_fields=["role"])
    return batch, graded


def counted(queries: list):
    def wrapper(execute, sql, params, many, context):
        queries.append(sql)
        return execute(sql, params, many, context)

    return wrapper


def main() -> None:
    from apps.curation.models import Demonstration
    from apps.curation.services import demonstrations_from_batch
    from apps.runs.models import Run

    call_command("migrate", verbosity=0)
    batch, graded = teacher_batch(ARGS.runs)
    runs = Run.objects.filter(batch=batch).count()
    sizes = [len(json.dumps(run.transcript)) for run in graded]
    print(
        f"batch of {runs} passing runs ({len(graded)} distinct oracle transcripts, "
        f"{statistics.mean(sizes) / 1000:.1f} kB of JSON each on average), "
        f"{connection.vendor}"
    )
    cpu, wall = [], []
    for _ in range(ARGS.repeats):
        Demonstration.objects.all().delete()
        queries = []
        with connection.execute_wrapper(counted(queries)):
            started_cpu, started_wall = time.process_time(), time.perf_counter()
            created = demonstrations_from_batch(batch=batch)
            cpu.append(time.process_time() - started_cpu)
            wall.append(time.perf_counter() - started_wall)
        assert created == runs, (created, runs)
    print(
        f"demonstrations_from_batch: {created} created; CPU {min(cpu):.3f} s "
        f"(median {statistics.median(cpu):.3f}), {min(cpu) / runs * 1000:.2f} ms a run; "
        f"wall {min(wall):.3f} s; {len(queries)} queries ({len(queries) / runs:.2f} a run)"
    )


if __name__ == "__main__":
    try:
        main()
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
