"""Page benchmark: server time and query counts of the environment pages and API at scale.

    python bench/pages.py [--count 10000] [--repeat 20]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/coworkenv_bench python bench/pages.py

Runs against a throw-away database made by Django's test-database machinery (``test_`` +
the configured name on PostgreSQL, an in-memory database on SQLite), so it never touches
real data, and drops it at the end. One sample is imported through the service; the other
environments are rows cloned from it with ``bulk_create`` (tasks, graders, capability links
and a validation report each; tools and records only for the imported one).

Each request goes through Django's test Client, logged in (force_login) as the project's
creator; the time is measured around the request, in process (no network). The table shows
the median and p95 of ``--repeat`` runs (after a warm-up) and the query count, first with a
baseline of 10 environments, then with ``--count``, and the ratio of the medians. Nothing
asserts on time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "coworkenv_web.settings")

import django  # noqa: E402

django.setup()

from django.db import connection, reset_queries  # noqa: E402
from django.db.models import OuterRef, Subquery  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import (  # noqa: E402
    CaptureQueriesContext,
    setup_test_environment,
    teardown_test_environment,
)
from django.urls import NoReverseMatch, reverse  # noqa: E402

SAMPLE = ROOT / "samples" / "acme-ops.json"
BASELINE = 10
DOMAINS = ["operations", "finance", "customer-support", "sales", "legal", "hr"]
BATCH = 2000


def clone(template, count: int, start: int) -> None:
    """``count`` more environments built from ``template``'s rows, numbered from ``start``."""
    from apps.environments.models import (
        Environment,
        EnvironmentSource,
        EnvironmentStatus,
        Grader,
        Task,
        TaskCapability,
        ValidationReport,
    )

    statuses = [
        EnvironmentStatus.DRAFT,
        EnvironmentStatus.VALID,
        EnvironmentStatus.INVALID,
        EnvironmentStatus.APPROVED,
    ]
    sources = [EnvironmentSource.IMPORTED, EnvironmentSource.SYNTHESIZED, EnvironmentSource.MANUAL]
    tasks = list(template.tasks.order_by("position"))
    graders = {task.pk: list(task.graders.order_by("position")) for task in tasks}
    links = {task.pk: list(task.capability_links.order_by("position")) for task in tasks}

    environments = Environment.objects.bulk_create(
        (
            Environment(
                project_id=template.project_id,
                name=f"Environment {start + i:05d}",
                domain=DOMAINS[(start + i) % len(DOMAINS)],
                description=template.description,
                status=statuses[(start + i) % len(statuses)],
                source=sources[(start + i) % len(sources)],
                spec_hash=template.spec_hash,
                collections=template.collections,
                clock=template.clock,
                metadata=template.metadata,
                created_by_id=template.created_by_id,
            )
            for i in range(count)
        ),
        batch_size=BATCH,
    )
    new_tasks = Task.objects.bulk_create(
        (
            Task(
                environment=environment,
                position=task.position,
                key=task.key,
                title=task.title,
                split=task.split,
                system=task.system,
                constraints=task.constraints,
                user=task.user,
                turns=task.turns,
                reference_solution=task.reference_solution,
                scoring=task.scoring,
                metadata=task.metadata,
            )
            for environment in environments
            for task in tasks
        ),
        batch_size=BATCH,
    )
    Grader.objects.bulk_create(
        (
            Grader(
                task=new,
                position=grader.position,
                key=grader.key,
                description=grader.description,
                category=grader.category,
                weight=grader.weight,
                at_turn=grader.at_turn,
                check_spec=grader.check_spec,
            )
            for new, task in zip(new_tasks, tasks * len(environments), strict=True)
            for grader in graders[task.pk]
        ),
        batch_size=BATCH,
    )
    TaskCapability.objects.bulk_create(
        (
            TaskCapability(task=new, capability_id=link.capability_id, position=link.position)
            for new, task in zip(new_tasks, tasks * len(environments), strict=True)
            for link in links[task.pk]
        ),
        batch_size=BATCH,
    )
    ValidationReport.objects.bulk_create(
        (
            ValidationReport(
                environment=environment,
                revision=1,
                spec_hash=template.spec_hash,
                valid=environment.status != EnvironmentStatus.INVALID,
                problems=[],
                tasks=[],
            )
            for environment in environments
        ),
        batch_size=BATCH,
    )
    Environment.objects.filter(pk__in=[e.pk for e in environments]).update(
        latest_validation=Subquery(
            ValidationReport.objects.filter(environment=OuterRef("pk")).values("pk")[:1]
        )
    )


def measure(client: Client, url: str, repeat: int) -> dict:
    for _ in range(2):  # warm-up: templates, caches, connection
        response = client.get(url)
        if response.status_code != 200:
            raise RuntimeError(f"GET {url} answered {response.status_code}")
    reset_queries()  # the log is a bounded deque: a full one would hide the new queries
    with CaptureQueriesContext(connection) as queries:
        client.get(url)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        client.get(url)
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    p95 = times[min(len(times) - 1, max(0, round(0.95 * len(times)) - 1))]
    return {"median": statistics.median(times), "p95": p95, "queries": len(queries)}


def pages(project, environment) -> list[tuple[str, str | None]]:
    """(label, url) of what is measured; url None where the page does not exist (yet)."""

    def url(name, *args, query: str = "") -> str | None:
        try:
            return reverse(name, args=args) + (f"?{query}" if query else "")
        except NoReverseMatch:
            return None

    return [
        ("list page", url("environments:list", project.slug)),
        (
            "list page, filtered + sorted",
            url(
                "environments:list",
                project.slug,
                query="q=environment&capability=resolve-conflicts&split=eval&sort=tasks",
            ),
        ),
        ("list page, page 50", url("environments:list", project.slug, query="page=50")),
        ("detail page (overview)", url("environments:detail", environment.pk)),
        ("detail page (tasks tab)", url("environments:tab", environment.pk, "tasks")),
        ("API list", url("api:environment_list")),
        ("API list, one project", url("api:environment_list", query=f"project={project.pk}")),
        (
            "API list, filtered + sorted",
            url(
                "api:environment_list",
                query=f"project={project.pk}&capability=resolve-conflicts&split=eval&sort=tasks",
            ),
        ),
        ("API detail", url("api:environment_detail", environment.pk)),
    ]


def run(count: int, repeat: int) -> None:
    from django.contrib.auth import get_user_model

    from apps.environments.models import Environment, Grader, Task
    from apps.environments.services import environment_import
    from apps.workspace.services import project_start

    user = get_user_model().objects.create_user("bench-user", password="bench-pass-123")
    project = project_start(creator=user, name="Bench", slug="bench", description="")
    environment = environment_import(
        project=project, spec=json.loads(SAMPLE.read_text()), user=user
    )
    client = Client()
    client.force_login(user)
    targets = pages(project, environment)

    results = {}
    for phase, total in (("baseline", BASELINE), ("scaled", count)):
        started = time.perf_counter()
        clone(environment, total - Environment.objects.count(), Environment.objects.count())
        print(
            f"{phase}: {Environment.objects.count():,} environments, "
            f"{Task.objects.count():,} tasks, {Grader.objects.count():,} graders "
            f"(made in {time.perf_counter() - started:.1f} s)",
            flush=True,
        )
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE")  # fresh statistics, as autovacuum would give
        for label, url in targets:
            if url is not None:
                results[(phase, label)] = measure(client, url, repeat)

    head = (
        f"{'page':<30} {'median ms':>10} {'p95 ms':>9} {'queries':>8}"
        f"   {'at ' + str(BASELINE):>8} {'q@' + str(BASELINE):>6} {'x median':>9}"
    )
    print()
    print(f"{count:,} environments on {connection.vendor}; {repeat} runs per page")
    print(head)
    print("-" * len(head))
    for label, url in targets:
        if url is None:
            print(f"{label:<30} {'(page not built yet: not measured)':>}")
            continue
        now, base = results[("scaled", label)], results[("baseline", label)]
        ratio = now["median"] / base["median"]
        print(
            f"{label:<30} {now['median']:>10.1f} {now['p95']:>9.1f} {now['queries']:>8}"
            f"   {base['median']:>8.1f} {base['queries']:>6} {ratio:>8.1f}x"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=10_000, help="environments (default 10000)")
    parser.add_argument("--repeat", type=int, default=20, help="timed runs per page (default 20)")
    args = parser.parse_args()
    if args.count < BASELINE:
        parser.error(f"--count must be at least {BASELINE}.")

    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    try:
        run(args.count, args.repeat)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
        teardown_test_environment()


if __name__ == "__main__":
    main()
