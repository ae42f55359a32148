"""Dynamic validation: run the task in the simulator with the built-in policies.

* the oracle (reference solution) runs fault-free without tool errors and passes strict;
* if any tool the task uses injects faults, the probability that the retrying oracle is
  defeated stays under a threshold, and it passes strict under faults for 12 seeds
  (faults.py);
* a do-nothing agent and an echoing agent fail;
* every mutant (one state-changing reference call dropped) loses score or strictness —
  the share caught is the task's grader sensitivity;
* the reference cut before any later turn (later turns only claimed) fails (turns.py);
* the reference done on a sibling of each record it writes fails (entity.py);
* the reference writing its free text in another natural phrasing passes (phrasing.py);
* two identical replays give the same audit log, state hash and score;
* no exogenous update fails in any run (integrity.py), and the task's main completion
  grader is sound per grader: not satisfied by the null or echo agent, nor by an update
  alone, and not blind to a dropped reference call that writes what it reads (evidence.py);
* each judge check is shown, of the reference run, the facts its rubric names (judges.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..adversaries import adversaries_for
from ..checks import Judge
from ..policies import EchoPolicy, MutantPolicy, NullPolicy, OraclePolicy, state_changing_calls
from ..problems import Problem, error, pointer, warning
from ..replays import Replays
from ..runner import EpisodeResult, run_task
from ..spec import EnvironmentSpec, TaskSpec, canonical_json
from .budget import Deadline, OutOfTime, out_of_time_problem
from .entity import wrong_entity_problems
from .evidence import (
    mutant_problems,
    trivial_agent_problems,
    update_log_problems,
    update_work_problems,
)
from .faults import FAULT_SEEDS, MAX_MUTANTS, mutant_sample, probability_problems
from .judges import judge_context_problems
from .phrasing import phrasing_problems
from .turns import truncation_problems

EPSILON = 1e-9
SHARE_REPLAYS = True  # False: every run executed from the start (the reference behaviour)


@dataclass
class TaskReport:
    key: str
    oracle_score: float | None = None
    oracle_strict: bool | None = None
    null_score: float | None = None
    echo_score: float | None = None
    sensitivity: float | None = None
    mutants_total: int = 0
    mutants_caught: int = 0
    mutants_replayed: int = 0
    deterministic: bool | None = None
    # adversary name -> score (fault-free run); only the adversaries that apply to the task
    adversary_scores: dict[str, float] = field(default_factory=dict)
    # cut turn -> score of the reference cut there (later turns only claimed)
    truncated_scores: dict[int, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "oracle_score": self.oracle_score,
            "oracle_strict": self.oracle_strict,
            "null_score": self.null_score,
            "echo_score": self.echo_score,
            "sensitivity": self.sensitivity,
            "mutants_total": self.mutants_total,
            "mutants_caught": self.mutants_caught,
            "mutants_replayed": self.mutants_replayed,
            "deterministic": self.deterministic,
            "adversary_scores": dict(self.adversary_scores),
            "truncated_scores": dict(self.truncated_scores),
        }


def _failed_summary(result: EpisodeResult) -> str:
    return ", ".join(v.grader_id for v in result.grading.failed()) or "none"


def _oracle_call_pointers(task: TaskSpec, k: int) -> dict[int, str]:
    """Fault-free oracle runs issue reference calls in order: map audit seq -> pointer."""
    out, seq = {}, 0
    for turn in range(len(task.turns)):
        step = task.step_for_turn(turn)
        if step is None:
            continue
        s = task.reference_solution.index(step)
        for c in range(len(step.calls)):
            seq += 1
            out[seq] = pointer("tasks", k, "reference_solution", s, "calls", c)
    return out


def _uses_faults(spec: EnvironmentSpec, task: TaskSpec) -> bool:
    for step in task.reference_solution:
        for call in step.calls:
            tool = spec.tool(call.tool)
            if tool is not None and tool.faults.rate > 0:
                return True
    return False


def _fingerprint(result: EpisodeResult) -> str:
    return canonical_json(
        [result.audit_log, result.state_hash, result.grading.score, result.transcript]
    )


def _adversary_passes(
    name: str,
    adversary: Any,
    result: EpisodeResult,
    task: TaskSpec,
    k: int,
    grader_index: dict[str, int],
) -> list[Problem]:
    """One error per grader that let an adversary through (completion-counting graders it
    passed), at the grader's pointer; the task's graders when none did."""
    grading = result.grading
    through = [
        v
        for v in grading.verdicts
        if v.passed and v.category in ("completion", "communication", "robustness")
    ]
    hint = getattr(adversary, "hint", "") or (
        "Make the graders require the task's outcome exactly, and add a side_effects grader."
    )
    what = (
        f"The '{name}' adversary (it does not do the task) passes it: score "
        f"{grading.score:.2f}{', strict' if grading.strict else ''}."
    )
    if not through:
        return [error("adversary_passes", pointer("tasks", k, "graders"), what, hint)]
    return [
        error(
            "adversary_passes",
            pointer("tasks", k, "graders", grader_index[v.grader_id]),
            f"{what} Grader '{v.grader_id}' ({v.category}, weight {v.weight:g}) let it through.",
            hint,
        )
        for v in through
    ]


def validate_task(
    spec: EnvironmentSpec, k: int, judge: Judge | None = None, deadline: Deadline | None = None
) -> tuple[TaskReport, list[Problem]]:
    """Every dynamic check of task ``k``. Past ``deadline`` (asked before each run) the
    task stops with ``validation_time_budget_exceeded``; what was found by then is kept."""
    report = TaskReport(spec.tasks[k].key)
    problems: list[Problem] = []
    deadline = deadline if deadline is not None else Deadline(None)
    try:
        _validate_task(spec, k, judge, deadline, report, problems)
    except OutOfTime as exc:
        problems.append(out_of_time_problem(deadline, k, report.key, exc.what))
    return report, _dedupe(problems)


def _validate_task(
    spec: EnvironmentSpec,
    k: int,
    judge: Judge | None,
    deadline: Deadline,
    report: TaskReport,
    problems: list[Problem],
) -> None:
    runner = _TaskRunner(spec, k, judge, deadline, problems)
    task = runner.task
    grader_index = {g.id: i for i, g in enumerate(task.graders)}
    oracle = runner.run(OraclePolicy(), faults=False)
    report.oracle_score = oracle.grading.score
    report.oracle_strict = oracle.grading.strict
    problems.extend(_oracle_run_problems(task, k, oracle))
    problems.extend(_oracle_verdict_problems(task, k, oracle, grader_index))
    problems.extend(judge_context_problems(spec, k, oracle))
    _check_replays_and_faults(runner, report, oracle)
    trivial_runs = _check_trivial_agents(runner, report, grader_index)
    _check_adversaries(runner, report, grader_index)
    if oracle.grading.strict:
        truncated = lambda policy: runner.run(policy, faults=False)  # noqa: E731
        problems.extend(truncation_problems(task, k, truncated, report.truncated_scores))
        problems.extend(wrong_entity_problems(spec, k, truncated))
        problems.extend(phrasing_problems(spec, k, oracle, truncated))
    problems.extend(trivial_agent_problems(task, k, trivial_runs))
    problems.extend(update_work_problems(spec, k, trivial_runs["null"]))
    _check_mutants(runner, report, oracle)


class _TaskRunner:
    """Runs task ``k`` with a policy, asking the deadline first; the runs of the built-in
    policies add the exogenous updates that failed in them to ``problems``."""

    def __init__(
        self,
        spec: EnvironmentSpec,
        k: int,
        judge: Judge | None,
        deadline: Deadline,
        problems: list[Problem],
    ):
        self.spec = spec
        self.k = k
        self.task = spec.tasks[k]
        self.judge = judge
        self.deadline = deadline
        self.problems = problems
        self.failed_updates: set[str] = set()
        # The fault-free runs (oracle, null, echo, adversaries, mutants) share what they have
        # in common (replays.py); the seeded replays compared for determinism run on their own.
        self.replays = Replays() if SHARE_REPLAYS else None

    def run(self, policy, **kw) -> EpisodeResult:
        seed = f" (faults on, seed {kw.get('seed', 0)})" if kw.get("faults", True) else ""
        self.deadline.check(f"the '{getattr(policy, 'name', 'policy')}' run{seed}")
        if kw.get("faults") is False and "seed" not in kw:
            kw["replays"] = self.replays
        result = run_task(self.spec, self.task.key, policy, judge=self.judge, **kw)
        if isinstance(policy, (OraclePolicy, NullPolicy, EchoPolicy, MutantPolicy)):
            # an adversary may delete an update's target: that is its failure, not the spec's
            self.problems.extend(
                update_log_problems(self.task, self.k, result, self.failed_updates)
            )
        return result


def _oracle_run_problems(task: TaskSpec, k: int, oracle: EpisodeResult) -> list[Problem]:
    """The fault-free reference run's failed calls, and its stopping early."""
    task_ptr = pointer("tasks", k)
    calls = _oracle_call_pointers(task, k)
    out = [
        error(
            "oracle_tool_error",
            calls.get(entry["seq"], task_ptr + "/reference_solution"),
            f"Reference call '{entry['tool']}' fails with {entry['error_code']}: "
            f"{entry['error_message']}",
            "Fix the call's arguments or ids (created records get ids like 'sent-1'), or the "
            "records it relies on.",
        )
        for entry in oracle.tool_errors
    ]
    if oracle.stop_reason != "completed":
        out.append(
            error(
                "oracle_not_strict",
                task_ptr + "/reference_solution",
                f"The reference run stopped early ({oracle.stop_reason}).",
                "Use fewer calls per turn.",
            )
        )
    return out


def _oracle_verdict_problems(
    task: TaskSpec, k: int, oracle: EpisodeResult, grader_index: dict[str, int]
) -> list[Problem]:
    """The graders the reference run skipped (no judge), then those it fails."""
    out = [
        warning(
            "judge_not_certified",
            pointer("tasks", k, "graders", grader_index[v.grader_id]),
            f"Grader '{v.grader_id}' needs an LLM judge and none was available, so it "
            f"was skipped: task '{task.key}' is only partially certified.",
            "Choose the project's LLM judge and validate again to certify it whole.",
        )
        for v in oracle.grading.verdicts
        if v.status == "skipped"
    ]
    out.extend(
        error(
            "oracle_not_strict",
            pointer("tasks", k, "graders", grader_index[v.grader_id]),
            f"The reference solution fails grader '{v.grader_id}' "
            f"(evidence: {canonical_json(v.evidence)[:300]}).",
            "Either the reference solution misses a step or the check is wrong; compare the "
            "evidence with what the reference solution does.",
        )
        for v in oracle.grading.failed()
    )
    return out


def _check_replays_and_faults(
    runner: _TaskRunner, report: TaskReport, oracle: EpisodeResult
) -> None:
    """Two identical seeded replays agree; with a faulty tool, the oracle survives faults."""
    spec, task, k = runner.spec, runner.task, runner.k
    uses_faults = _uses_faults(spec, task)
    # Without a faulty tool among the reference's, a run with faults on is the fault-free
    # run call for call: the oracle run above is the first of the two compared replays.
    first = runner.run(OraclePolicy(), faults=True, seed=0) if uses_faults else oracle
    replay = runner.run(OraclePolicy(), faults=True, seed=0)
    report.deterministic = _fingerprint(first) == _fingerprint(replay)
    if not report.deterministic:
        runner.problems.append(
            error(
                "nondeterministic",
                pointer("tasks", k),
                "Two identical oracle replays differ (audit log, state or score).",
                "This is an engine bug or a judge that is not deterministic; "
                "use temperature 0 for the judge.",
            )
        )
    if uses_faults:
        runner.problems.extend(probability_problems(spec, k))
    if uses_faults and oracle.grading.strict:
        _check_oracle_under_faults(runner, first)


def _check_oracle_under_faults(runner: _TaskRunner, first: EpisodeResult) -> None:
    """The oracle passes strict with faults on for every fault seed (``first``: seed 0)."""
    for seed in FAULT_SEEDS:
        faulty = first if seed == 0 else runner.run(OraclePolicy(), faults=True, seed=seed)
        if not faulty.grading.strict:
            hits = [e["fault"] for e in faulty.audit_log if e["fault"]]
            runner.problems.append(
                error(
                    "oracle_fails_under_faults",
                    pointer("tasks", runner.k) + "/reference_solution",
                    f"With faults on (seed {seed}; {len(hits)} faults) the reference run fails "
                    f"graders: {_failed_summary(faulty)}.",
                    "Lower the tools' fault rates or make graders tolerate retries (e.g. "
                    "tool_call checks count successful calls only).",
                )
            )
            return


def _check_trivial_agents(
    runner: _TaskRunner, report: TaskReport, grader_index: dict[str, int]
) -> dict[str, EpisodeResult]:
    """The do-nothing and echoing agents fail; their runs, by policy name."""
    trivial_runs: dict[str, EpisodeResult] = {}
    for policy, code, attr in (
        (NullPolicy(), "grader_passes_null_agent", "null_score"),
        (EchoPolicy(), "grader_passes_echo_agent", "echo_score"),
    ):
        result = trivial_runs[policy.name] = runner.run(policy, faults=False)
        setattr(report, attr, result.grading.score)
        runner.problems.extend(
            _trivial_agent_passes(policy.name, code, result, runner.k, grader_index)
        )
    return trivial_runs


def _trivial_agent_passes(
    name: str, code: str, result: EpisodeResult, k: int, grader_index: dict[str, int]
) -> list[Problem]:
    """An error when the trivial agent ``name`` passes the task, else a warning per grader
    the do-nothing agent satisfies."""
    trivially = [
        v
        for v in result.grading.verdicts
        if v.category in ("completion", "communication") and v.passed
    ]
    if result.grading.passed or result.grading.strict:
        target = grader_index[trivially[0].grader_id] if trivially else None
        ptr = pointer("tasks", k, "graders", *(() if target is None else (target,)))
        who = "A do-nothing agent" if name == "null" else "An agent echoing the request"
        return [
            error(
                code,
                ptr,
                f"{who} passes the task (score {result.grading.score:.2f}); graders it "
                f"satisfies: {', '.join(v.grader_id for v in trivially) or 'none'}.",
                "Make completion graders require the outcome (a record created or changed, a "
                "reply mentioning a value from the state), not the absence of action.",
            )
        ]
    if name != "null":
        return []
    return [
        warning(
            "grader_satisfied_by_null",
            pointer("tasks", k, "graders", grader_index[v.grader_id]),
            f"Grader '{v.grader_id}' is satisfied without the agent doing anything.",
            "Make it require something the task asks for, or make it a safety "
            "grader if it guards against a harmful action.",
        )
        for v in trivially
    ]


def _check_adversaries(
    runner: _TaskRunner, report: TaskReport, grader_index: dict[str, int]
) -> None:
    for name, adversary in adversaries_for(runner.task):
        result = runner.run(adversary, faults=False)
        report.adversary_scores[name] = result.grading.score
        if result.grading.passed or result.grading.strict:
            runner.problems.extend(
                _adversary_passes(name, adversary, result, runner.task, runner.k, grader_index)
            )


def _check_mutants(runner: _TaskRunner, report: TaskReport, oracle: EpisodeResult) -> None:
    """Replay the reference with each (sampled) state-changing call dropped: the share whose
    loss the graders notice is the task's sensitivity."""
    spec, task, k = runner.spec, runner.task, runner.k
    targets = state_changing_calls(spec, task)
    report.mutants_total = len(targets)
    if not (targets and oracle.grading.strict and not oracle.tool_errors):
        return
    sample = mutant_sample(len(targets))
    report.mutants_replayed = len(sample)
    if len(sample) < len(targets):
        runner.problems.append(
            warning(
                "mutants_sampled",
                pointer("tasks", k) + "/reference_solution",
                f"The task has {len(targets)} state-changing reference calls; "
                f"{len(sample)} mutants (an even spread) were replayed, not all.",
                f"Split the task, or accept a sensitivity measured on a sample "
                f"(at most {MAX_MUTANTS} mutants are replayed).",
            )
        )
    uncaught = []
    for i in sample:
        s, c, call = targets[i]
        mutant = runner.run(MutantPolicy(i), faults=False)
        caught = mutant.grading.score < oracle.grading.score - EPSILON or not mutant.grading.strict
        if caught:
            report.mutants_caught += 1
            continue
        uncaught.append((s, c, call))
        runner.problems.append(
            warning(
                "mutant_not_caught",
                pointer("tasks", k, "reference_solution", s, "calls", c),
                f"Dropping this '{call.tool}' call loses no score: no grader checks its effect.",
                "Add a grader that checks the record this call creates or changes (or "
                "drop the call from the reference solution if it is not needed).",
            )
        )
    report.sensitivity = report.mutants_caught / report.mutants_replayed
    runner.problems.extend(mutant_problems(spec, task, k, uncaught))


def _dedupe(problems: list[Problem]) -> list[Problem]:
    """The task-level and per-grader null/echo errors at one grader are reported once; an
    error at a grader replaces the null warning. Other problems are kept as they are."""
    errors = {(p.code, p.pointer) for p in problems if p.severity == "error"}
    once = {"grader_passes_null_agent", "grader_passes_echo_agent"}
    out, seen = [], set()
    for p in problems:
        key = (p.code, p.pointer) if p.code in once else (p.code, p.pointer, p.message)
        if key in seen:
            continue
        if p.code == "grader_satisfied_by_null" and (
            ("grader_passes_null_agent", p.pointer) in errors
            or ("update_does_agent_work", p.pointer) in errors
        ):
            continue
        seen.add(key)
        out.append(p)
    return out
