"""Targeted synthesis: a second round of an experiment whose capability mix is the first
round's failures, lowest pass^k first (the template generator gives task i capability
i mod n, so the first capabilities get the most tasks), and the report of whether those
capabilities improved."""

from apps.core.exceptions import ApplicationError
from apps.experiments.models import Experiment, ExperimentStatus
from apps.experiments.outcomes import experiment_results
from apps.experiments.results import round_comparison, weaknesses
from apps.experiments.services import experiment_create


def weak_capabilities(experiment: Experiment) -> list[str]:
    """The capabilities whose pass^k in the latest arm is below 1, weakest first."""
    return [slug for slug, value in weaknesses(experiment_results(experiment)) if value < 1]


def experiment_synthesize_for_weaknesses(*, experiment: Experiment, user) -> Experiment:
    """Start the second round: the first round's recipe with its capabilities replaced by
    the weak ones, weakest first, and a name saying which round it is."""
    if experiment.status != ExperimentStatus.SUCCEEDED:
        raise ApplicationError("Synthesize for weaknesses once the experiment has succeeded.")
    weak = weak_capabilities(experiment)
    if not weak:
        raise ApplicationError("Every capability reached pass^k = 1: no weakness to target.")
    round_number = _round(experiment) + 1
    recipe = {**experiment.recipe, "capabilities": weak}
    recipe["name"] = f"{_base_name(experiment)} · round {round_number}"[:200]
    return experiment_create(
        project=experiment.project, user=user, recipe=recipe, previous=experiment
    )


def _round(experiment: Experiment) -> int:
    rounds = 1
    while experiment.previous_id is not None:
        experiment = experiment.previous
        rounds += 1
    return rounds


def _base_name(experiment: Experiment) -> str:
    return experiment.name.split(" · round ")[0]


def targeted_report(experiment: Experiment) -> list[dict]:
    """For a second round: each capability it targeted, its pass^k in the previous round's
    latest arm and in this one's, and whether it improved; [] for a first round."""
    if experiment.previous is None:
        return []
    return round_comparison(
        experiment_results(experiment.previous),
        experiment_results(experiment),
        list(experiment.recipe["capabilities"]),
    )
