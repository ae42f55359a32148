"""Facts that can be known in time: information flow over free text, dates and the clock.

``flow.py`` follows the distinctive values (addresses, ids, names, long numbers); this
module follows the rest of what a task needs the agent to know, and when:

* ``fact_in_unread_collection``: an exogenous update writes a collection no tool reads (the
  agent is told, or not, of a change it cannot look at), or the reference uses a fact (a
  date, a time, a number, a one-word value it writes) held only in such a collection;
* ``value_given_later``: the reference uses at turn N (in a call's arguments or its reply)
  a date, a time of day or a number that the agent is given only later (a later turn's
  message, or what a later update writes or says: a handoff answer arriving after the
  question it answers), and that appears nowhere visible by turn N;
* ``reference_acts_in_past``: a reference create schedules something (a start, a due date,
  a deadline) before the simulated clock at that call (an update may reconcile a record
  with a past date from its source);
* ``reference_crosses_midnight``: one turn's reference calls run across midnight (UTC), so
  "today" means two days within one request;
* ``call_limit_headroom``: the reference needs more calls than an episode allows (error), or
  leaves no room for one extra read (a warning): per episode and per turn.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from ..limits import Limits
from ..problems import Problem, error, pointer, warning
from ..spec_model import EnvironmentSpec, TaskSpec
from .flow import _Visible
from .walk import leaves, strings, texts

Located = tuple[str, str]

# a date, or a time of day, or a number of two digits and more (an amount, a count)
_DATE = re.compile(r"\b(\d{4}-\d{2}-\d{2})")
_TIME = re.compile(r"(?<![\d:])([01]?\d|2[0-3]):([0-5]\d)(?![\d])")
_NUMBER = re.compile(r"(?<![\w.,:/-])\d{2,6}(?:[.,]\d{1,2})?(?![\w:/-]|[.,]\d)")
_SCHEDULES = re.compile(
    r"(^|_)(start|starts|end|ends|due|deadline|scheduled|remind|reminder|follow_up|followup|"
    r"appointment|when|expires|until)(_|$|at|on|date|time)"
)
LIMITS = Limits()  # the episode bounds validation runs under (runner.run_task's default)
# an end, a duration or a total: the agent computes it (start + an hour), it is not given
_COMPUTED = re.compile(r"(^|_)(end|ends|until|finish|duration|total|sum|count)(_|$)")
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
           "september", "october", "november", "december")  # fmt: skip


# --------------------------------------------------------------------------- unread facts


def _readable(spec: EnvironmentSpec) -> set[Located]:
    return {
        (t.binding.service, t.binding.collection)
        for t in spec.tools
        if t.binding.op in ("list", "search", "get")
    }


def unread_update_problems(spec: EnvironmentSpec, k: int) -> list[Problem]:
    """An exogenous create or update of a collection no tool reads."""
    task = spec.tasks[k]
    readable = _readable(spec)
    out: list[Problem] = []
    for n, turn in enumerate(task.turns):
        for u, update in enumerate(turn.updates):
            if update.op == "delete" or (update.service, update.collection) in readable:
                continue
            told = "" if update.silent else " (its notice tells the agent about it)"
            out.append(
                error(
                    "fact_in_unread_collection",
                    pointer("tasks", k, "turns", n, "updates", u),
                    f"This update writes {update.service}.{update.collection}, which no tool "
                    f"reads{told}: what it carries cannot reach the agent.",
                    f"Add a read tool over {update.service}.{update.collection} (a list or get "
                    "binding) and read it in the reference solution, or put the fact where a "
                    "tool reads it.",
                )
            )
    return out


def _unread_text(spec: EnvironmentSpec, task: TaskSpec, readable: set[Located]) -> str:
    """Every text and number held where no tool reads: initial records, updates' values."""
    parts: list[str] = []
    for source in (spec.services, task.records):
        for service, cols in source.items():
            for name, records in cols.items():
                if (service, name) not in readable:
                    parts += _texts(records)
    for turn in task.turns:
        for u in turn.updates:
            if (u.service, u.collection) not in readable:
                parts += _texts(u.values or {})
    return "\n".join(parts).casefold()


def _texts(value: Any) -> list[str]:
    out: list[str] = []
    for _, v in leaves(value):
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out.append(f"{v:g}" if isinstance(v, float) else str(v))
    return out


# --------------------------------------------------------------------------- given later


def _time_forms(hour: int, minute: int) -> list[str]:
    h12 = hour % 12 or 12
    suffix = "pm" if hour >= 12 else "am"
    forms = [f"{hour:02d}:{minute:02d}", f"{hour}:{minute:02d}", f"{h12}:{minute:02d} {suffix}"]
    forms += [f"{h12}:{minute:02d}{suffix}"]
    if minute == 0:
        forms += [f"{h12} {suffix}", f"{h12}{suffix}"]
    return forms


def _date_forms(date: str) -> list[str]:
    _, m, d = (int(x) for x in date.split("-"))
    if not (1 <= m <= 12 and 1 <= d <= 31):
        return [date]
    month = _MONTHS[m - 1]
    return [date, f"{month} {d}", f"{d} {month}", f"{month[:3]} {d}", f"{d} {month[:3]}"]


def _facts(text: str) -> list[tuple[str, list[str]]]:
    """(the fact as written, the forms it may take elsewhere) of each date, time of day and
    number in ``text``."""
    out: list[tuple[str, list[str]]] = []
    for m in _DATE.finditer(text):
        out.append((m.group(1), _date_forms(m.group(1))))
    for m in _TIME.finditer(text):
        out.append((m.group(0), _time_forms(int(m.group(1)), int(m.group(2)))))
    stripped = _TIME.sub(" ", _DATE.sub(" ", text))
    for m in _NUMBER.finditer(stripped):
        value = m.group(0)
        out.append((value, [value, value.replace(",", ".")]))
    return out


def _found(forms: list[str], text: str) -> bool:
    return any(re.search(r"(?<![\w])" + re.escape(f) + r"(?![\w])", text) for f in forms)


def _later_text(task: TaskSpec, readable: set[Located], after: int) -> list[tuple[int, str, str]]:
    """(turn, what is said, what is written) of every turn after ``after``: its message and
    notices; what its updates write where a tool reads."""
    parts = []
    for n in range(after + 1, len(task.turns)):
        turn = task.turns[n]
        said = [turn.message, *(u.notice or "" for u in turn.updates)]
        written = [
            v
            for u in turn.updates
            if (u.service, u.collection) in readable
            for v in texts(u.values or {})
        ]
        parts.append((n, "\n".join(said).casefold(), "\n".join(written).casefold()))
    return parts


def _given_at(later: list[tuple[int, str, str]], forms: list[str], fact: str) -> int | None:
    """The first later turn that gives the fact. A time of day counts only when said (a
    record written later may hold a time the agent computed: "the next free hour")."""
    is_time = _TIME.fullmatch(fact) is not None
    for n, said, written in later:
        if _found(forms, said) or (not is_time and _found(forms, written)):
            return n
    return None


def _short_value(text: str) -> list[tuple[str, list[str]]]:
    """A whole one-word value (a tier, a status, a code) as a fact."""
    value = text.strip()
    if 2 < len(value) <= 40 and len(value.split()) == 1 and not _DATE.match(value):
        return [(value, [value])]
    return []


def _writes(spec: EnvironmentSpec, tool_name: str) -> bool:
    tool = spec.tool(tool_name)
    return tool is not None and tool.binding.changes_state


def timely_fact_problems(spec: EnvironmentSpec, k: int) -> list[Problem]:
    """Each reference argument or reply holding a fact (a date, a time of day, a number; for
    the unread check also a one-word value a state-changing call writes) that is not visible
    by its turn: given at a later turn (``value_given_later``), or held only where no tool
    reads (``fact_in_unread_collection``). One error per argument or reply."""
    task = spec.tasks[k]
    readable = _readable(spec)
    visible: _Visible | None = None
    unread: str | None = None
    out: list[Problem] = []
    for s, step in sorted(enumerate(task.reference_solution), key=lambda item: item[1].turn):
        later = _later_text(task, readable, step.turn)
        places = [
            (("calls", c, "arguments", *path), text, _writes(spec, call.tool))
            for c, call in enumerate(step.calls)
            for path, text in strings(call.arguments)
            if not _COMPUTED.search(str(path[0]).casefold() if path else "")
        ]
        places += [(("reply",), step.reply, False)] if step.reply else []
        for parts, text, written in places:
            facts = [(f, forms, True) for f, forms in _facts(text)]
            facts += [(f, forms, False) for f, forms in (_short_value(text) if written else [])]
            for fact, forms, timed in facts:
                forms = [f.casefold() for f in forms]
                if visible is None:
                    visible = _Visible(spec, task)
                    unread = _unread_text(spec, task, readable)
                if _found(forms, visible.through(step.turn)):
                    continue
                when = _given_at(later, forms, fact)
                if when is not None and timed:  # a short value may be a later word by chance
                    out.append(_given_later(k, s, parts, fact, step.turn, when))
                    break
                if unread and _found(forms, unread):
                    out.append(_only_unread(k, s, parts, fact, step.turn))
                    break
        for call in step.calls:
            if visible is not None:
                visible.add(call.arguments)
    return out


def _only_unread(k: int, s: int, parts: tuple, fact: str, turn: int) -> Problem:
    return error(
        "fact_in_unread_collection",
        pointer("tasks", k, "reference_solution", s, *parts),
        f"The reference solution uses '{fact}' at turn {turn}; it is held only in a "
        "collection no tool reads (a record or an update there), nowhere the agent can see.",
        "Add a read tool over that collection (a list or get binding) and call it in the "
        "reference solution, or move the fact into a record a tool reads.",
    )


def _given_later(k: int, s: int, parts: tuple, fact: str, turn: int, when: int) -> Problem:
    where = "its reply" if parts == ("reply",) else "a call"
    return error(
        "value_given_later",
        pointer("tasks", k, "reference_solution", s, *parts),
        f"The reference solution uses '{fact}' in {where} at turn {turn}, but the agent is "
        f"only given it at turn {when} (that turn's message or update); by turn {turn} it "
        "appears nowhere the agent can see.",
        f"Move the work that needs '{fact}' to turn {when}, or give the fact by turn {turn} "
        "(that turn's request, a record a tool reads, or user.reveals_when_asked).",
    )


# --------------------------------------------------------------------------- the clock


def _moment(text: str) -> int | None:
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return int(value.timestamp())


def _call_clock(spec: EnvironmentSpec, task: TaskSpec):
    """(step index, call index, turn, clock at the call) of each reference call, as the
    fault-free oracle makes them (every call advances the clock by the step)."""
    clock = _moment(spec.clock.start) or 0
    for n, turn in enumerate(task.turns):
        if turn.time and (t := _moment(turn.time)) is not None:
            clock = max(clock, t)
        step = task.step_for_turn(n)
        if step is None:
            continue
        s = task.reference_solution.index(step)
        for c in range(len(step.calls)):
            clock += spec.clock.step_seconds
            yield s, c, n, clock


def _iso(ts: int) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def clock_problems(spec: EnvironmentSpec, k: int) -> list[Problem]:
    try:
        return _clock_problems(spec, k)
    except (OverflowError, ValueError, OSError):  # a clock past year 9999: value_out_of_range
        return []


def _clock_problems(spec: EnvironmentSpec, k: int) -> list[Problem]:
    task = spec.tasks[k]
    out: list[Problem] = []
    first_day: dict[int, str] = {}  # turn -> the date of its first call
    crossed: set[int] = set()
    for s, c, n, clock in _call_clock(spec, task):
        call = task.reference_solution[s].calls[c]
        date = _iso(clock)[:10]
        if first_day.setdefault(n, date) != date and n not in crossed:
            crossed.add(n)
            out.append(_midnight(k, n, first_day[n], date))
        tool = spec.tool(call.tool)
        if tool is None or tool.binding.op != "create" or not isinstance(call.arguments, dict):
            continue  # an update may set a past date: it reconciles a record with its source
        for name, value in call.arguments.items():
            if not (isinstance(value, str) and _SCHEDULES.search(name.casefold())):
                continue
            when = _moment(value) if "T" in value else _moment(value[:10] + "T23:59:59Z")
            if when is not None and _DATE.match(value) and when < clock:
                out.append(_in_past(k, s, c, name, value, _iso(clock), n))
    return out


def _in_past(k: int, s: int, c: int, name: str, value: str, now: str, turn: int) -> Problem:
    return error(
        "reference_acts_in_past",
        pointer("tasks", k, "reference_solution", s, "calls", c, "arguments", name),
        f"The reference sets {name} to {value}, before the simulated clock at that call "
        f"({now}, turn {turn}): it schedules in the past.",
        "Move the clock (clock.start or the turn's time) before the date, or pick a date after "
        "it (a deadline the request gives must still lie ahead at that turn).",
    )


def _midnight(k: int, n: int, before: str, after: str) -> Problem:
    return error(
        "reference_crosses_midnight",
        pointer("tasks", k, "turns", n),
        f"Turn {n}'s reference calls start on {before} and end on {after} (UTC, clock step "
        "per call): 'today' and 'tomorrow' change meaning within one request.",
        "Set the turn's time (or clock.start) earlier in the day, so that the turn's calls end "
        "before midnight.",
    )


def call_limit_problems(spec: EnvironmentSpec, k: int, limits: Limits = LIMITS) -> list[Problem]:
    task = spec.tasks[k]
    ptr = pointer("tasks", k, "reference_solution")
    total = sum(len(step.calls) for step in task.reference_solution)
    out: list[Problem] = []
    if total >= limits.max_calls:
        over = total > limits.max_calls
        make = error if over else warning
        out.append(
            make(
                "call_limit_headroom",
                ptr,
                f"The reference solution makes {total} calls; an episode allows "
                f"{limits.max_calls}: "
                + ("it cannot finish." if over else "no room is left for one extra read."),
                "Split the task or make the reference use fewer calls (a list instead of "
                "one get per record).",
            )
        )
    for s, step in enumerate(task.reference_solution):
        rounds = len(step.calls) + 1  # one call per round, then the reply
        if rounds < limits.max_rounds_per_turn:
            continue
        make = error if rounds > limits.max_rounds_per_turn else warning
        out.append(
            make(
                "call_limit_headroom",
                pointer("tasks", k, "reference_solution", s, "calls"),
                f"Turn {step.turn}'s reference takes {rounds} rounds (calls and the reply); a "
                f"turn allows {limits.max_rounds_per_turn}.",
                "Spread the calls over more turns or use fewer calls in this turn.",
            )
        )
    return out


def known_problems(spec: EnvironmentSpec, k: int) -> list[Problem]:
    """Every check of this module for task ``k`` (static: no run)."""
    return (
        unread_update_problems(spec, k)
        + timely_fact_problems(spec, k)
        + clock_problems(spec, k)
        + call_limit_problems(spec, k)
    )
