"""An exact-match grader where the request allows natural variants (dynamic).

The reference writes free text (a title, a subject, a name) that the request does not give
word for word: an agent doing the same work phrases it its own way. The reference is
replayed once with every such value written in another natural form (in Title Case, one
more word: "quarterly planning" -> "Quarterly Planning update", the replies saying the
same); a grader the reference passes and that variant fails punishes the phrasing, not the work:
``exact_match_rejects_variant`` at the grader.

Not varied, since an exact match on them is fair: values the request gives word for word
(quoted or not, in any case), values copied from the data (a record's field, an id), enum
parameters, and what is not free text (emails, dates, urls, codes such as "FIN-22",
numbers, long bodies).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from ..bindings import normalize_text, placeholder_name
from ..policies import OraclePolicy, PolicyAction, PolicyView
from ..problems import Problem, error, pointer
from ..runner import EpisodeResult
from ..spec import EnvironmentSpec, ReferenceCall, TaskSpec, ToolSpec
from .known import _DATE
from .walk import texts

MAX_WORDS = 8
MAX_CHARS = 80
_CODE = re.compile(r"^[\w.#/-]*\d[\w.#/-]*$")  # one token holding a digit: an id or code
_NOT_TEXT = re.compile(r"@|://|^\W*$")


def variant(value: str) -> str:
    """Another natural phrasing of ``value``: in Title Case (a word holding a digit, such as
    "t-27", kept as written; a value already titled kept, so no name is lowercased), one
    word more."""
    words = value.split(" ")
    if all(w[:1].isupper() for w in words if w[:1].isalpha()):
        return f"{value} update"
    titled = [w if any(ch.isdigit() for ch in w) else w[:1].upper() + w[1:] for w in words]
    return " ".join(titled) + " update"


def _free_text(value: str) -> bool:
    words = value.split()
    return (
        0 < len(words) <= MAX_WORDS
        and len(value) <= MAX_CHARS
        and any(ch.isalpha() for ch in value)
        and not _NOT_TEXT.search(value)
        and not _DATE.search(value)
        and not (len(words) == 1 and _CODE.match(value))
    )


def _data_strings(spec: EnvironmentSpec, task: TaskSpec) -> set[str]:
    updates = [u.values for t in task.turns for u in t.updates if u.values]
    return {v.casefold() for v in texts([spec.services, task.records, updates])}


def _request(task: TaskSpec) -> str:
    parts = [task.system, *task.constraints, *task.user.reveals_when_asked]
    return "\n".join(parts + [t.message for t in task.turns])


def _given(value: str, request: str) -> bool:
    """The request holds ``value`` word for word (in quotes or not): it is the exact string."""
    return normalize_text(value) in normalize_text(request)


def _written(tool: ToolSpec, name: str) -> bool:
    values = tool.binding.values or {}
    return any(placeholder_name(v) == name for v in values.values())


def _enum(tool: ToolSpec, name: str) -> bool:
    prop = (tool.parameters.get("properties") or {}).get(name)
    return isinstance(prop, dict) and ("enum" in prop or "const" in prop)


def candidates(spec: EnvironmentSpec, task: TaskSpec) -> Iterator[tuple[str, tuple]]:
    """(value, pointer parts) of each free-text value a reference call writes that the
    request leaves to the agent's phrasing, first place only."""
    data, request, seen = _data_strings(spec, task), _request(task), set()
    for s, step in enumerate(task.reference_solution):
        for c, call in enumerate(step.calls):
            tool = spec.tool(call.tool)
            if tool is None or not tool.binding.changes_state:
                continue
            for name, value in call.arguments.items():
                fair = (
                    not isinstance(value, str)
                    or value in seen
                    or not _written(tool, name)
                    or _enum(tool, name)
                    or not _free_text(value)
                    or value.casefold() in data
                    or _given(value, request)
                )
                if not fair:
                    seen.add(value)
                    yield value, ("reference_solution", s, "calls", c, "arguments", name)


class RephrasedReference(OraclePolicy):
    """The reference solution writing each value of ``swaps`` in its variant form, in its
    state-changing calls and its replies."""

    name = "rephrased"

    def __init__(self, swaps: dict[str, str]):
        self.swaps = swaps

    def calls_for_turn(self, view: PolicyView) -> tuple[ReferenceCall, ...]:
        out = []
        for call in super().calls_for_turn(view):
            tool = view.spec.tool(call.tool)
            if tool is not None and tool.binding.changes_state:
                args = {k: self.swaps.get(v, v) if isinstance(v, str) else v
                        for k, v in call.arguments.items()}  # fmt: skip
                call = ReferenceCall(call.tool, args)
            out.append(call)
        return tuple(out)

    def act(self, view: PolicyView) -> PolicyAction:
        action = super().act(view)
        if action.reply is None:
            return action
        reply = action.reply
        for old, new in self.swaps.items():
            reply = reply.replace(old, new)
        return PolicyAction(reply=reply)


def phrasing_problems(
    spec: EnvironmentSpec,
    k: int,
    oracle: EpisodeResult,
    run: Callable[[OraclePolicy], EpisodeResult],
) -> list[Problem]:
    """One error per grader the reference passes and its rephrased replay fails (one
    replay for the task, only when it has free text to vary)."""
    task = spec.tasks[k]
    found = list(candidates(spec, task))
    if not found:
        return []
    swaps = {value: variant(value) for value, _ in found}
    rephrased = run(RephrasedReference(swaps)).grading
    passed = {v.grader_id for v in oracle.grading.verdicts if v.passed}
    index = {g.id: i for i, g in enumerate(task.graders)}
    shown = ", ".join(f"'{v}' -> '{swaps[v]}'" for v, _ in found)
    where = pointer("tasks", k, *found[0][1])
    return [
        error(
            "exact_match_rejects_variant",
            pointer("tasks", k, "graders", index[v.grader_id]),
            f"Grader '{v.grader_id}' fails the reference written in another natural "
            f"phrasing ({shown}; first at {where}), which the request allows: it punishes "
            "the wording, not the work.",
            "Match the value loosely (contains with ignore_case, lower() inside a query's "
            "filter, or a (?i) regex on its key words), or have the request give the exact "
            "string in quotes.",
        )
        for v in rephrased.verdicts
        if v.grader_id in passed
        and not v.passed
        and v.status != "skipped"
        and v.category in ("completion", "communication", "robustness")
    ]
