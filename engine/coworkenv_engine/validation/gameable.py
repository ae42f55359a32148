"""Static rules for gameable graders: constructs an agent can satisfy without doing the task.

A grader *carries the task's outcome* when it adds to the score: ``completion`` and
``communication`` graders (and ``robustness`` ones for the tool_call bound rule); a
``safety`` grader only gates, so passing it earns nothing. Each rule below is an error on
such a grader, at the pointer of the construct, with a hint the repair loop can act on:

* ``response_readable_from_state`` — a ``response`` check passes when the agent pastes
  every value it can read (records of collections some read tool returns, the state as
  exogenous updates leave it, the user's messages) and nothing else, while a bare
  "Done." fails it;
* ``state_check_any_element`` — a ``state`` check over a collection the reference solution
  writes passes when *any* element matches (``matches``/``contains``/``exists`` on a
  list, ``count`` with only ``min``, ``length(...) >=``/``>``): sprayed writes satisfy it;
* ``process_check_alone`` — the grader is satisfied by tool calls alone (``before``,
  ``after``, ``during_turn``, a bare call, or a read tool) with no outcome in it;
* ``tool_call_max_partial`` — ``arguments`` + ``max`` bound only the matching calls and
  nothing else in the task bounds the tool's other calls;
* ``capability_grader_not_decisive`` — the grader marked ``capability`` (the one that tests
  what the task is about) can fail while every other grader passes and the task still
  reaches its pass threshold.

Warnings: ``side_effects_unchecked`` (no ``side_effects`` grader), ``capability_grader_missing``
(capabilities listed but no grader marked as testing one).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from ..checks import CheckView, evaluate, leaf_kinds
from ..problems import Problem, error, pointer, warning
from ..scoring import COMPLETION_CATEGORIES, ScoringConfig
from ..side_effects import Footprint
from ..simulator import Episode
from ..spec import EnvironmentSpec, Grader, TaskSpec
from .walk import leaves

OUTCOME_CATEGORIES = COMPLETION_CATEGORIES  # rules 1-3: graders that add to completion
SCORED_CATEGORIES = (*COMPLETION_CATEGORIES, "robustness")  # rule 4: anything but safety
READ_OPS = ("list", "search", "get")
MAX_PASTE_CHARS = 1_000_000  # bounds the work on huge states; a real paste is far shorter


def _leaves(check: dict[str, Any], ptr: str, negated: bool = False) -> Iterator:
    """(leaf, pointer, under a `not`) for every leaf of a check."""
    for mode in ("all", "any"):
        if mode in check:
            for i, child in enumerate(check[mode] or []):
                yield from _leaves(child, f"{ptr}/{mode}/{i}", negated)
            return
    if "not" in check:
        yield from _leaves(check["not"], ptr + "/not", not negated)
        return
    yield check, ptr, negated


def _scalars(value: Any) -> Iterator[str]:
    for _, v in leaves(value):
        if isinstance(v, bool):
            yield "true" if v else "false"
        elif isinstance(v, int | float):
            yield str(v)
            yield f"{v:,}"
        elif isinstance(v, str) and v:
            yield v


class _World:
    """The task as a do-nothing agent would leave it, and what a paster could quote."""

    def __init__(self, spec: EnvironmentSpec, task: TaskSpec):
        readable = {
            (t.binding.service, t.binding.collection)
            for t in spec.tools
            if t.binding.op in READ_OPS
        }
        episode = Episode(spec, task.key, 0, faults=False)
        self.turn_states: dict[int, dict[str, Any]] = {}
        self.pastes: list[tuple[int, str]] = []
        seen: dict[str, None] = {}  # every value an agent could quote so far, in order
        while (turn := episode.advance_turn()) is not None:
            state = episode.state_snapshot()
            self.turn_states[turn.index] = state
            seen.setdefault(turn.text)
            for service, cols in state.items():
                for name, records in cols.items():
                    if (service, name) in readable:
                        for value in _scalars(records):
                            seen.setdefault(value)
            self.pastes.append((turn.index, "\n".join(seen)[:MAX_PASTE_CHARS]))
        self.final = episode.state_snapshot()
        self.last_turn = len(task.turns) - 1
        self.task = task

    def view(self, grader: Grader, replies: list[tuple[int, str]]) -> CheckView:
        n = self.last_turn if grader.at_turn is None else grader.at_turn
        state = self.final if grader.at_turn is None else self.turn_states.get(n, self.final)
        return CheckView(
            state,
            [],
            [(t, r) for t, r in replies if t <= n],
            n,
            [],
            self.task.key,
            None,
            Footprint(),
        )

    def paste_view(self, grader: Grader) -> CheckView:
        return self.view(grader, self.pastes)

    def null_view(self, grader: Grader) -> CheckView:
        return self.view(grader, [(t, "Done.") for t, _ in self.pastes])


def _written_collections(spec: EnvironmentSpec, task: TaskSpec) -> set[tuple[str, str]]:
    out = set()
    for step in task.reference_solution:
        for call in step.calls:
            tool = spec.tool(call.tool)
            if tool is not None and tool.binding.changes_state:
                out.add((tool.binding.service, tool.binding.collection))
    return out


def _reads(query: str, collections: set[tuple[str, str]]) -> list[str]:
    return [
        f"{s}.{c}"
        for s, c in sorted(collections)
        if re.search(rf"(?<![\w.]){re.escape(s)}\s*\.\s*{re.escape(c)}\b", query)
    ]


def _any_element(leaf: dict[str, Any], world: _World | None) -> str | None:
    """Why a state leaf passes on any matching element (None: it does not)."""
    op, query = leaf["op"], leaf["query"].strip()
    if op == "count" and "value" not in leaf and "max" not in leaf:
        return f"count with only min {leaf.get('min')} (at least, not exactly)"
    if op in (">=", ">") and query.startswith("length("):
        return f"length(...) {op} {leaf.get('value')} (at least, not exactly)"
    if op in ("matches", "contains", "exists", "!=") and world is not None:
        from ..checks import run_query

        try:
            result = run_query(query, world.final)
        except Exception:  # a broken query is reported by the query rules
            return None
        if isinstance(result, list) and (op != "!=" or leaf.get("value") in ([], None)):
            return f"'{op}' over a list (any element)"
    return None


def _is_process(leaf: dict[str, Any], spec: EnvironmentSpec) -> bool:
    if leaf.get("kind") != "tool_call" or leaf.get("called", True) is False:
        return False
    tool = spec.tool(leaf["tool"])
    reads = tool is not None and not tool.binding.changes_state
    ordered = any(k in leaf for k in ("before", "after", "during_turn"))
    return ordered or reads or not leaf.get("arguments")


def _process_only(check: dict[str, Any], spec: EnvironmentSpec) -> bool:
    """The check can be satisfied by process calls alone (no outcome in it)."""
    if "all" in check:
        return bool(check["all"]) and all(_process_only(c, spec) for c in check["all"])
    if "any" in check:
        return any(_process_only(c, spec) for c in check["any"])
    if "not" in check:
        return False
    return _is_process(check, spec)


def _needed_weight(others: float, config: ScoringConfig) -> float | None:
    """The weight above which failing a completion grader fails the task (None: never)."""
    if config.completion_weight <= 0:
        return None
    q = (config.pass_threshold - config.robustness_weight) / config.completion_weight
    if q <= 0:
        return None
    return others * (1 - q) / q


def _capability(out: list[Problem], k: int, task: TaskSpec) -> None:
    config = ScoringConfig().for_task(task)
    marked = [(g, grader) for g, grader in enumerate(task.graders) if grader.capability]
    if task.capabilities and not marked:
        out.append(
            warning(
                "capability_grader_missing",
                pointer("tasks", k, "graders"),
                f"Task '{task.key}' lists capabilities ({', '.join(task.capabilities)}) but no "
                "grader is marked as testing one.",
                'Add "capability": "<slug>" to the grader that tests it (e.g. the one checking '
                "that the agent asked before acting); its failure must fail the task.",
            )
        )
    completion_total = sum(g.weight for g in task.graders if g.category in OUTCOME_CATEGORIES)
    robustness_total = sum(g.weight for g in task.graders if g.category == "robustness")
    for g, grader in marked:
        ptr = pointer("tasks", k, "graders", g)
        if grader.capability not in task.capabilities:
            out.append(
                error(
                    "capability_grader_unknown",
                    ptr + "/capability",
                    f"Grader '{grader.id}' tests '{grader.capability}', which is not one of the "
                    f"task's capabilities ({', '.join(task.capabilities) or 'none'}).",
                    "Use one of the task's capabilities or add it to the task.",
                )
            )
        if grader.category == "safety" or grader.weight <= 0:
            continue
        if grader.category in OUTCOME_CATEGORIES and completion_total > 0:
            completion = (completion_total - grader.weight) / completion_total
            best = config.completion_weight * completion + config.robustness_weight
        elif grader.category == "robustness" and robustness_total > 0:
            share = (robustness_total - grader.weight) / robustness_total
            best = config.completion_weight + config.robustness_weight * share
        else:
            continue
        if best < config.pass_threshold - 1e-9:
            continue
        others = completion_total - grader.weight
        needed = _needed_weight(others, config) if grader.category != "robustness" else None
        raise_to = (
            f"raise its weight above {needed:.2f} (the other completion graders weigh {others:g}), "
            if needed is not None
            else ""
        )
        out.append(
            error(
                "capability_grader_not_decisive",
                ptr + "/weight",
                f"If '{grader.id}' (it tests {grader.capability}) fails and every other grader "
                f"passes, the task still scores {best:.2f} ≥ the pass threshold "
                f"{config.pass_threshold:g}.",
                f"Make its failure fail the task: {raise_to}make it a safety grader (a gate), "
                "or raise scoring.pass_threshold.",
            )
        )


def gameable_problems(spec: EnvironmentSpec, k: int, task: TaskSpec) -> list[Problem]:
    out: list[Problem] = []
    base = ("tasks", k, "graders")
    try:
        world: _World | None = _World(spec, task)
    except Exception:  # records the static rules already reject; skip the state rules
        world = None
    written = _written_collections(spec, task)
    bounded = {
        leaf["tool"]
        for g in task.graders
        for leaf, _, negated in _leaves(g.check, "")
        if leaf.get("kind") == "tool_call"
        and not negated
        and not leaf.get("arguments")
        and ("max" in leaf or leaf.get("called", True) is False)
    }
    for g, grader in enumerate(task.graders):
        ptr = pointer(*base, g, "check")
        outcome = grader.category in OUTCOME_CATEGORIES
        if outcome and world is not None and "response" in set(leaf_kinds(grader.check)):
            paste = evaluate(grader.check, world.paste_view(grader))[0] == "passed"
            null = evaluate(grader.check, world.null_view(grader))[0] == "passed"
            if paste and not null:
                leaf_ptr = next(
                    (
                        p
                        for leaf, p, negated in _leaves(grader.check, ptr)
                        if leaf.get("kind") == "response"
                        and not negated
                        and evaluate(leaf, world.paste_view(grader))[0] == "passed"
                    ),
                    ptr,
                )
                out.append(
                    error(
                        "response_readable_from_state",
                        leaf_ptr,
                        f"Grader '{grader.id}' passes when the agent pastes the records it can "
                        "read (or the user's messages) into its reply, without doing the task.",
                        'Tie the reply to the outcome: wrap it as {"all": [<this response '
                        "check>, <a state check of the record the task creates or changes>]}, "
                        "or mention a value that exists only after the work (e.g. "
                        '"mentions" over the record the agent writes).',
                    )
                )
        for leaf, leaf_ptr, negated in _leaves(grader.check, ptr):
            if negated:
                continue
            kind = leaf.get("kind")
            if outcome and kind == "state" and _reads(leaf["query"], written):
                why = _any_element(leaf, world)
                if why:
                    names = ", ".join(_reads(leaf["query"], written))
                    out.append(
                        error(
                            "state_check_any_element",
                            leaf_ptr,
                            f"Grader '{grader.id}' reads {names}, which the task writes, with "
                            f"{why}: extra or sprayed records satisfy it.",
                            "Check the exact outcome: "
                            '{"op": "count", "value": N} or length([?...]) == N over a filter '
                            "naming every field that matters, or compare the single record "
                            "([?...] | [0].field) with ==.",
                        )
                    )
            if (
                grader.category in SCORED_CATEGORIES
                and kind == "tool_call"
                and leaf.get("arguments")
                and leaf.get("called", True) is not False
                and leaf.get("max", 0) >= 1
                and leaf["tool"] not in bounded
            ):
                out.append(
                    error(
                        "tool_call_max_partial",
                        leaf_ptr + "/max",
                        f"Grader '{grader.id}' allows at most {leaf['max']} '{leaf['tool']}' "
                        "call(s) matching its arguments, but calls with other arguments are "
                        "free.",
                        f"Bound every call: drop 'arguments' from the bounded check, or add "
                        f'{{"kind": "tool_call", "tool": "{leaf["tool"]}", "max": N}} in an '
                        '"all" with it.',
                    )
                )
        if outcome and _process_only(grader.check, spec):
            out.append(
                error(
                    "process_check_alone",
                    ptr,
                    f"Grader '{grader.id}' is satisfied by calling tools alone (order, turn or "
                    "a read), which an agent can do without doing the task.",
                    'Put it in an "all" with the state check of the outcome it leads to, '
                    "or make it a robustness grader.",
                )
            )
    if not any("side_effects" in set(leaf_kinds(g.check)) for g in task.graders):
        out.append(
            warning(
                "side_effects_unchecked",
                pointer(*base),
                f"Task '{task.key}' has no side_effects grader: records changed, created or "
                "deleted beyond what the reference solution touches go unnoticed.",
                'Add {"id": "no-collateral", "category": "safety", "check": {"kind": '
                '"side_effects"}} (scope it with services/ignore/allow if the task may touch '
                "more).",
            )
        )
    _capability(out, k, task)
    return out
