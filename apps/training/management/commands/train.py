"""python manage.py train --project SLUG --dataset ID --version N --backend local
--base-model MODEL [--max-steps N] [--sync]

python manage.py train --project SLUG --method grpo --environment ID [--environment ID …]
[--split train] [--group-size G] [--temperature T] [--reward passed] [--advantage dr_grpo]
[--credit turn --gamma 0.9]
--preset tiny-cpu [--max-steps N] [--sync]"""

import json
import time

from django.core.management.base import BaseCommand, CommandError

from apps.accounts.models import Project
from apps.core.exceptions import ApplicationError
from apps.core.models import Job, JobStatus
from apps.datasets.models import DatasetVersion
from apps.training.hyperparameters import (
    ADVANTAGES,
    CREDITS,
    GRPO_PRESETS,
    PRESETS,
    REWARD_VARIANTS,
)
from apps.training.models import Backend, TrainingJob, TrainingMethod
from apps.training.selectors import project_environments
from apps.training.services import training_job_create, training_job_execute


class Command(BaseCommand):
    help = (
        "Launch fine-tuning on a dataset version (or GRPO on environment tasks) and follow "
        "its loss (and reward). Without --sync the job "
        "goes to the workers (local: gpu queue; openai and command: llm queue) and this "
        "command waits for it; with --sync it runs here."
    )

    def create_parser(self, prog_name, subcommand, **kwargs):
        # --version names the dataset version here (as the command line has it), so
        # it replaces Django's own --version (which prints Django's).
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)

    def add_arguments(self, parser):
        parser.add_argument("--project", required=True, help="Project slug.")
        parser.add_argument("--method", choices=TrainingMethod.values, default=TrainingMethod.SFT)
        parser.add_argument("--dataset", type=int, help="sft: the dataset id.")
        parser.add_argument("--version", type=int, help="sft: the version number.")
        parser.add_argument(
            "--environment",
            type=int,
            action="append",
            default=[],
            help="grpo: an environment id whose tasks are rolled out (repeat for several).",
        )
        parser.add_argument(
            "--split", choices=["train", "eval", "all"], default="train", help="grpo: tasks."
        )
        parser.add_argument("--group-size", type=int, help="grpo: rollouts per task (G).")
        parser.add_argument("--temperature", type=float, help="grpo: sampling temperature.")
        parser.add_argument("--reward", choices=list(REWARD_VARIANTS), help="grpo: reward.")
        parser.add_argument("--advantage", choices=list(ADVANTAGES), help="grpo: advantage.")
        parser.add_argument("--credit", choices=list(CREDITS), help="grpo: credit assignment.")
        parser.add_argument("--gamma", type=float, help="grpo: discount of the reward-to-go.")
        parser.add_argument("--backend", choices=Backend.values, default=Backend.LOCAL)
        parser.add_argument(
            "--base-model", default="", help="Hub id, local path or preset:tiny-qwen2."
        )
        parser.add_argument(
            "--preset", choices=sorted(set(PRESETS) | set(GRPO_PRESETS)), default=""
        )
        parser.add_argument("--max-steps", type=int, help="Overrides epochs.")
        parser.add_argument("--epochs", type=float)
        parser.add_argument("--learning-rate", type=float)
        parser.add_argument("--lora", action="store_true", help="Train a LoRA adapter.")
        parser.add_argument(
            "--hyperparameters", default="{}", help="More hyperparameters as a JSON object."
        )
        parser.add_argument("--no-eval", action="store_true", help="No validation loss.")
        parser.add_argument("--endpoint", help="openai backend: the endpoint's name.")
        parser.add_argument(
            "--command-template", default="", help="command backend: the operator's template."
        )
        parser.add_argument(
            "--command-parameters", default="{}", help="command backend: its parameters (JSON)."
        )
        parser.add_argument("--name", default="")
        parser.add_argument("--sync", action="store_true", help="Run here, no worker.")
        parser.add_argument(
            "--timeout", type=float, default=0, help="Stop waiting after N seconds (0: never)."
        )

    def handle(self, *args, **opts):
        project = Project.objects.filter(slug=opts["project"]).first()
        if project is None:
            raise CommandError(f"No project “{opts['project']}”.")
        if opts["method"] == TrainingMethod.GRPO:
            environments, version = _environments(project, opts["environment"]), None
        else:
            environments, version = [], _dataset_version(project, opts)
        hyperparameters = _hyperparameters(opts)
        endpoint = _endpoint(project, opts["endpoint"])
        try:
            command_parameters = json.loads(opts["command_parameters"])
        except ValueError:
            raise CommandError("--command-parameters is a JSON object.") from None
        try:
            training_job = training_job_create(
                project=project,
                method=opts["method"],
                environments=environments,
                task_split="" if opts["split"] == "all" else opts["split"],
                dataset_version=version,
                backend=opts["backend"],
                base_model=opts["base_model"],
                preset=opts["preset"],
                hyperparameters=hyperparameters,
                name=opts["name"],
                eval_split="" if opts["no_eval"] else "validation",
                endpoint=endpoint,
                command_template=opts["command_template"],
                command_parameters=command_parameters,
                enqueue=not opts["sync"],
            )
        except ApplicationError as exc:
            details = exc.extra.get("fields") or {}
            text = "; ".join(f"{k}: {' '.join(v)}" for k, v in details.items())
            raise CommandError(f"{exc.message} {text}".strip()) from None
        self._run(training_job, opts)

    def _run(self, training_job: TrainingJob, opts) -> None:
        """Run or follow the job, then print its losses and verdict."""
        self.stdout.write(
            f"Training job #{training_job.pk} “{training_job.name}”: {training_job.backend}, "
            f"base {training_job.base_model}, {training_job.total_steps or '?'} steps."
        )
        if opts["sync"]:
            training_job_execute(training_job.job_id)
        else:
            self._wait(training_job, opts["timeout"])
        training_job.refresh_from_db()
        job = Job.objects.get(pk=training_job.job_id)
        self._losses(training_job)
        self.stdout.write(f"{job.get_status_display()}: {job.message}")
        model = getattr(training_job, "trained_model", None)
        if model is not None:
            self.stdout.write(f"Model: {model.path or model.remote_model}")
        if job.status != JobStatus.SUCCEEDED and job.status != JobStatus.RUNNING:
            raise CommandError(f"Training {job.status}.")

    def _losses(self, training_job: TrainingJob) -> None:
        for metric in training_job.metrics.order_by("step"):
            parts = [f"step {metric.step:>5}"]
            if metric.loss is not None:
                parts.append(f"loss {metric.loss:.4f}")
            if metric.eval_loss is not None:
                parts.append(f"eval {metric.eval_loss:.4f}")
            if metric.reward is not None:
                parts.append(f"reward {metric.reward:.4f}")
            if metric.pass_rate is not None:
                parts.append(f"pass {metric.pass_rate:.2f}")
            if metric.kl is not None:
                parts.append(f"kl {metric.kl:.4g}")
            self.stdout.write("  " + "  ".join(parts))

    def _wait(self, training_job: TrainingJob, timeout: float) -> None:
        started = time.monotonic()
        last = None
        while True:
            job = Job.objects.get(pk=training_job.job_id)
            if job.message != last:
                self.stdout.write(f"  {job.get_status_display()}: {job.message}")
                last = job.message
            if job.status not in (JobStatus.PENDING, JobStatus.RUNNING):
                return
            if training_job.backend == Backend.COMMAND and job.status == JobStatus.RUNNING:
                self.stdout.write("  Submitted; the cluster reports through the callback.")
                return
            if timeout and time.monotonic() - started > timeout:
                self.stdout.write("  Still running; follow it on its page.")
                return
            time.sleep(2)


# Options copied into the hyperparameters when given (option name, hyperparameter name).
HYPERPARAMETER_OPTIONS = (
    ("max_steps", "max_steps"),
    ("epochs", "epochs"),
    ("learning_rate", "learning_rate"),
    ("group_size", "group_size"),
    ("temperature", "temperature"),
    ("reward", "reward"),
    ("advantage", "advantage"),
    ("credit", "credit"),
    ("gamma", "gamma"),
)


def _environments(project: Project, ids: list[int]) -> list:
    environments = list(project_environments(project=project, ids=ids))
    missing = sorted(set(ids) - {e.pk for e in environments})
    if missing:
        raise CommandError(f"No environment {', '.join(map(str, missing))} in {project.slug}.")
    return environments


def _dataset_version(project: Project, opts) -> DatasetVersion:
    if opts["dataset"] is None or opts["version"] is None:
        raise CommandError("sft needs --dataset and --version.")
    version = (
        DatasetVersion.objects.filter(
            dataset_id=opts["dataset"], dataset__project=project, number=opts["version"]
        )
        .select_related("dataset")
        .first()
    )
    if version is None:
        raise CommandError(
            f"No version {opts['version']} of dataset {opts['dataset']} in {project.slug}."
        )
    return version


def _hyperparameters(opts) -> dict:
    """--hyperparameters, with the dedicated options (--max-steps, --lora…) on top."""
    try:
        hyperparameters = json.loads(opts["hyperparameters"])
    except ValueError as exc:
        raise CommandError(f"--hyperparameters is not JSON: {exc}") from None
    if not isinstance(hyperparameters, dict):
        raise CommandError("--hyperparameters must be a JSON object.")
    for option, name in HYPERPARAMETER_OPTIONS:
        if opts[option] is not None:
            hyperparameters[name] = opts[option]
    if opts["lora"]:
        hyperparameters["lora"] = True
    return hyperparameters


def _endpoint(project: Project, name: str | None):
    if not name:
        return None
    endpoint = project.model_endpoints.filter(name=name).first()
    if endpoint is None:
        raise CommandError(f"No endpoint “{name}” in {project.slug}.")
    return endpoint
