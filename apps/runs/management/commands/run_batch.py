"""python manage.py run_batch --project SLUG --policy oracle|ENDPOINT_NAME --trials K [--sync]"""

import time

from django.core.management.base import BaseCommand, CommandError

from apps.accounts.models import Project
from apps.core.exceptions import ApplicationError
from apps.core.models import Job
from apps.environments.models import Split
from apps.llm.models import ModelEndpoint
from apps.runs.models import Executor, PolicyKind, RunRole
from apps.runs.selectors import batch_metrics
from apps.runs.services import (
    BatchSettings,
    TaskSelection,
    run_batch_create,
    run_batch_execute_inline,
)


def _pct(value) -> str:
    return "    —" if value is None else f"{value * 100:5.1f}%"


def _num(value) -> str:
    return "   —" if value is None else f"{value:4.2f}"


class Command(BaseCommand):
    help = (
        "Run a batch of tasks with the oracle or a model endpoint, print progress and the "
        "evaluation table. Without --sync the runs go to the Celery workers (llm queue) and "
        "this command waits for them."
    )

    def add_arguments(self, parser):
        parser.add_argument("--project", required=True, help="Project slug.")
        parser.add_argument(
            "--policy", required=True, help="oracle, or the name of a model endpoint."
        )
        parser.add_argument("--role", choices=RunRole.values, default=RunRole.EVAL)
        parser.add_argument("--capability", action="append", default=[], help="Repeatable.")
        parser.add_argument("--split", choices=Split.values)
        parser.add_argument("--environment", type=int, nargs="+", default=[], help="Ids.")
        parser.add_argument("--trials", type=int, default=1, help="k: runs per task.")
        parser.add_argument("--concurrency", type=int, default=4)
        parser.add_argument("--max-tool-calls", type=int, default=50)
        parser.add_argument("--max-rounds", type=int, default=20, help="Per user turn.")
        parser.add_argument("--max-attempts", type=int, default=3)
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--no-faults", action="store_true", help="Do not inject faults.")
        parser.add_argument("--user-simulator", help="Endpoint name of an LLM user simulator.")
        parser.add_argument("--name", default="")
        parser.add_argument("--sync", action="store_true", help="Execute here, no worker.")
        parser.add_argument(
            "--timeout", type=float, default=0, help="Stop waiting after N seconds (0: never)."
        )

    def handle(self, *args, **opts):
        project = Project.objects.filter(slug=opts["project"]).first()
        if project is None:
            raise CommandError(f"No project “{opts['project']}”.")
        endpoint = None
        if opts["policy"] != "oracle":
            endpoint = self._endpoint(project, opts["policy"])
        simulator = None
        if opts["user_simulator"]:
            simulator = self._endpoint(project, opts["user_simulator"])
        try:
            batch = run_batch_create(
                project=project,
                name=opts["name"],
                policy_kind=PolicyKind.ENDPOINT if endpoint else PolicyKind.ORACLE,
                endpoint=endpoint,
                role=opts["role"],
                selection=TaskSelection(
                    environments=tuple(opts["environment"]),
                    capabilities=tuple(opts["capability"]),
                    split=opts["split"] or "",
                ),
                settings=BatchSettings(
                    trials=opts["trials"],
                    concurrency=opts["concurrency"],
                    max_tool_calls=opts["max_tool_calls"],
                    max_rounds_per_turn=opts["max_rounds"],
                    max_attempts=opts["max_attempts"],
                    faults=not opts["no_faults"],
                    user_side="simulator" if simulator else "scripted",
                    simulator_endpoint=simulator,
                    seed=opts["seed"],
                ),
                executor=Executor.INLINE if opts["sync"] else Executor.CELERY,
            )
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(
            f"Batch #{batch.pk} “{batch.name}”: {len(batch.task_ids)} tasks x "
            f"{batch.trials} trials = {batch.slot_count} runs ({batch.get_executor_display()})."
        )
        if opts["sync"]:
            run_batch_execute_inline(batch=batch, on_progress=self._progress)
        else:
            self._wait(batch, opts["timeout"])
        job = Job.objects.get(pk=batch.job_id)
        self.stdout.write(f"{job.get_status_display()}: {job.message}")
        self._table(batch)

    def _endpoint(self, project, name: str):
        endpoint = ModelEndpoint.objects.filter(project=project, name=name).first()
        if endpoint is None:
            names = ", ".join(project.model_endpoints.values_list("name", flat=True)) or "none"
            raise CommandError(f"No endpoint “{name}” in {project.slug} (endpoints: {names}).")
        return endpoint

    def _progress(self, job: Job) -> None:
        self.stdout.write(f"  {job.progress_done}/{job.progress_total} trials finished")

    def _wait(self, batch, timeout: float) -> None:
        started = time.monotonic()
        last = None
        while True:
            job = Job.objects.get(pk=batch.job_id)
            if (job.progress_done, job.status) != last:
                last = (job.progress_done, job.status)
                self.stdout.write(
                    f"  {job.progress_done}/{job.progress_total} trials finished ({job.status})"
                )
            if not job.is_active:
                return
            if timeout and time.monotonic() - started > timeout:
                raise CommandError(
                    f"Still running after {timeout:.0f} s (is a worker consuming the llm "
                    f"queue?). Follow it at /runs/batches/{batch.pk}/."
                )
            time.sleep(1.0)

    def _table(self, batch) -> None:
        metrics = batch_metrics(batch=batch)
        s = metrics["summary"]
        ks = list(range(1, batch.trials + 1))
        out = self.stdout.write
        out("")
        out(
            f"{batch.policy_label}: {s['graded']} graded runs over {s['tasks']} tasks · "
            f"avg score {_num(s['average_score']).strip()} · pass rate "
            f"{_pct(s['pass_rate']).strip()} · strict {_pct(s['strict_rate']).strip()} · "
            f"{metrics['counts']['errored']} errored attempts"
        )
        out("        " + "".join(f"   k={k:<3}" for k in ks))
        out("pass@k  " + "".join(f"  {_pct(s['pass_at_k'].get(k))}" for k in ks))
        out("pass^k  " + "".join(f"  {_pct(s['pass_hat_k'].get(k))}" for k in ks))
        out("")
        out(f"{'capability':<32} {'tasks':>5} {'graded':>6} {'score':>6} {'pass':>7} {'strict':>7}")
        for row in metrics["by_capability"]:
            out(
                f"{row['name'][:32]:<32} {row['tasks']:>5} {row['graded']:>6} "
                f"{_num(row['average_score']):>6} {_pct(row['pass_rate']):>7} "
                f"{_pct(row['strict_rate']):>7}"
            )
        if metrics["failing_graders"]:
            out("")
            out("graders that fail most:")
            for row in metrics["failing_graders"][:10]:
                out(
                    f"  {row['failed']}/{row['total']}  {row['task_key']} · {row['grader_id']} "
                    f"({row['category']})"
                )
