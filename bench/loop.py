"""The loop, measured: one experiment recipe run end to end in this process.

    python bench/loop.py [--recipe laptop] [--k K]

A fresh SQLite database under a temporary folder, the standard capability catalogue, one
project; then the recipe (``recipes/<name>.json``, or a path) is advanced inline, as
``manage.py experiment --sync`` does: synthesis, the teacher, the review policy, the
dataset version, SFT, the served models and their student batches, GRPO from the SFT
checkpoint. Printed: the results table (Markdown), wall time and CPU-seconds per stage (this
process and its children: trainers and model servers), tokens/s of SFT and GRPO, the served
models' latency per call, and a last line for scripts:

    loop: held-out score base B -> sft S (diff D, 95% CI [L, H]) -> grpo G over N tasks;
    grpo reward R1 -> R2 (first/last fifth); M min

Figures, not assertions: nothing here checks that the student learned.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
TMP = Path(tempfile.mkdtemp(prefix="coworkenv-loop-"))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipe", default="laptop", help="A name in recipes/ or a path.")
    parser.add_argument("--k", type=int, help="Override the recipe's evaluation k.")
    return parser.parse_args(argv)


def configure() -> None:
    os.environ["COWORKENV_VAR_DIR"] = str(TMP)
    os.environ["DJANGO_SETTINGS_MODULE"] = "coworkenv_web.settings"
    os.environ["DATABASE_URL"] = f"sqlite://{TMP / 'loop.sqlite3'}"
    os.environ.pop("CELERY_BROKER_URL", None)
    os.environ.setdefault("SECRET_KEY", "bench-only-secret-key")
    os.environ["DEBUG"] = "false"


def cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed_steps(advance, spent: dict[str, list[float]]) -> None:
    """Wrap each stage's inline work so its wall and CPU time are counted."""

    def timed(name, work):
        def run(stage):
            wall, cpu = time.monotonic(), cpu_seconds()
            try:
                return work(stage)
            finally:
                entry = spent.setdefault(name, [0.0, 0.0])
                entry[0] += time.monotonic() - wall
                entry[1] += cpu_seconds() - cpu

        return run

    for name, step in list(advance.STEPS.items()):
        if step.run is not None:
            advance.STEPS[name] = dataclasses.replace(step, run=timed(name, step.run))


def fifths(values: list[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    size = max(1, len(values) // 5)
    return statistics.fmean(values[:size]), statistics.fmean(values[-size:])


def _f(value, digits=3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def report(experiment, spent, started) -> None:
    from apps.experiments.outcomes import experiment_curves, experiment_results
    from apps.experiments.results import table_markdown, table_summary
    from apps.llm.models import LLMCall
    from apps.training.models import TrainingMetric

    table = experiment_results(experiment)
    print(table_markdown(table))
    print(table_summary(table))
    print("\nstage          wall s    CPU s   status")
    for stage in experiment.stages.order_by("position"):
        wall, cpu = spent.get(stage.stage, (0.0, 0.0))
        print(f"{stage.stage:<12} {wall:8.1f} {cpu:8.1f}   {stage.status} {stage.message}")
    outputs = {s.stage: s.outputs for s in experiment.stages.all()}
    for stage in ("sft", "grpo"):
        rates = TrainingMetric.objects.filter(
            training_job_id=outputs.get(stage, {}).get("training_job"),
            tokens_per_second__isnull=False,
        ).values_list("tokens_per_second", flat=True)
        print(f"{stage} tokens/s: {_f(statistics.fmean(rates) if rates else None, 1)}")
    latencies = list(
        LLMCall.objects.filter(endpoint_name__startswith="served-").values_list(
            "latency_ms", flat=True
        )
    )
    if latencies:
        print(
            f"served models: {len(latencies)} calls, median {statistics.median(latencies):.0f} ms,"
            f" p90 {sorted(latencies)[int(0.9 * (len(latencies) - 1))]:.0f} ms a call"
        )
    overall = next((row for row in table["rows"] if row["group"] == "all"), None)
    arms = overall["arms"] if overall else {}
    sft_diff = (overall or {}).get("deltas", {}).get("sft", {}).get("score")
    rewards = [
        p["reward"] for p in experiment_curves(experiment)["grpo"] if p["reward"] is not None
    ]
    first, last = fifths(rewards)
    print(
        f"loop: held-out score base {_f(arms.get('base', {}).get('mean_score'))}"
        f" -> sft {_f(arms.get('sft', {}).get('mean_score'))}"
        f" (diff {_f(sft_diff.mean if sft_diff else None)}, 95% CI"
        f" [{_f(sft_diff.low if sft_diff else None)}, {_f(sft_diff.high if sft_diff else None)}])"
        f" -> grpo {_f(arms.get('grpo', {}).get('mean_score'))}"
        f" over {arms.get('base', {}).get('tasks', 0)} tasks;"
        f" grpo reward {_f(first)} -> {_f(last)} (first/last fifth);"
        f" {(time.monotonic() - started) / 60:.1f} min"
    )


def main(argv=None) -> int:
    args = parse_args(argv)
    configure()
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from apps.accounts.services import project_create
    from apps.capabilities.services import capability_catalogue_seed
    from apps.experiments import advance
    from apps.experiments.services import experiment_create

    path = Path(args.recipe)
    if not path.suffix:
        path = ROOT / "recipes" / f"{args.recipe}.json"
    recipe = json.loads(path.read_text())
    if args.k:
        recipe.setdefault("evaluation", {})["k"] = args.k
    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user("bench", password="bench-password-1")
    project = project_create(name="Loop bench", slug="loop", creator=user)
    capability_catalogue_seed(project=project, user=user)
    spent: dict[str, list[float]] = {}
    timed_steps(advance, spent)
    started = time.monotonic()
    experiment = experiment_create(project=project, user=user, recipe=recipe, enqueue=False)
    experiment = advance.experiment_advance(experiment_id=experiment.pk, inline=True)
    print(f"{recipe['name']}: {experiment.status} {experiment.message}".strip())
    report(experiment, spent, started)
    return 0 if experiment.status == "succeeded" else 1


if __name__ == "__main__":
    sys.exit(main())
