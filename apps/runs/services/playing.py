"""Play one claimed run through the engine's runner: its policy (the oracle or a model
endpoint), simulated user and judge, a look for cancellation before every model request,
and the transcript stored at turn ends for the run page. ``execution`` claims, closes and
moves the batch along around it."""

from __future__ import annotations

import time

from django.conf import settings

from apps.core.leases import Heartbeat
from apps.core.models import Job
from apps.core.timings import timed
from apps.environments.models import Environment
from apps.llm.call_log import CallLogBuffer
from apps.llm.judge import LLMJudge
from apps.runs.agent import LLMAgentPolicy, LLMUsage, LLMUserSimulator
from apps.runs.models import PolicyKind, Run, UserSide
from apps.runs.services import claims
from apps.runs.services.loaded_specs import LOADED_SPECS
from coworkenv_engine.policies import OraclePolicy
from coworkenv_engine.problems import SpecError
from coworkenv_engine.runner import run_task
from coworkenv_engine.simulator import Limits


class RunCancelled(Exception):
    """The batch was cancelled while this run was playing."""


class RunUnavailable(Exception):
    """The run cannot be played at all (its task is gone, its spec no longer loads):
    re-running would not help."""


class _CancelCheck:
    """Called before every model request: stops the run if another worker took the run over
    (the heartbeat thread found its claim gone) or its batch was cancelled. The batch is
    looked up at most every ``EVERY_S`` seconds, not once per step; the first look is at the
    job row loaded with the claim a moment ago, without a query."""

    EVERY_S = 1.0

    def __init__(self, run: Run, heartbeat: Heartbeat):
        self.run = run
        self.heartbeat = heartbeat
        self._checked = time.monotonic()
        self._first = True

    def __call__(self) -> None:
        if self.heartbeat.lost:
            raise RunCancelled
        if self._first:
            self._first = False
            if self.run.batch.job.cancel_requested:
                raise RunCancelled
        now = time.monotonic()
        if now - self._checked < self.EVERY_S:
            return
        self._checked = now
        with timed("cancel_check"):
            cancelled = Job.objects.filter(pk=self.run.batch.job_id, cancel_requested=True)
            if cancelled.exists():
                raise RunCancelled


class _TurnCheckpoints:
    """The policy, and at each turn's end the transcript so far stored on the run — at most
    one write per turn, and only once the run has played ``RUN_CHECKPOINT_EVERY_S`` since
    it started or since the last one (short runs write nothing until their outcome).

    A checkpoint is for the run page and progress, not a point to resume from: a run taken
    over after its worker died plays again from its start (its claim drops the checkpoint),
    because the model's answers, the simulated user's and the context manager's summaries
    of the lost part cannot be had again (sampled, not recorded: the call log of a killed
    worker's run is in its memory), and a trajectory spliced from two samplings would not
    be one episode of the policy. Replays are exact on the environment's side (the engine
    is deterministic in the seed and the calls), so the replayed run is a fresh, whole
    episode, graded once."""

    def __init__(self, policy, run: Run):
        self.policy = policy
        self.name = policy.name
        self.run = run
        self.turn = 0
        self.every_s = settings.RUN_CHECKPOINT_EVERY_S
        self.last = time.monotonic()
        self.written = 0

    def act(self, view):
        if view.turn > self.turn and view.round == 0:
            self.turn = view.turn
            now = time.monotonic()
            if now - self.last >= self.every_s:
                self.last = now
                self._store(view.messages[:-1])  # through the end of the turn before
        return self.policy.act(view)

    def _store(self, transcript: list[dict]) -> None:
        with timed("checkpoint"):
            claims.claim_of(self.run).renew(transcript=transcript)
        self.written += 1


def _still_there(endpoint, which: str):
    """The batch's ``which`` endpoint, unless it was deleted since the batch was made."""
    if endpoint is None:
        raise RunUnavailable(f"The batch's {which} endpoint was deleted.")
    return endpoint


def play_run(
    run: Run, usage: LLMUsage, heartbeat: Heartbeat, call_log: CallLogBuffer | None = None
) -> dict:
    batch = run.batch
    task = run.task
    if task is None:
        raise RunUnavailable(
            "The task was deleted (or replaced by a whole-spec edit) after the batch was made."
        )
    try:
        spec, spec_hash, revision = LOADED_SPECS.get(task.environment, run.batch_id)
    except Environment.DoesNotExist:
        raise RunUnavailable("The task's environment was deleted.") from None
    except SpecError as exc:
        first = exc.problems[0].message if exc.problems else str(exc)
        raise RunUnavailable(f"The environment's spec does not load: {first}") from None
    before_call = _CancelCheck(run, heartbeat)
    model_calls = {"job": batch.job, "usage": usage, "before_call": before_call}
    if batch.policy_kind == PolicyKind.ORACLE:
        policy = OraclePolicy()
    else:
        policy = LLMAgentPolicy(
            endpoint=_still_there(batch.endpoint, "model"),
            temperature=batch.temperature,
            call_log=call_log,
            **model_calls,
        )
    user_turn = None
    if batch.user_side == UserSide.SIMULATOR:
        user_turn = LLMUserSimulator(
            endpoint=_still_there(batch.simulator_endpoint, "user-simulator"),
            call_log=call_log,
            **model_calls,
        )
    judge = None
    if batch.judge_endpoint is not None or batch.judge_model:
        judge = LLMJudge(
            endpoint=_still_there(batch.judge_endpoint, "judge"),
            project_id=batch.project_id,
            job=batch.job,
            on_result=usage.add,
            before_call=before_call,
        )
    result = run_task(
        spec,
        task.key,
        _TurnCheckpoints(policy, run),
        judge=judge,
        seed=run.seed,
        faults=batch.faults,
        limits=Limits(
            max_calls=batch.max_tool_calls, max_rounds_per_turn=batch.max_rounds_per_turn
        ),
        user_turn=user_turn,
    )
    if judge is not None and judge.interrupted is not None:
        raise judge.interrupted  # the batch was cancelled while the judge was about to ask
    if judge is not None and judge.outage is not None:
        # The judge could not score (after the client's retries): the grading is not the
        # agent's, so the run errors and is re-run like any other errored trial.
        raise judge.outage
    data = result.to_dict()
    grading = data["grading"]
    return {
        "policy_name": result.policy,
        "environment_revision": revision,
        "spec_hash": spec_hash,
        "transcript": data["transcript"],
        "tools": data["tools"],
        "audit_log": data["audit_log"],
        "exogenous_log": data["exogenous_log"],
        "final_state_hash": result.state_hash,
        "verdicts": grading["verdicts"],
        "scoring": grading["config"],
        "completion": grading["completion"],
        "safety": grading["safety"],
        "robustness": grading["robustness"],
        "score": grading["score"],
        "passed": grading["passed"],
        "strict": grading["strict"],
        "stop_reason": result.stop_reason,
        "tool_calls": len(result.audit_log),
        "tool_errors": len(result.tool_errors),
    }
