"""Re-grading a demonstration's transcript: replay it against its environment's current
spec (``runner.replay_transcript``) and grade what happens."""

from __future__ import annotations

from dataclasses import dataclass

from django.utils import timezone

from apps.curation.models import Demonstration
from apps.environments.specs import environment_spec
from coworkenv_engine import spec as engine_spec
from coworkenv_engine.problems import SpecError
from coworkenv_engine.runner import replay_transcript


class NotGradable(Exception):
    """The transcript cannot be replayed: its task or environment is gone, or the
    environment's spec no longer loads."""


@dataclass
class Regrade:
    transcript: list
    tools: list
    audit_log: list
    exogenous_log: list
    grading: dict
    score: float
    passed: bool
    strict: bool
    environment_revision: int
    spec_hash: str


def load_environment_spec(environment):
    """(loaded spec, spec hash) of the environment's current revision."""
    document = environment_spec(environment)
    try:
        return engine_spec.load_spec(document), engine_spec.spec_hash(document)
    except SpecError as exc:
        first = exc.problems[0].message if exc.problems else str(exc)
        raise NotGradable(f"The environment's spec does not load: {first}") from None


def regrade_transcript(
    *,
    demonstration: Demonstration,
    transcript: list,
    loaded=None,
    seed: int | None = None,
    judge=None,
) -> Regrade:
    """Replay ``transcript`` for the demonstration's task on the environment as it is now.
    ``loaded`` is a ``load_environment_spec`` result to reuse across demonstrations.
    ``judge`` (an ``apps.llm.judge.LLMJudge``; never inside a transaction) scores judge
    graders, from its cache when the evidence is unchanged; without one they are skipped.
    A judge outage makes the transcript not gradable now, never failed."""
    environment = demonstration.environment
    if environment is None:
        raise NotGradable(
            "The environment was deleted: there is nothing to replay this transcript against."
        )
    # By key: a whole-spec edit recreates the task rows, but the task lives on under its key.
    key = demonstration.task.key if demonstration.task is not None else demonstration.task_key
    spec, spec_hash = loaded or load_environment_spec(environment)
    try:
        spec.task(key)
    except KeyError:
        raise NotGradable(
            f"The environment no longer has the task “{key}” (deleted or renamed)."
        ) from None
    run = demonstration.run
    result = replay_transcript(
        spec,
        key,
        transcript,
        seed=seed if seed is not None else (run.seed if run else 0),
        judge=judge,
    )
    if judge is not None and judge.outage is not None:
        raise NotGradable(f"The judge could not score it: {judge.outage.message}")
    grading = result.grading.to_dict()
    grading["divergent_calls"] = result.divergent_calls
    grading["environment_revision"] = environment.revision
    grading["graded_at"] = timezone.now().isoformat()
    return Regrade(
        transcript=result.transcript,
        tools=result.tools,
        audit_log=result.audit_log,
        exogenous_log=result.to_dict()["exogenous_log"],
        grading=grading,
        score=result.grading.score,
        passed=result.grading.passed,
        strict=result.grading.strict,
        environment_revision=environment.revision,
        spec_hash=spec_hash,
    )


def flip_label(before: bool | None, after: bool | None) -> str:
    """ "passed→failed" / "failed→passed" when the outcome flipped, else ""."""
    if before is None or after is None or before == after:
        return ""
    return "passed→failed" if before else "failed→passed"
