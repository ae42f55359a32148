"""Per-grader soundness of a task's main completion evidence, from the dynamic runs.

The task-level checks (a do-nothing or echoing agent must not *pass*) miss a loose grader
that carries the task: a weight-2 outcome grader that the do-nothing agent satisfies is
still an error even when a small grader keeps the task from passing. The *main* completion
evidence is the completion grader with the strictly largest weight, or any completion
grader holding at least half of the completion weight. Such a grader must:

* fail for the do-nothing and the echo agent (``grader_passes_null_agent`` /
  ``grader_passes_echo_agent`` at the grader);
* notice when a reference call writing the collection it reads is dropped
  (``grader_ignores_reference_call``);
* and no completion grader may be satisfied by the exogenous updates alone — one that fails
  on the initial state but passes after the do-nothing run (``update_does_agent_work``).
"""

from __future__ import annotations

import re
from typing import Any

from ..problems import Problem, error, pointer
from ..runner import EpisodeResult
from ..scoring import grade_episode
from ..simulator import Episode
from ..spec import EnvironmentSpec, ReferenceCall, TaskSpec


def main_graders(task: TaskSpec) -> list[int]:
    completion = [
        (g, grader.weight)
        for g, grader in enumerate(task.graders)
        if grader.category == "completion"
        and isinstance(grader.weight, (int, float))
        and grader.weight > 0
    ]
    if len(completion) < 2:
        return [g for g, _ in completion]
    total = sum(w for _, w in completion)
    top = max(w for _, w in completion)
    unique_top = [g for g, w in completion if w == top]
    out = {g for g, w in completion if 2 * w >= total}
    if len(unique_top) == 1:
        out.add(unique_top[0])
    return sorted(out)


def trivial_agent_problems(task: TaskSpec, k: int, runs: dict[str, EpisodeResult]) -> list:
    out: list[Problem] = []
    main = main_graders(task)
    for name, code, who in (
        ("null", "grader_passes_null_agent", "a do-nothing agent"),
        ("echo", "grader_passes_echo_agent", "an agent that only echoes the request"),
    ):
        result = runs.get(name)
        if result is None:
            continue
        passed = {v.grader_id for v in result.grading.verdicts if v.passed}
        for g in main:
            grader = task.graders[g]
            if grader.id in passed:
                out.append(
                    error(
                        code,
                        pointer("tasks", k, "graders", g),
                        f"Grader '{grader.id}' is the task's main completion evidence "
                        f"(weight {grader.weight:g}) and {who} satisfies it.",
                        "Make it require the outcome the task asks for (a record created or "
                        "changed with the right values, a reply naming a value from the "
                        "state), not something true before the agent acts or in the request.",
                    )
                )
    return out


def _reads(check: Any, service: str, collection: str) -> bool:
    text = repr(check)
    return re.search(rf"\b{re.escape(service)}\.{re.escape(collection)}\b", text) is not None


def mutant_problems(
    spec: EnvironmentSpec, task: TaskSpec, k: int, uncaught: list[tuple[int, int, ReferenceCall]]
) -> list[Problem]:
    out: list[Problem] = []
    main = main_graders(task)
    for s, c, call in uncaught:
        tool = spec.tool(call.tool)
        if tool is None:
            continue
        b = tool.binding
        for g in main:
            grader = task.graders[g]
            if _reads(grader.check, b.service, b.collection):
                out.append(
                    error(
                        "grader_ignores_reference_call",
                        pointer("tasks", k, "graders", g),
                        f"Grader '{grader.id}' (the main completion evidence) reads "
                        f"{b.service}.{b.collection} but still passes when the reference "
                        f"call to '{call.tool}' at /tasks/{k}/reference_solution/{s}/calls/{c}, "
                        "which writes it, is dropped.",
                        "Make the grader check the values this call writes (the record's "
                        "fields, not only that some record exists).",
                    )
                )
    return out


def update_work_problems(spec: EnvironmentSpec, k: int, null: EpisodeResult) -> list[Problem]:
    task = spec.tasks[k]
    if not any(turn.updates for turn in task.turns):
        return []
    passed = {v.grader_id for v in null.grading.verdicts if v.passed and v.category == "completion"}
    if not passed:
        return []
    initial = Episode(spec, task.key, faults=False).state_snapshot()
    before = grade_episode(
        task,
        final_state=initial,
        turn_states=dict.fromkeys(range(len(task.turns)), initial),
        audit_log=[],
        transcript=[],
    )
    failed_before = {v.grader_id for v in before.verdicts if v.status == "failed"}
    out: list[Problem] = []
    for g, grader in enumerate(task.graders):
        if grader.category == "completion" and grader.id in passed and grader.id in failed_before:
            out.append(
                error(
                    "update_does_agent_work",
                    pointer("tasks", k, "graders", g),
                    f"Grader '{grader.id}' fails on the initial state but passes after a "
                    "do-nothing run: an exogenous update does what the agent should.",
                    "Make the grader check the agent's own action, or change the update so it "
                    "does not produce the outcome itself.",
                )
            )
    return out


def update_log_problems(
    task: TaskSpec, k: int, result: EpisodeResult, reported: set[str]
) -> list[Problem]:
    """Updates that failed in this run (each update reported once per validation)."""
    out: list[Problem] = []
    index: dict[int, int] = {}
    for entry in result.exogenous_log:
        turn = entry.get("turn", 0)
        u = index.get(turn, 0)
        index[turn] = u + 1
        if entry.get("ok"):
            continue
        ptr = pointer("tasks", k, "turns", turn, "updates", u)
        if ptr in reported:
            continue
        reported.add(ptr)
        out.append(
            error(
                "update_failed_at_run",
                ptr,
                f"In the {result.policy} run this {entry.get('op')} of "
                f"{entry.get('service')}.{entry.get('collection')} '{entry.get('id')}' failed "
                f"({entry.get('error')}); the turn went on without it.",
                "Target a record no agent action removes or takes, or move the update to a "
                "turn where its target is certain to exist.",
            )
        )
    return out
