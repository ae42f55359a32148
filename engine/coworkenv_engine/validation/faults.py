"""Fault tolerance by probability, and the work budget of dynamic validation.

The oracle retries a transient fault up to ``MAX_ORACLE_ATTEMPTS`` times per reference
call, so the chance that a fault rate defeats it is computable: a call is lost when every
attempt faults (``rate ** attempts``), the run when any call is lost. Above
``MAX_FAILURE_PROBABILITY`` the spec is rejected. What the formula cannot see (a grader
that counts failed attempts, a timeout that moves the clock past a deadline) is sampled:
the oracle runs under faults for ``FAULT_SEEDS`` seeds, and a grader that counts failed
calls on a faulting tool is rejected statically.

Mutants replay the whole task each; beyond ``MAX_MUTANTS`` an evenly spread sample is
replayed (the report says so), which bounds the work of a spec with many calls.
"""

from __future__ import annotations

from ..policies import MAX_ORACLE_ATTEMPTS
from ..problems import Problem, error, pointer
from ..spec_model import EnvironmentSpec, TaskSpec

MAX_FAILURE_PROBABILITY = 1e-3
FAULT_SEEDS = tuple(range(12))
MAX_MUTANTS = 24
#: simulated work one validation may do: ~0.5-1 ms a unit, so well under a minute
MAX_WORK_UNITS = 50_000
_BASE_RUNS = 5  # oracle fault-free, two faulty replays, null, echo


def exhaustion_probability(spec: EnvironmentSpec, task: TaskSpec) -> float:
    """Probability that some reference call faults on every one of the oracle's attempts."""
    survive = 1.0
    for step in task.reference_solution:
        for call in step.calls:
            tool = spec.tool(call.tool)
            if tool is not None and tool.faults.rate > 0 and tool.faults.kinds:
                survive *= 1.0 - tool.faults.rate**MAX_ORACLE_ATTEMPTS
    return 1.0 - survive


def probability_problems(spec: EnvironmentSpec, k: int) -> list[Problem]:
    task = spec.tasks[k]
    p = exhaustion_probability(spec, task)
    if p <= MAX_FAILURE_PROBABILITY:
        return []
    rates = sorted(
        {
            f"{t.name} {t.faults.rate:g}"
            for s in task.reference_solution
            for c in s.calls
            if (t := spec.tool(c.tool)) is not None and t.faults.rate > 0
        }
    )
    return [
        error(
            "oracle_fails_under_faults",
            pointer("tasks", k, "reference_solution"),
            f"With these fault rates ({', '.join(rates)}) a correct agent that retries "
            f"{MAX_ORACLE_ATTEMPTS} times still fails {p:.2%} of runs "
            f"(allowed: {MAX_FAILURE_PROBABILITY:.1%}).",
            "Lower the tools' fault rates (0.2 or less is realistic).",
        )
    ]


def mutant_sample(total: int) -> list[int]:
    """Indices of the mutants to replay: all up to MAX_MUTANTS, else an even spread."""
    if total <= MAX_MUTANTS:
        return list(range(total))
    step = (total - 1) / (MAX_MUTANTS - 1)
    return sorted({round(i * step) for i in range(MAX_MUTANTS)})


def estimated_work(spec: EnvironmentSpec) -> list[int]:
    """Work units per task: runs x (reference calls + 1) x (1 + state MB), computed before
    anything runs (each run replays the task; its cost grows with the calls and the state)."""
    from ..policies import state_changing_calls
    from ..state import json_size

    env_bytes = json_size(spec.services)
    out = []
    for task in spec.tasks:
        calls = sum(len(step.calls) for step in task.reference_solution)
        faulty = any(
            (t := spec.tool(c.tool)) is not None and t.faults.rate > 0
            for step in task.reference_solution
            for c in step.calls
        )
        runs = _BASE_RUNS + (len(FAULT_SEEDS) if faulty else 0)
        runs += len(mutant_sample(len(state_changing_calls(spec, task))))
        state_mb = (env_bytes + json_size(task.records)) / 1_000_000
        out.append(int(runs * (calls + 1) * (1 + state_mb)))
    return out


def budget_problems(spec: EnvironmentSpec) -> list[Problem]:
    work = estimated_work(spec)
    total = sum(work)
    if total <= MAX_WORK_UNITS:
        return []
    heaviest = max(range(len(work)), key=work.__getitem__)
    return [
        error(
            "validation_budget_exceeded",
            "",
            f"Validating this spec in the simulator would take about {total} work units "
            f"(allowed: {MAX_WORK_UNITS}; the heaviest task, /tasks/{heaviest}, "
            f"{work[heaviest]}): too many tasks, reference calls or records for one spec.",
            "Split the environment into several specs, trim the records, or shorten the "
            "reference solutions.",
        )
    ]
