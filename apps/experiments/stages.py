"""What each stage of an experiment starts, runs in process and collects, through the
existing services. ``start`` creates the stage's jobs (the caller records their ids in the
same transaction, so a kill never leaves a job the experiment does not know of); ``run``
works them here when the experiment runs inline (safe to call again: each service claims
its unit of work); ``collect`` reads what the finished jobs made into the stage's outputs.
"""

from dataclasses import dataclass

from django.conf import settings

from apps.core.models import JobStatus
from apps.curation.models import Demonstration, DemonstrationStatus
from apps.curation.services import demonstrations_approve_by_policy
from apps.datasets.models import DatasetVersion
from apps.datasets.services import (
    VersionFilter,
    dataset_create,
    dataset_version_build_job,
    dataset_version_create,
)
from apps.experiments.models import Experiment, ExperimentStage, Stage
from apps.experiments.recipe import ReviewPolicy, recipe_parse
from apps.experiments.services import recipe_resolve
from apps.llm.services import endpoint_update
from apps.runs.models import Executor, PolicyKind, RunBatch, RunRole
from apps.runs.services import (
    BatchSettings,
    TaskSelection,
    run_batch_create,
    run_batch_execute_inline,
)
from apps.serving.models import ModelServer
from apps.serving.running import model_server_run_in_thread
from apps.serving.selectors import model_server_ready
from apps.serving.services import model_server_start, model_server_stop, model_server_wait_ready
from apps.synthesis.models import Generator, SynthesisJob, SynthesisSlot
from apps.synthesis.services import synthesis_run_inline, synthesis_start
from apps.training.models import Backend, TrainedModel, TrainingJob, TrainingMethod
from apps.training.selectors import trained_model_base
from apps.training.services import training_job_create, training_job_execute
from apps.training.services.grpo import MAX_ENVIRONMENTS as MAX_GRPO_ENVIRONMENTS

HELD_OUT_SEED_OFFSET = 1_000_000  # held-out environments come from seeds never trained on


class StageWaiting(Exception):
    """The stage waits for people (the human review queue); advance again later."""


@dataclass
class Context:
    experiment: Experiment
    stages: dict[str, ExperimentStage]
    inline: bool

    @property
    def recipe(self):
        return recipe_parse(self.experiment.recipe)

    @property
    def project(self):
        return self.experiment.project

    @property
    def user(self):
        return self.experiment.created_by

    def output(self, stage: str, key: str):
        return self.stages[stage].outputs.get(key)


# ----------------------------------------------------------------------------- synthesis


def _cells(recipe) -> list[tuple[str, str, str, int, int]]:
    """(role, family, horizon, count, seed) of each synthesis job: the train cells, the
    held-out seeds of the same cells, and the held-out family at every horizon."""
    generator, held_out = recipe.generator, recipe.held_out
    families = generator.families or ("",)
    cells = []
    for i, (family, horizon) in enumerate((f, h) for f in families for h in generator.horizons):
        seed = generator.seed + 1000 * i
        cells.append(("train", family, horizon, generator.count, seed))
        if held_out.seeds:
            cells.append(("held_out", family, horizon, held_out.seeds, seed + HELD_OUT_SEED_OFFSET))
    if held_out.family:
        for j, horizon in enumerate(generator.horizons):
            seed = generator.seed + 2 * HELD_OUT_SEED_OFFSET + 1000 * j
            cells.append(("family", held_out.family, horizon, max(held_out.seeds, 1), seed))
    return cells


def synthesis_stage_start(ctx: Context) -> tuple[list[int], dict]:
    recipe = ctx.recipe
    resolved = recipe_resolve(project=ctx.project, recipe=recipe)
    jobs, outputs = [], {"synthesis": [], "roles": {}}
    for role, family, horizon, count, seed in _cells(recipe):
        synthesis = synthesis_start(
            project=ctx.project,
            user=ctx.user,
            capabilities=resolved["capabilities"],
            count=count,
            generator=Generator.LLM if recipe.generator.kind == "llm" else Generator.TEMPLATE,
            endpoint=resolved["endpoints"].get("generator.endpoint"),
            tasks_per_environment=recipe.generator.tasks_per_environment,
            horizon=horizon,
            family=family,
            seed=seed,
            enqueue=not ctx.inline,
        )
        jobs.append(synthesis.job_id)
        outputs["synthesis"].append(synthesis.pk)
        outputs["roles"][str(synthesis.pk)] = role
    return jobs, outputs


def synthesis_stage_run(stage: ExperimentStage) -> None:
    for synthesis in SynthesisJob.objects.filter(pk__in=stage.outputs["synthesis"]):
        synthesis_run_inline(synthesis=synthesis)


def synthesis_stage_collect(stage: ExperimentStage) -> dict:
    """The environments each role's jobs made (slots that failed validation made none)."""
    made = {"train": [], "held_out": [], "family": []}
    horizons = {}
    slots = SynthesisSlot.objects.filter(
        synthesis_id__in=stage.outputs["synthesis"], environment__isnull=False
    ).order_by("synthesis_id", "index")
    for synthesis_id, environment_id, horizon in slots.values_list(
        "synthesis_id", "environment_id", "synthesis__horizon"
    ):
        made[stage.outputs["roles"][str(synthesis_id)]].append(environment_id)
        horizons[str(environment_id)] = horizon
    if not made["train"] or not (made["held_out"] or made["family"]):
        raise ValueError("Synthesis made no valid train or no valid held-out environment.")
    return {f"{role}_environments": ids for role, ids in made.items()} | {"horizons": horizons}


# ----------------------------------------------------------------------------- runs


def _endpoint(ctx: Context, path: str):
    return recipe_resolve(project=ctx.project, recipe=ctx.recipe)["endpoints"].get(path)


def _batch(ctx: Context, *, name, role, endpoint, environments, split, trials) -> RunBatch:
    return run_batch_create(
        project=ctx.project,
        user=ctx.user,
        name=f"{ctx.experiment.name} · {name}"[:200],
        policy_kind=PolicyKind.ENDPOINT if endpoint else PolicyKind.ORACLE,
        endpoint=endpoint,
        role=role,
        selection=TaskSelection(environments=tuple(environments), split=split),
        settings=BatchSettings(trials=trials, concurrency=1),
        executor=Executor.INLINE if ctx.inline else Executor.CELERY,
    )


def teacher_stage_start(ctx: Context) -> tuple[list[int], dict]:
    batch = _batch(
        ctx,
        name="teacher",
        role=RunRole.TEACHER,
        endpoint=_endpoint(ctx, "teacher.endpoint"),
        environments=train_environments(ctx),
        split="train",
        trials=1,
    )
    return [batch.job_id], {"batch": batch.pk}


def batch_stage_run(stage: ExperimentStage) -> None:
    run_batch_execute_inline(batch=RunBatch.objects.get(pk=stage.outputs["batch"]))


def train_environments(ctx: Context) -> list[int]:
    return ctx.output(Stage.SYNTHESIS, "train_environments")


def held_out_environments(ctx: Context) -> list[int]:
    return [
        *ctx.output(Stage.SYNTHESIS, "held_out_environments"),
        *ctx.output(Stage.SYNTHESIS, "family_environments"),
    ]


def student_stage_start(ctx: Context, *, name: str, endpoint) -> tuple[list[int], dict]:
    """The student batch on every held-out task (both splits: no held-out task is trained
    on), k trials each, against ``endpoint``."""
    batch = _batch(
        ctx,
        name=name,
        role=RunRole.STUDENT,
        endpoint=endpoint,
        environments=held_out_environments(ctx),
        split="",
        trials=ctx.recipe.k,
    )
    return [batch.job_id], {"batch": batch.pk, "endpoint": endpoint.pk if endpoint else None}


# ----------------------------------------------------------------------------- curation


def curation_stage_settle(ctx: Context) -> dict:
    """Apply the review policy to the teacher's demonstrations; the human queue waits until
    none of them is pending and at least one is approved."""
    batch = RunBatch.objects.get(pk=ctx.output(Stage.TEACHER, "batch"))
    policy = ctx.recipe.review
    mine = Demonstration.objects.filter(run__batch=batch, split="train")
    if policy != ReviewPolicy.HUMAN:
        approved = demonstrations_approve_by_policy(project=ctx.project, policy=policy, batch=batch)
        return {"approved": approved, "policy": f"policy:{policy}"}
    if mine.filter(status=DemonstrationStatus.PENDING).exists():
        raise StageWaiting("Review the teacher's demonstrations in the queue.")
    approved = mine.filter(status=DemonstrationStatus.APPROVED).count()
    return {"approved": approved, "policy": "human"}


# ----------------------------------------------------------------------------- dataset


def dataset_stage_start(ctx: Context) -> tuple[list[int], dict]:
    recipe = ctx.recipe
    dataset = dataset_create(
        project=ctx.project,
        name=f"{ctx.experiment.name} #{ctx.experiment.pk}"[:200],
        description="The approved teacher demonstrations of an experiment's train tasks.",
        user=ctx.user,
    )
    version = dataset_version_create(
        dataset=dataset,
        user=ctx.user,
        filters=VersionFilter(
            environments=tuple(ctx.output(Stage.SYNTHESIS, "train_environments"))
        ),
        seed=recipe.dataset.seed,
        validation_fraction=recipe.dataset.validation_fraction,
        enqueue=not ctx.inline,
    )
    return [version.job_id], {"dataset": dataset.pk, "dataset_version": version.pk}


def job_stage_run(stage: ExperimentStage, runner) -> None:
    for job_id in stage.job_ids:
        runner(job_id)


# ----------------------------------------------------------------------------- training


def sft_stage_start(ctx: Context) -> tuple[list[int], dict]:
    sft = ctx.recipe.sft
    training_job = training_job_create(
        project=ctx.project,
        user=ctx.user,
        dataset_version=DatasetVersion.objects.select_related("dataset").get(
            pk=ctx.output(Stage.DATASET, "dataset_version")
        ),
        backend=Backend.LOCAL,
        base_model=sft.base_model,
        preset=sft.preset,
        hyperparameters=sft.hyperparameters,
        name=f"{ctx.experiment.name} · SFT"[:200],
        enqueue=not ctx.inline,
    )
    return [training_job.job_id], {"training_job": training_job.pk}


def spread(ids: list[int], limit: int) -> list[int]:
    """At most ``limit`` of ``ids``, evenly spaced: the train environments come cell by cell,
    so every family keeps its share."""
    if len(ids) <= limit:
        return list(ids)
    return [ids[i * len(ids) // limit] for i in range(limit)]


def grpo_stage_start(ctx: Context) -> tuple[list[int], dict]:
    """GRPO on the train environments (an even spread of at most one job's
    ``MAX_ENVIRONMENTS``), from the SFT job's checkpoint (the SFT and base servers are
    stopped first: their evaluations are done, and training wants the cores)."""
    serve_stage_stop(ctx.stages[Stage.SERVE_SFT])
    grpo = ctx.recipe.grpo
    checkpoint = TrainedModel.objects.get(training_job_id=ctx.output(Stage.SFT, "training_job"))
    training_job = training_job_create(
        project=ctx.project,
        user=ctx.user,
        method=TrainingMethod.GRPO,
        backend=Backend.LOCAL,
        base_model=grpo.base_model or checkpoint.path,
        preset=grpo.preset,
        hyperparameters=grpo.hyperparameters,
        environments=list(
            ctx.project.environments.filter(
                pk__in=spread(train_environments(ctx), MAX_GRPO_ENVIRONMENTS)
            )
        ),
        task_split="train",
        name=f"{ctx.experiment.name} · GRPO"[:200],
        enqueue=not ctx.inline,
    )
    return [training_job.job_id], {"training_job": training_job.pk}


def training_stage_collect(stage: ExperimentStage) -> dict:
    trained = TrainedModel.objects.filter(
        training_job=TrainingJob.objects.get(pk=stage.outputs["training_job"])
    ).first()
    if trained is None:
        raise ValueError("The training job registered no model.")
    return {"trained_model": trained.pk}


def training_stage_run(stage: ExperimentStage) -> None:
    job_stage_run(stage, training_job_execute)


def dataset_stage_run(stage: ExperimentStage) -> None:
    job_stage_run(stage, dataset_version_build_job)


# ----------------------------------------------------------------------------- serving

SERVERS = ("model_server", "base_server")  # the outputs of a serve stage naming its servers


def serve_stage_start(ctx: Context, after: str) -> tuple[list[int], dict]:
    """Serve the model ``after`` trained; after SFT, also its base model (unless the recipe
    names the base's endpoint), so the before/after compares two served models alike."""
    trained = TrainedModel.objects.select_related("training_job").get(
        pk=ctx.output(after, "trained_model")
    )
    servers = {
        "model_server": model_server_start(
            project=ctx.project, user=ctx.user, trained_model=trained
        )
    }
    if after == Stage.SFT and not ctx.recipe.student_endpoint:
        servers["base_server"] = model_server_start(
            project=ctx.project, user=ctx.user, model_path=trained_model_base(trained)
        )
    return [server.job_id for server in servers.values()], {
        "trained_model": trained.pk,
        **{key: server.pk for key, server in servers.items()},
    }


def _servers(stage: ExperimentStage) -> list[ModelServer]:
    ids = [stage.outputs[key] for key in SERVERS if stage.outputs.get(key)]
    return list(ModelServer.objects.filter(pk__in=ids).select_related("job"))


def serve_stage_run(stage: ExperimentStage) -> None:
    """Inline: work each server in a thread of this process, and wait until it answers."""
    for server in _servers(stage):
        if server.job.status == JobStatus.PENDING:
            model_server_run_in_thread(server=server)
    for server in _servers(stage):
        model_server_wait_ready(server=server, timeout_s=settings.SERVING_START_TIMEOUT_S)


def serve_stage_state(stage: ExperimentStage) -> tuple[str, str]:
    """A serve stage is done once every server answers (its jobs keep running after)."""
    servers = _servers(stage)
    ended = [s for s in servers if not s.job.is_active]
    if ended:
        return "failed", f"{ended[0].job.title}: {ended[0].job.message or ended[0].job.status}"
    if all(model_server_ready(server=server) for server in servers):
        return "succeeded", ""
    return "active", ""


def serve_stage_collect(stage: ExperimentStage) -> dict:
    """The servers' endpoints, capped at the recipe's ``evaluation.max_tokens`` if it gives
    one (an untrained model babbles to the cap on every step)."""
    max_tokens = recipe_parse(stage.experiment.recipe).max_tokens
    endpoints = {
        "model_server": "endpoint",
        "base_server": "base_endpoint",
    }
    found = {}
    for key, output in endpoints.items():
        if stage.outputs.get(key):
            server = ModelServer.objects.select_related("endpoint").get(pk=stage.outputs[key])
            if max_tokens and server.endpoint.max_tokens != max_tokens:
                endpoint_update(endpoint=server.endpoint, max_tokens=max_tokens)
            found[output] = server.endpoint_id
    return found


def serve_stage_stop(stage: ExperimentStage) -> None:
    """Stop the stage's servers that still run (their endpoints go with them)."""
    for server in _servers(stage):
        if server.job.is_active:
            model_server_stop(server=server)


def base_endpoint(ctx: Context):
    """The base model's endpoint: the recipe's ``student_endpoint``, else the base model
    served beside the SFT model."""
    endpoint = _endpoint(ctx, "student_endpoint")
    if endpoint is not None:
        return endpoint
    return ctx.project.model_endpoints.get(pk=ctx.output(Stage.SERVE_SFT, "base_endpoint"))
