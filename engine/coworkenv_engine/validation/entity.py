"""The right entity: a task is not passed by doing its work on the wrong record.

* **Wrong-entity variants** (dynamic): for each record the reference's state-changing calls
  name (the id an update or delete targets, an id a create refers to), the reference is
  replayed with that id replaced everywhere (every call's arguments and the replies) by a
  sibling: another record of the same collection that no reference call names. Checks that
  match "any record" of a collection let that run through: if it passes or is strict while
  a completion grader that fails without the record's writes (the reference minus them)
  passes with them on the sibling, the task is invalid: ``wrong_entity_passes`` at the
  first argument naming the record.
* **Side-effects scope** (static): the task's ``side_effects`` graders together must watch
  every collection the task's tools can write; one a ``services`` list leaves out or an
  ``ignore`` drops lets a write there go unseen: ``side_effects_scope_partial``. A write the
  request asks for is the reference's and already admitted (or belongs in ``allow``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ..policies import OraclePolicy, PolicyAction, PolicyView
from ..problems import Problem, error, pointer
from ..runner import EpisodeResult
from ..spec import EnvironmentSpec, ReferenceCall, TaskSpec
from .walk import strings

MAX_VARIANTS = 3  # records swapped per task (each costs a run sharing the oracle's prefix)

Located = tuple[str, str]  # (service, collection)


def _swap(value: Any, old: str, new: str) -> Any:
    if value == old:
        return new
    if isinstance(value, dict):
        return {k: _swap(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [_swap(v, old, new) for v in value]
    return value


class SiblingReference(OraclePolicy):
    """The reference solution with record id ``old`` replaced by ``new`` in every call's
    arguments and in the replies: the same work, done on the wrong record."""

    def __init__(self, old: str, new: str):
        self.old, self.new = old, new
        self.name = f"wrong-entity:{old}->{new}"

    def calls_for_turn(self, view: PolicyView) -> tuple[ReferenceCall, ...]:
        return tuple(
            ReferenceCall(c.tool, _swap(c.arguments, self.old, self.new))
            for c in super().calls_for_turn(view)
        )

    def act(self, view: PolicyView) -> PolicyAction:
        action = super().act(view)
        if action.reply is None:
            return action
        return PolicyAction(reply=action.reply.replace(self.old, self.new))


class WithoutRecord(OraclePolicy):
    """The reference solution without its state-changing calls that name record ``old``:
    what the graders that notice that record's work say when it is missing."""

    def __init__(self, old: str):
        self.old = old
        self.name = f"without-record:{old}"

    def calls_for_turn(self, view: PolicyView) -> tuple[ReferenceCall, ...]:
        return tuple(
            c
            for c in super().calls_for_turn(view)
            if not _changes(view.spec, c) or self.old not in {v for _, v in strings(c.arguments)}
        )


def _changes(spec: EnvironmentSpec, call: ReferenceCall) -> bool:
    tool = spec.tool(call.tool)
    return tool is not None and tool.binding.changes_state


def record_ids(spec: EnvironmentSpec, task: TaskSpec) -> dict[str, Located]:
    """Every record id the task starts with or its updates create -> its collection."""
    out: dict[str, Located] = {}
    for source in (spec.services, task.records):
        for service, cols in source.items():
            for name, records in cols.items():
                for record in records:
                    if isinstance(record, dict) and isinstance(record.get("id"), str):
                        out.setdefault(record["id"], (service, name))
    for turn in task.turns:
        for u in turn.updates:
            created = (u.values or {}).get("id") if u.op == "create" else None
            if isinstance(created, str):
                out.setdefault(created, (u.service, u.collection))
    return out


def _named_records(spec: EnvironmentSpec, task: TaskSpec, ids: dict[str, Located]):
    """{id: pointer parts of its first argument} of each record a state-changing reference
    call names, in reference order."""
    seen: dict[str, tuple] = {}
    for s, step in enumerate(task.reference_solution):
        for c, call in enumerate(step.calls):
            if not _changes(spec, call):
                continue
            for path, value in strings(call.arguments):
                if value in ids:
                    seen.setdefault(
                        value, ("reference_solution", s, "calls", c, "arguments", *path)
                    )
    return seen


def sibling_variants(spec: EnvironmentSpec, task: TaskSpec) -> list[tuple[str, str, tuple]]:
    """(old id, sibling id, pointer parts) for at most ``MAX_VARIANTS`` named records."""
    ids = record_ids(spec, task)
    named = {
        v for step in task.reference_solution for c in step.calls for _, v in strings(c.arguments)
    }
    out = []
    for old, parts in _named_records(spec, task, ids).items():
        home = ids[old]
        sibling = next((i for i, where in ids.items() if where == home and i not in named), None)
        if sibling is not None:
            out.append((old, sibling, parts))
        if len(out) == MAX_VARIANTS:
            break
    return out


def wrong_entity_problems(
    spec: EnvironmentSpec, k: int, run: Callable[[OraclePolicy], EpisodeResult]
) -> list[Problem]:
    """One error per named record whose sibling variant passes (or is strict) while a
    completion grader is fooled: it fails when the record's writes are dropped and passes
    when they land on the sibling, so it accepts any record. A variant that passes only on
    other graders' weight is the mutants' business."""
    task = spec.tasks[k]
    out: list[Problem] = []
    for old, new, parts in sibling_variants(spec, task):
        swapped = run(SiblingReference(old, new)).grading
        if not (swapped.passed or swapped.strict):
            continue
        dropped = {
            v.grader_id for v in run(WithoutRecord(old)).grading.verdicts if v.status == "failed"
        }
        fooled = [
            v.grader_id
            for v in swapped.verdicts
            if v.passed and v.category in ("completion", "communication") and v.grader_id in dropped
        ]
        if not fooled:
            continue
        service, collection = record_ids(spec, task)[old]
        out.append(
            error(
                "wrong_entity_passes",
                pointer("tasks", k, *parts),
                f"The reference solution done on the wrong record ({service}.{collection} "
                f"'{new}' instead of '{old}', same calls) still passes: score "
                f"{swapped.score:.2f}{', strict' if swapped.strict else ''}. Graders that "
                f"fail without the work on '{old}' but accept it on '{new}': "
                f"{', '.join(fooled)}.",
                f"Make those graders name the record (filter on id == '{old}' or a field only "
                f"it has) and watch {service} with a side_effects grader.",
            )
        )
    return out


def _writable(spec: EnvironmentSpec) -> list[Located]:
    out: list[Located] = []
    for tool in spec.tools:
        where = (tool.binding.service, tool.binding.collection)
        if tool.binding.changes_state and where not in out:
            out.append(where)
    return out


def _watches(check: dict[str, Any], service: str, collection: str) -> bool:
    names = (service, f"{service}.{collection}")
    if any(n in (check.get("ignore") or []) for n in names):
        return False
    services = check.get("services")
    return services is None or any(n in services for n in names)


def _side_effects_checks(check: Any, path: tuple) -> Iterator[tuple[tuple, dict[str, Any]]]:
    if not isinstance(check, dict):
        return
    if check.get("kind") == "side_effects":
        yield path, check
    for key in ("all", "any"):
        for i, sub in enumerate(check.get(key) or []):
            yield from _side_effects_checks(sub, (*path, key, i))


def side_effects_scope_problems(spec: EnvironmentSpec, k: int, task: TaskSpec) -> list[Problem]:
    found = [
        (("graders", g, "check", *path), check)
        for g, grader in enumerate(task.graders)
        for path, check in _side_effects_checks(grader.check, ())
    ]
    if not found:
        return []  # side_effects_unchecked (gameable.py) says so
    unwatched = [
        (s, c) for s, c in _writable(spec) if not any(_watches(check, s, c) for _, check in found)
    ]
    if not unwatched:
        return []
    parts, check = found[0]
    field = "ignore" if check.get("ignore") else "services"
    names = ", ".join(f"{s}.{c}" for s, c in unwatched)
    return [
        error(
            "side_effects_scope_partial",
            pointer("tasks", k, *parts, field),
            f"The task's tools can write {names}, which no side_effects grader watches: a "
            "write there (on the wrong record, or one nobody asked for) goes unseen.",
            "Watch every collection the tools write (drop the services list, or add them to "
            "it; drop the ignore entry); admit a write the request asks for with 'allow' "
            "instead.",
        )
    ]
