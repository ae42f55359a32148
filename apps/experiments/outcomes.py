"""An experiment's results read from its stages' runs and training metrics: the outcomes
of each arm's student batch on the held-out tasks (for ``results.results_table``), and the
SFT loss and GRPO reward / pass-rate curves."""

from apps.experiments.models import Experiment, Stage
from apps.experiments.results import Outcome, results_table
from apps.runs.models import Run, RunStatus
from apps.training.models import TrainingJob
from apps.training.selectors import loss_series, rl_series

ARM_STAGES = {"base": Stage.EVAL_BASE, "sft": Stage.EVAL_SFT, "grpo": Stage.EVAL_GRPO}


def _outputs(experiment: Experiment) -> dict[str, dict]:
    return {stage.stage: stage.outputs for stage in experiment.stages.all()}


def arm_outcomes(experiment: Experiment) -> dict[str, list[Outcome]]:
    """Each arm whose student batch finished: its graded runs as outcomes (a task's
    capabilities, its environment's horizon, and whether it is of the held-out family)."""
    outputs = _outputs(experiment)
    synthesis = outputs.get(Stage.SYNTHESIS, {})
    family = set(synthesis.get("family_environments", []))
    horizons = synthesis.get("horizons", {})
    arms = {}
    for arm, stage in ARM_STAGES.items():
        batch = outputs.get(stage, {}).get("batch")
        if batch is None:
            continue
        runs = (
            Run.objects.filter(batch_id=batch, status=RunStatus.SUCCEEDED)
            .prefetch_related("task__capabilities")
            .order_by("id")
        )
        arms[arm] = [
            Outcome(
                run_id=run.pk,
                task=run.task_ref,
                score=float(run.score or 0.0),
                passed=bool(run.passed),
                strict=bool(run.strict),
                capabilities=tuple(c.slug for c in run.task.capabilities.all()) if run.task else (),
                horizon=horizons.get(str(run.environment_id), ""),
                out_of_distribution=run.environment_id in family,
            )
            for run in runs
        ]
    return arms


def experiment_results(experiment: Experiment) -> dict:
    """The results table (``results.results_table``, seeded by the recipe's dataset seed)."""
    return results_table(
        arm_outcomes(experiment),
        k=experiment.recipe["evaluation"]["k"],
        seed=experiment.recipe["dataset"]["seed"],
    )


def experiment_curves(experiment: Experiment) -> dict:
    """``{"sft_loss": [(step, loss, eval_loss)], "grpo": [{"step", "reward", …}]}``."""
    outputs = _outputs(experiment)
    jobs = {
        stage: TrainingJob.objects.filter(pk=outputs.get(stage, {}).get("training_job")).first()
        for stage in (Stage.SFT, Stage.GRPO)
    }
    sft, grpo = jobs[Stage.SFT], jobs[Stage.GRPO]
    return {
        "sft_loss": loss_series(training_jobs=[sft])[sft.pk] if sft else [],
        "grpo": rl_series(training_jobs=[grpo])[grpo.pk] if grpo else [],
    }
