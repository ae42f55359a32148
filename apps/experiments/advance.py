"""Advancing an experiment: each call walks the stages in order, collects the ones whose
jobs have finished, starts the next, and stops at the first that is still working, waits
for people or failed. Idempotent: a stage that succeeded is never redone, a started stage's
jobs are recorded in the transaction that creates them, so advancing again after a kill at
any point goes on from what each stage produced."""

from collections.abc import Callable
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from apps.core.exceptions import ApplicationError
from apps.core.models import Job, JobStatus
from apps.experiments import stages as s
from apps.experiments.models import (
    Experiment,
    ExperimentStage,
    ExperimentStatus,
    Stage,
    StageStatus,
)

FAILED_JOB_STATUSES = (JobStatus.FAILED, JobStatus.CANCELLED)


@dataclass(frozen=True)
class Step:
    start: Callable | None  # ctx -> (job ids, outputs); None: a stage settled in place
    run: Callable | None = None  # stage -> None, works its jobs here (inline)
    collect: Callable | None = None  # stage -> outputs read from its finished jobs
    settle: Callable | None = None  # ctx -> outputs, or StageWaiting
    # stage -> (succeeded | failed | active, message); default: its jobs' states
    state: Callable | None = None


def _serve(after: str) -> Step:
    return Step(
        start=lambda ctx: s.serve_stage_start(ctx, after),
        run=s.serve_stage_run,
        collect=s.serve_stage_collect,
        state=s.serve_stage_state,
    )


def _student(name: str, endpoint_of: Callable) -> Step:
    return Step(
        start=lambda ctx: s.student_stage_start(ctx, name=name, endpoint=endpoint_of(ctx)),
        run=s.batch_stage_run,
    )


def _served(after: str) -> Callable:
    """The endpoint the serve stage after ``after`` made available."""

    def endpoint_of(ctx: s.Context):
        return ctx.project.model_endpoints.get(pk=ctx.output(after, "endpoint"))

    return endpoint_of


STEPS = {
    Stage.SYNTHESIS: Step(
        start=s.synthesis_stage_start,
        run=s.synthesis_stage_run,
        collect=s.synthesis_stage_collect,
    ),
    Stage.TEACHER: Step(start=s.teacher_stage_start, run=s.batch_stage_run),
    Stage.CURATION: Step(start=None, settle=s.curation_stage_settle),
    Stage.DATASET: Step(start=s.dataset_stage_start, run=s.dataset_stage_run),
    Stage.SFT: Step(
        start=s.sft_stage_start, run=s.training_stage_run, collect=s.training_stage_collect
    ),
    Stage.SERVE_SFT: _serve(Stage.SFT),
    Stage.EVAL_BASE: _student("base", lambda ctx: s.base_endpoint(ctx)),
    Stage.EVAL_SFT: _student("after SFT", _served(Stage.SERVE_SFT)),
    Stage.GRPO: Step(
        start=s.grpo_stage_start, run=s.training_stage_run, collect=s.training_stage_collect
    ),
    Stage.SERVE_GRPO: _serve(Stage.GRPO),
    Stage.EVAL_GRPO: _student("after GRPO", _served(Stage.SERVE_GRPO)),
}


def _jobs_state(job_ids: list[int]) -> tuple[str, str]:
    """(succeeded | failed | active, the message of a failed job)."""
    jobs = list(Job.objects.filter(pk__in=job_ids).only("status", "message", "title"))
    failed = [j for j in jobs if j.status in FAILED_JOB_STATUSES]
    if failed:
        return "failed", f"{failed[0].title}: {failed[0].message or failed[0].status}"
    if any(j.is_active for j in jobs):
        return "active", ""
    return "succeeded", ""


def _save(stage: ExperimentStage, **fields) -> None:
    for name, value in fields.items():
        setattr(stage, name, value)
    ExperimentStage.objects.filter(pk=stage.pk).update(**fields)


def _start(ctx: s.Context, stage: ExperimentStage, step: Step) -> None:
    with transaction.atomic():
        locked = ExperimentStage.objects.select_for_update().get(pk=stage.pk)
        if locked.job_ids:  # another advance started it meanwhile
            stage.job_ids, stage.outputs = locked.job_ids, locked.outputs
            return
        job_ids, outputs = step.start(ctx)
        _save(
            stage,
            job_ids=job_ids,
            outputs={**stage.outputs, **outputs},
            status=StageStatus.RUNNING,
            started_at=timezone.now(),
        )


def _finish(stage: ExperimentStage, step: Step) -> None:
    outputs = {**stage.outputs, **(step.collect(stage) if step.collect else {})}
    _save(stage, outputs=outputs, status=StageStatus.SUCCEEDED, finished_at=timezone.now())


def _advance_stage(ctx: s.Context, stage: ExperimentStage, step: Step) -> str:
    """Move one stage on as far as it goes now; its status afterwards."""
    if step.start is None:
        try:
            outputs = step.settle(ctx)
        except s.StageWaiting as waiting:
            _save(stage, status=StageStatus.WAITING, message=str(waiting))
            return StageStatus.WAITING
        _save(stage, outputs=outputs, message="", started_at=stage.started_at or timezone.now())
        _finish(stage, Step(start=None))
        return StageStatus.SUCCEEDED
    if not stage.job_ids:
        _start(ctx, stage, step)
    if ctx.inline and step.run is not None:
        step.run(stage)
    state, message = step.state(stage) if step.state else _jobs_state(stage.job_ids)
    if state == "failed":
        _save(stage, status=StageStatus.FAILED, message=message, finished_at=timezone.now())
        return StageStatus.FAILED
    if state == "active":
        return StageStatus.RUNNING
    _finish(stage, step)
    return StageStatus.SUCCEEDED


def experiment_advance(*, experiment_id: int, inline: bool = False) -> Experiment:
    """Advance the experiment as far as it goes now (``inline``: working each stage's jobs
    in this process instead of the workers'). A stage's error fails it, with the message."""
    experiment = Experiment.objects.select_related("project", "created_by").get(pk=experiment_id)
    if experiment.status in (ExperimentStatus.SUCCEEDED, ExperimentStatus.FAILED):
        return experiment
    records = {r.stage: r for r in experiment.stages.order_by("position")}
    ctx = s.Context(experiment=experiment, stages=records, inline=inline)
    outcome, message = ExperimentStatus.SUCCEEDED, ""
    for name, stage in records.items():
        if stage.status == StageStatus.SUCCEEDED:
            continue
        try:
            status = _advance_stage(ctx, stage, STEPS[name])
        except (ApplicationError, ValueError) as exc:
            text = exc.message if isinstance(exc, ApplicationError) else str(exc)
            _save(stage, status=StageStatus.FAILED, message=text, finished_at=timezone.now())
            status = StageStatus.FAILED
        if status != StageStatus.SUCCEEDED:
            outcome = {
                StageStatus.RUNNING: ExperimentStatus.RUNNING,
                StageStatus.WAITING: ExperimentStatus.WAITING,
                StageStatus.FAILED: ExperimentStatus.FAILED,
            }[status]
            message = f"{stage.get_stage_display()}: {stage.message}" if stage.message else ""
            break
    if outcome in (ExperimentStatus.SUCCEEDED, ExperimentStatus.FAILED):
        for name in (Stage.SERVE_SFT, Stage.SERVE_GRPO):  # nothing left to ask them
            s.serve_stage_stop(records[name])
    Experiment.objects.filter(pk=experiment.pk).update(
        status=outcome, message=message, updated_at=timezone.now()
    )
    experiment.status, experiment.message = outcome, message
    return experiment
