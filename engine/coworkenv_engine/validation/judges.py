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
* ``judge_rubric_unexposed``: the rubric names a fact (an address, id, name, date, time or
  number) that appears nowhere in the task — messages, reveals, tool schemas, records —
  so neither the agent nor the judge, whatever it is shown, can check it.

After the reference run (dynamic, judge or none):

* ``judge_rubric_out_of_context``: the rubric names a fact that the reference run carries
  (in its messages, its calls or the records it leaves) but not in what the grader's
  context shows the judge (``judging.judge_evidence``: by default the conversation and the
  calls; a declared ``context`` may narrow the messages, drop the calls, add collections'
  records), so the judge shown even the reference cannot find the fact.

The facts of a rubric are those ``judge_rubric_unexposed`` looks for, the same way:
addresses, ids, people's (and companies') names, dates, times of day and numbers.

With a judge configured, every dynamic run (the null and echo agents too) goes through it.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from typing import Any

from ..checks import Call, judge_context
from ..judging import declared_context, judge_evidence
from ..problems import Problem, error, pointer
from ..runner import EpisodeResult
from ..scoring import ScoringConfig, grader_view, replies_by_turn
from ..spec_model import EnvironmentSpec, TaskSpec
from .known import _facts, _found

_WORD = re.compile(r"[a-z][a-z'-]{3,}")
_ADDRESS = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
# a record id: letters, then (after a dash, underscore or #) two digits or more: INV-2041
_ID = re.compile(r"(?<![\w@.#-])[A-Za-z]{1,12}[-_#]?\d{2,}(?:[-_][A-Za-z0-9]+)*(?![\w@-])")
# capitalised words in a row: a person's or a company's name (Dana Kim, Acme Corp)
_CAPITALISED = re.compile(r"\b[A-Z][a-z]+(?: [A-Z][a-z]+)+\b")
_SENTENCE_START = re.compile(r"(^|[.!?:;\n\"(]\s*)$")
# capitalised words that are no name: the calendar's, a sentence's openers, a letter's
_NOT_NAMES = {
    "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday",
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December", "The", "This", "That", "If", "When", "Then",
    "Dear", "Hello", "Hi", "Thank", "Thanks", "You", "Best", "Kind", "Regards",
}  # fmt: skip
# an ISO date-time's "T" (2026-03-05T16:00): the date and the time are facts of their own
_ISO_T = re.compile(r"(\d{4}-\d{2}-\d{2})t(\d{2}:\d{2})")
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


def _names(rubric: str) -> Iterator[str]:
    """Runs of two capitalised words and more, without the words that are no name or a
    sentence's first word ("Tell Dana Kim" names Dana Kim)."""
    for m in _CAPITALISED.finditer(rubric):
        words = m.group(0).split(" ")
        if _SENTENCE_START.search(rubric[: m.start()]):
            words = words[1:]
        run: list[str] = []
        for word in [*words, "The"]:  # the sentinel closes the last run
            if word not in _NOT_NAMES:
                run.append(word)
                continue
            if len(run) >= 2:
                yield " ".join(run)
            run = []


def rubric_facts(rubric: str) -> list[tuple[str, list[str]]]:
    """(the fact as written, its casefolded forms) of each address, id, name, date, time of
    day and number a rubric names."""
    facts = [(f, [x.casefold() for x in forms]) for f, forms in _facts(rubric)]
    facts += [(a, [a.casefold()]) for a in _ADDRESS.findall(rubric)]
    facts += [(i, [i.casefold()]) for i in _ID.findall(rubric)]
    facts += [(n, [n.casefold()]) for n in _names(rubric)]
    return list({f: (f, forms) for f, forms in facts}.values())


def _unexposed(rubric: str, text: str) -> list[str]:
    return [f for f, forms in rubric_facts(rubric) if not _found(forms, text)]


# --------------------------------------------------------------------------- what the judge sees


def _text(value: Any) -> Iterator[str]:
    """Every string and number inside ``value``; a string holding JSON (a tool result) is
    read as the values it holds as well."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            yield v
            if v[:1] in ("{", "["):
                with contextlib.suppress(ValueError, RecursionError):
                    stack.append(json.loads(v))
        elif isinstance(v, bool) or v is None:
            continue
        elif isinstance(v, (int, float)):
            yield repr(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)


def _seen(value: Any) -> str:
    return _ISO_T.sub(r"\1 \2", "\n".join(_text(value)).casefold())


def _parts(evidence: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, text) of each part of the judge's evidence: its messages, its calls, the
    records of each collection."""
    parts = [
        ("the messages", _seen([evidence.get("conversation"), evidence.get("final_reply")])),
        ("the calls", _seen([evidence.get("audit_log"), evidence.get("changes")])),
    ]
    for service, collections in (evidence.get("state") or {}).items():
        parts += [(f"{service}.{name}", _seen(records)) for name, records in collections.items()]
    return parts


def _shown(declared: dict[str, Any] | None) -> str:
    if declared is None:
        return "the conversation and the calls, no records (the default)"
    what = {"all": "the conversation", "assistant": "the assistant's replies",
            "final": "the final reply", "none": "no message"}[declared["messages"]]  # fmt: skip
    what += ", the calls" if declared["calls"] else ", no call"
    names = declared["state"]
    return what + (f", the records of {', '.join(names)}" if names else ", no records")


def judge_context_problems(spec: EnvironmentSpec, k: int, oracle: EpisodeResult) -> list[Problem]:
    """``judge_rubric_out_of_context`` for each judge check of task ``k``, against the
    reference run ``oracle``: the judge is shown the reference as it would be graded."""
    task = spec.tasks[k]
    calls = [Call.of(e) for e in oracle.audit_log]
    replies = replies_by_turn(oracle.transcript)
    out: list[Problem] = []
    for g, grader in enumerate(task.graders):
        leaves = [(path, leaf) for path, leaf, _ in _judges(grader.check, ())]
        if not leaves:
            continue
        view = grader_view(
            task,
            grader.at_turn,
            final_state=oracle.final_state,
            turn_states=oracle.turn_snapshots,
            calls=calls,
            replies=replies,
            transcript=oracle.transcript,
        )
        if view is None:  # the reference never reached the grader's turn: reported elsewhere
            continue
        everything = {"kind": "judge", "context": {"state": sorted(view.state)}}
        parts = _parts(judge_evidence(judge_context(everything, view)))
        for path, leaf in leaves:
            facts = rubric_facts(str(leaf.get("rubric", "")))
            carried = [(f, forms) for f, forms in facts if any(_found(forms, t) for _, t in parts)]
            if not carried:
                continue
            shown = _seen(judge_evidence(judge_context(leaf, view)))
            hidden = [(f, forms) for f, forms in carried if not _found(forms, shown)]
            if hidden:
                ptr = pointer("tasks", k, "graders", g, "check", *path)
                wheres = [w for w, t in parts if any(_found(forms, t) for _, forms in hidden)]
                declared = declared_context(leaf.get("context"))
                out.append(_out_of_context(ptr, [f for f, _ in hidden], wheres, declared))
    return out


def _out_of_context(
    ptr: str, hidden: list[str], wheres: list[str], declared: dict[str, Any] | None
) -> Problem:
    facts = ", ".join(f"'{h}'" for h in hidden[:5])
    needs = []
    if "the messages" in wheres:
        needs.append('"messages": "all"')
    if "the calls" in wheres:
        needs.append('"calls": true')
    collections = [w for w in wheres if w not in ("the messages", "the calls")]
    if collections:
        needs.append(f'"state": {json.dumps(collections[:5])}')
    return error(
        "judge_rubric_out_of_context",
        ptr,
        f"The rubric names {facts}, which the reference run carries (in "
        f"{', '.join(wheres[:5])}) but the judge is not shown: it is shown "
        f"{_shown(declared)}, so even the reference cannot be judged to meet the rubric.",
        f'Show the judge where the fact is (in the check\'s "context": {" or ".join(needs)}), '
        "or take the fact out of the rubric.",
    )


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
        "whatever it is shown, can know or check it.",
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
