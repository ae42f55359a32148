"""Judges without a judge: what can be said of a judge grader before any judge runs.

Without a judge the oracle's judge verdicts are skipped (``judge_not_certified``); these
static checks hold either way:

* ``judge_threshold_vacuous``: a threshold of 0 passes any verdict (the schema keeps it
  within [0, 1]);
* ``judge_sole_evidence``: the judge graders alone reach the pass threshold (every other
  completion grader failing, robustness whole): a judge that can be talked round passes the
  task with nothing done;
* ``judge_rubric_parrotable``: every content word of the rubric is in the user's messages,
  so repeating the request back (the echo agent) satisfies a literal judge;
* ``judge_rubric_unexposed``: the rubric names a fact (an address, id, date, time or
  number) that appears nowhere in the task — messages, reveals, tool schemas, records —
  so neither the agent nor the judge, shown the conversation and the calls, can check it.

With a judge configured, every dynamic run (the null and echo agents too) goes through it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from ..problems import Problem, error, pointer
from ..scoring import ScoringConfig
from ..spec_model import EnvironmentSpec, TaskSpec
from .known import _facts, _found

_WORD = re.compile(r"[a-z][a-z'-]{3,}")
_ADDRESS = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_STOP_WORDS = (
    "that this with from have been were will would should could their there they them what "
    "when which while about into onto over under than then also only just very more most "
    "some such each every other reply response says said agent user assistant answer "
    "mentions mention states state tells told correctly clearly whether does must"
)
_STOP = set(_STOP_WORDS.split())


def _judges(check: Any, path: tuple) -> Iterator[tuple[tuple, dict[str, Any], bool]]:
    """(path, judge leaf, whether it decides its grader alone) of each judge leaf: alone
    unless an ``all`` puts a deterministic check beside it."""
    if not isinstance(check, dict):
        return
    if check.get("kind") == "judge":
        yield path, check, True
    for key in ("all", "any"):
        subs = check.get(key) or []
        guarded = key == "all" and any(_deterministic(s) for s in subs)
        for i, sub in enumerate(subs):
            for p, leaf, alone in _judges(sub, (*path, key, i)):
                yield p, leaf, alone and not guarded
    if "not" in check:
        yield from _judges(check["not"], (*path, "not"))


def _deterministic(check: Any) -> bool:
    if not isinstance(check, dict):
        return False
    if "kind" in check:
        return check["kind"] not in ("judge", "side_effects")
    if "all" in check:
        return any(_deterministic(c) for c in check["all"])
    if "any" in check:
        return all(_deterministic(c) for c in check["any"])
    return False


def _words(text: str) -> set[str]:
    return {w[:4] for w in _WORD.findall(text.casefold()) if w not in _STOP}


def _task_text(spec: EnvironmentSpec, task: TaskSpec) -> str:
    parts = [task.system, *task.constraints, *task.user.reveals_when_asked, task.user.persona]
    parts += [t.message for t in task.turns]
    parts += [u.notice or "" for t in task.turns for u in t.updates]
    parts += [repr(u.values) for t in task.turns for u in t.updates]
    parts += [repr(t.parameters) + t.description for t in spec.tools]
    parts += [repr(spec.services), repr(task.records)]
    parts += [repr(c.arguments) for s in task.reference_solution for c in s.calls]
    parts += [s.reply or "" for s in task.reference_solution]
    return "\n".join(parts).casefold()


def judge_problems(spec: EnvironmentSpec, k: int, task: TaskSpec) -> list[Problem]:
    out: list[Problem] = []
    config = ScoringConfig().for_task(task)
    user = _words(" ".join(t.message for t in task.turns))
    text: str | None = None
    sole_weight = 0.0
    first_sole: str | None = None
    for g, grader in enumerate(task.graders):
        for path, leaf, alone in _judges(grader.check, ()):
            ptr = pointer("tasks", k, "graders", g, "check", *path)
            threshold = leaf.get("threshold", 0.5)
            if isinstance(threshold, (int, float)) and threshold <= 0:
                out.append(_vacuous(ptr, threshold))
            rubric = str(leaf.get("rubric", ""))
            words = _words(rubric)
            if len(words) >= 3 and words <= user:
                out.append(_parrotable(ptr, grader.id))
            text = _task_text(spec, task) if text is None else text
            missing = _unexposed(rubric, text)
            if missing:
                out.append(_unexposed_problem(ptr, missing))
            if alone and grader.category in ("completion", "communication") and path == ():
                sole_weight += grader.weight
                first_sole = first_sole or pointer("tasks", k, "graders", g)
    total = sum(g.weight for g in task.graders if g.category in ("completion", "communication"))
    if first_sole is not None and total > 0:
        reach = config.completion_weight * sole_weight / total + config.robustness_weight
        if reach >= config.pass_threshold - 1e-9:
            out.append(_sole(first_sole, reach, config.pass_threshold))
    return out


def _unexposed(rubric: str, text: str) -> list[str]:
    facts = [(f, forms) for f, forms in _facts(rubric)]
    facts += [(a, [a]) for a in _ADDRESS.findall(rubric)]
    return [f for f, forms in facts if not _found([x.casefold() for x in forms], text)]


def _vacuous(ptr: str, threshold: float) -> Problem:
    return error(
        "judge_threshold_vacuous",
        ptr + "/threshold",
        f"The judge's threshold is {threshold:g}: any verdict passes it (verdicts are scores "
        "in [0, 1]).",
        "Use a threshold in (0, 1]; 0.5 (the default) for a yes/no rubric.",
    )


def _parrotable(ptr: str, grader_id: str) -> Problem:
    return error(
        "judge_rubric_parrotable",
        ptr + "/rubric",
        f"Every word of grader '{grader_id}''s rubric is in the user's own messages: a reply "
        "repeating the request back satisfies it as written.",
        "Make the rubric ask for what only doing the task gives (a value found in the "
        "records, the outcome of the calls), and pair it with a state check in an 'all'.",
    )


def _unexposed_problem(ptr: str, missing: list[str]) -> Problem:
    facts = ", ".join(f"'{m}'" for m in missing[:5])
    return error(
        "judge_rubric_unexposed",
        ptr + "/rubric",
        f"The rubric names {facts}, which appear nowhere in the task (messages, reveals, "
        "tool schemas, records, updates, the reference): neither the agent nor the judge, "
        "shown the conversation and the calls, can know or check it.",
        "Put the fact in a record a tool reads or in the request, or take it out of the rubric.",
    )


def _sole(ptr: str, reach: float, threshold: float) -> Problem:
    return error(
        "judge_sole_evidence",
        ptr,
        f"The judge graders alone reach {reach:.2f} against the threshold {threshold:.2f}: "
        "with every other completion grader failed, a judge that is talked round passes the "
        "task (and without a judge nothing decides it).",
        "Put the judge in an 'all' with a state check of the outcome, or give the "
        "deterministic completion graders enough weight that they decide the task.",
    )
