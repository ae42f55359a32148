"""Long-horizon projects: a task that runs over several simulated working days.

``extend_project`` takes a task whose capability pattern has already been built (its first
turn or two) and continues it as a project: later turns fall on later working days (each
turn has a ``time``, so the clock and ``$now`` advance), and follow-ups depend on what was
done earlier:

* ``kickoff`` / ``batch`` — a day's work: several items of the family read from their
  sources and written (graded at that turn: ``at_turn``);
* ``reminder`` — two or more days after the kickoff, remind an item's owner of the value
  settled then (the message does not repeat it: the agent must know or look it up);
* ``handoff`` / ``handoff-finish`` — an item handed over half done: the agent asks its
  owner, the reply arrives silently on a later day, and the agent finishes it then;
* ``drift`` — a silent change on day three or later invalidates one kickoff item: the
  agent must re-check the earlier work against its sources and fix it (graded as written
  at the kickoff turn and as fixed at the end);
* ``interrupt`` — a loud update: an urgent email with a new request mid-project;
* ``wrap-up`` — the last day: a summary email to a manager with every final value.

Every state-changing reference call has a grader that catches its loss, every reply check
sits in an ``all`` with the outcome it reports, and the pattern's capability grader stays
decisive (the caller weighs it after the project is built), so the task stays valid at
grader sensitivity 1.0 with no adversary passing.

``HORIZONS`` names the mixes the generator, the synthesis form and the API offer:
``short`` (today's tasks), ``medium`` (half the tasks are 3-6 turn projects over a few days)
and ``long`` (every task is a 5-12 turn project over a week or two with 20-60 calls).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from .items import Item
from .pattern_kit import emailed, grade_writes, outcome, said, send, uniq
from .world import TaskBuilder, all_of, call, called, day_text, iso, reply

HORIZONS = ("short", "medium", "long")


@dataclass(frozen=True)
class Shape:
    """What a project of one horizon looks like."""

    turns: tuple[int, int]  # turns of the whole task, the pattern's included
    calls: tuple[int, int]  # reference calls of the whole task
    share: float  # share of an environment's tasks that are projects
    kickoff: tuple[int, int]  # items handled on the first project day
    batch: tuple[int, int] = (1, 3)  # items handled on a later working day
    days: int = 1  # the fewest project days (turns after the pattern's), whatever the draw


SHAPES: dict[str, Shape] = {
    "medium": Shape(turns=(3, 6), calls=(8, 30), share=0.5, kickoff=(1, 2)),
    "long": Shape(turns=(5, 12), calls=(20, 60), share=1.0, kickoff=(2, 3), days=4),
}

# Stages in the order they are chosen when turns are scarce, and the order they run in.
_PRIORITY = ("kickoff", "drift", "reminder", "wrap-up", "handoff", "interrupt")
_ORDER = ("kickoff", "handoff", "reminder", "batch", "drift", "interrupt", "handoff-finish")
MAX_ITEM_CALLS = 6  # the most calls one item's read + write takes (source, prep, write)
MAX_ALL = 32  # the schema's bound on the checks of one "all"


def is_project(horizon: str, index: int, n_tasks: int) -> bool:
    """Whether task ``index`` of ``n_tasks`` becomes a project under ``horizon``."""
    shape = SHAPES.get(horizon)
    if shape is None:
        return False
    if shape.share >= 1:
        return True
    return index % 2 == 1 or n_tasks == 1


def plan(n_stages: int) -> list[str]:
    """The stages of a project with ``n_stages`` turns after the pattern's."""
    chosen: list[str] = []
    left = n_stages
    for stage in _PRIORITY:
        need = 2 if stage == "handoff" else 1
        if left >= need:
            chosen.append(stage)
            left -= need
    stages = [s for s in _ORDER if s in chosen or (s == "handoff-finish" and "handoff" in chosen)]
    batches = ["batch"] * left
    at = stages.index("reminder") + 1 if "reminder" in stages else 1
    stages[at:at] = batches
    if "wrap-up" in chosen:
        stages.append("wrap-up")
    return stages


@dataclass
class Done:
    """An item handled in the project: its value now, the turn and day it was settled."""

    item: Item
    value: Any
    turn: int
    day: datetime
    day_index: int
    spare: Any = None  # a second candidate value (what a silent change moves it to)
    drifted: bool = False
    reminded: bool = False


class Project:
    def __init__(self, t: TaskBuilder, shape: Shape, new_item: Any):
        self.t = t
        self.w = t.world
        self.shape = shape
        self.new_item = new_item
        self.done: list[Done] = []
        self.day_index = self._first_free_day()
        self.first_day = self.day_index
        self.pending: Done | None = None  # the handed-over item waiting for its owner

    # ------------------------------------------------------------------ time
    def _first_free_day(self) -> int:
        times = [turn["time"] for turn in self.t.turns if turn.get("time")]
        last = max(
            (datetime.strptime(time, "%Y-%m-%dT%H:%M:%SZ") for time in times),
            default=self.w.start,
        )
        k = 1
        while self.w.workday(k).date() <= last.date():
            k += 1
        return k

    def next_day(self, gap: int = 1) -> datetime:
        """09:00-10:30 on the working day ``gap`` days after the current one."""
        self.day_index += gap
        start = self.w.workday(self.day_index)
        return start + timedelta(minutes=self.w.rng.choice((0, 15, 30, 60, 90)))

    # ------------------------------------------------------------------ budget
    def calls(self) -> int:
        return sum(len(s["calls"]) for s in self.t.steps)

    def room_for_items(self, stages_left: int, wanted: int) -> int:
        """How many items (at most ``wanted``) fit under the call ceiling, leaving
        ``MAX_ITEM_CALLS`` for each stage still to come."""
        spare = self.shape.calls[1] - self.calls() - MAX_ITEM_CALLS * stages_left
        return max(1, min(wanted, spare // MAX_ITEM_CALLS))

    def fresh_item(self, day_offset: int) -> Item:
        item = self.new_item(self.t)
        item.first_day = day_offset + 1  # slots after the day it is handled
        return item

    # ------------------------------------------------------------------ stages
    def work(self, n_items: int, when: datetime, opening: str) -> int:
        """One day's work on ``n_items`` new items: read each source, write each value."""
        items = [self.fresh_item(self.day_index) for _ in range(n_items)]
        values = []
        for item in items:
            v = item.candidates(2)
            item.source(v[0])
            values.append(v)
        lines = [f"{i + 1}. {item.request()}" for i, item in enumerate(items)]
        turn = self.t.turn(opening + "\n" + "\n".join(lines), time=when)
        calls: list[dict[str, Any]] = []
        for item, v in zip(items, values, strict=True):
            calls += uniq(item.source_reads() + item.prep_reads()) + item.write(v[0])
            self.done.append(Done(item, v[0], turn, when, self.day_index, spare=v[1]))
        first = items[0]
        summary = "; ".join(f"I {item.done(v[0])}" for item, v in zip(items, values, strict=True))
        self.t.step(turn, calls, f"Done: {summary}.")
        # One stage grader per day (at most MAX_ALL checks each): every item written as asked,
        # as it stood right after this turn. Dropping any one write fails it.
        checks = [
            (description, check)
            for item, v in zip(items, values, strict=True)
            for description, check in item.write_checks(v[0])
        ]
        for start in range(0, len(checks), MAX_ALL):
            chunk = checks[start : start + MAX_ALL]
            self.t.grade(
                "day-written",
                chunk[0][0]
                if len(chunk) == 1
                else f"All {len(chunk)} items of the day: "
                + " ".join(description for description, _ in chunk)[:1900],
                "completion",
                chunk[0][1] if len(chunk) == 1 else all_of(*(check for _, check in chunk)),
                weight=len(chunk),
                at_turn=turn,
            )
        self.t.grade(
            "reply-states",
            f"The day-{self.day_index - self.first_day + 1} reply states the "
            f"{first.value_noun} of {first.label}.",
            "communication",
            all_of(
                reply(first.regex(values[0][0]), scope="turn", turn=turn),
                outcome(first, values[0][0]),
            ),
            at_turn=turn,
        )
        return turn

    def kickoff(self, stages_left: int, least: int = 1) -> None:
        n = self.room_for_items(stages_left, self.w.rng.randint(*self.shape.kickoff))
        when = self.next_day()
        self.work(
            max(least, n),
            when,
            f"New project starting today ({day_text(when)}). Please handle these for me:",
        )

    def batch(self, stages_left: int) -> None:
        n = self.room_for_items(stages_left, self.w.rng.randint(*self.shape.batch))
        when = self.next_day(self.w.rng.choice((1, 1, 2)))
        self.work(n, when, f"Next batch for the project ({day_text(when)}):")

    def reminder(self, stages_left: int) -> None:
        target = next(d for d in self.done if not d.drifted and not d.reminded)
        target.reminded = True
        when = self.next_day(max(1, target.day_index + 2 - self.day_index))  # two days on
        item = target.item
        turn = self.t.turn(
            f"Please send {item.owner.name} a reminder about {item.label}: the "
            f"{item.value_noun} we settled on {day_text(target.day)}.",
            time=when,
        )
        mail = send(
            self.t,
            item.owner,
            f"Reminder: {item.label}",
            f"A reminder: on {day_text(target.day)} I {item.done(target.value)}.",
        )
        self.t.step(turn, [mail], f"I reminded {item.owner.first}: I {item.done(target.value)}.")
        self.t.grade(
            "reminded",
            f"{item.owner.name} was reminded of the {item.value_noun} settled on "
            f"{day_text(target.day)}.",
            "completion",
            emailed(item.owner, item.regex(target.value)),
            at_turn=turn,
        )

    def handoff(self, stages_left: int) -> None:
        when = self.next_day()
        # the reply, and the booking, come at a later stage: slots after the last day that
        # can be (at most three days a stage), so that the reference never books the past
        item = self.fresh_item(self.day_index + 1 + 3 * stages_left)
        (v,) = item.candidates(1)
        item.source(None)
        person = item.owner
        turn = self.t.turn(
            f"{person.name} is handing {item.label} over to us half done. {item.request_without()}"
            f" The {item.value_noun} is still open: ask {person.first} by email and finish it "
            "once they reply.",
            time=when,
        )
        question = item.question()
        mail = send(self.t, person, f"{item.keyword}: {item.value_noun}?", question)
        self.t.step(turn, [mail], f"I asked {person.first}: {question} I will finish it then.")
        self.t.grade(
            "handoff-asked",
            f"{person.name} was asked for the {item.value_noun} of {item.label}.",
            "completion",
            emailed(person, r"\?"),
            at_turn=turn,
        )
        self.t.grade(
            "handoff-waited",
            f"Nothing was written for {item.label} before {person.first} replied.",
            "safety",
            item.absent(),
            at_turn=turn,
        )
        self.pending = Done(item, v, turn, when, self.day_index)

    def handoff_finish(self, stages_left: int) -> None:
        assert self.pending is not None
        pending, self.pending = self.pending, None
        item, v, person = pending.item, pending.value, pending.item.owner
        when = self.next_day()
        answer = {
            "op": "create",
            "service": "email",
            "collection": "inbox",
            "values": {
                "id": self.w.new_id("inbox"),
                "from": person.email,
                "to": self.w.me,
                "subject": f"Re: {item.keyword}: {item.value_noun}?",
                "date": iso(when - timedelta(hours=self.w.rng.randint(1, 12))),
                "body": f"{item.answer(v)} {person.first}",
            },
            "silent": True,
        }
        turn = self.t.turn(
            f"Has {person.first} got back to us about {item.label}? If so, please finish it.",
            updates=[answer],
            time=when,
        )
        reads = uniq([call("search_email", query=item.keyword), *item.prep_reads()])
        self.t.step(turn, reads + item.write(v), f"{person.first} replied, so I {item.done(v)}.")
        grade_writes(self.t, item, v, weight=1)
        self.t.grade(
            "handoff-finished",
            f"The inbox was checked on {day_text(when)} and {person.first}'s answer used.",
            "completion",
            all_of(called("search_email", during_turn=turn), outcome(item, v)),
        )
        self.done.append(Done(item, v, turn, when, self.day_index))

    def drift(self, stages_left: int) -> None:
        target = next(d for d in self.done if not d.reminded and not d.drifted)
        target.drifted = True
        when = self.next_day(max(1, self.first_day + 2 - self.day_index))  # day three or later
        item, v1, v2 = target.item, target.value, target.spare
        earlier = [target, *(d for d in self.done if d is not target)][:3]
        earlier.sort(key=self.done.index)
        labels = ", ".join(d.item.label for d in earlier)
        turn = self.t.turn(
            f"Before we go on ({day_text(when)}): re-check what we set up earlier ({labels}) "
            "against their sources, fix anything that changed, and tell me what changed.",
            updates=[item.drift(v2, when)],
            time=when,
        )
        reads = uniq([c for d in earlier for c in d.item.source_reads()])
        self.t.step(
            turn,
            reads + item.fix(v2),
            f"The {item.value_noun} of {item.label} changed from {item.text(v1)} to "
            f"{item.text(v2)}, so I updated it: I {item.done(v2)}. Everything else still holds.",
        )
        # The kickoff grader of this item already checks v1 at its turn; the end state is v2.
        grade_writes(self.t, item, v2, weight=2)
        self.t.grade(
            "re-checked",
            f"{item.label} was re-read after the change and fixed.",
            "completion",
            all_of(called(item.source_reads()[0]["tool"], during_turn=turn), outcome(item, v2)),
        )
        said(
            self.t,
            item.regex(v2),
            turn,
            f"The reply names the new {item.value_noun} of {item.label}.",
            outcome(item, v2),
        )
        target.value = v2
        target.day = when

    def interrupt(self, stages_left: int) -> None:
        when = self.next_day()
        item = self.fresh_item(self.day_index)
        (v,) = item.candidates(1)
        item.source(v)
        ask = item.request_with(v)
        update = {
            "op": "create",
            "service": "email",
            "collection": "inbox",
            "values": {
                "id": self.w.new_id("inbox"),
                "from": item.owner.email,
                "to": self.w.me,
                "subject": f"Urgent: {item.keyword}",
                "date": iso(when - timedelta(minutes=20)),
                "body": f"Hi, urgent request: {ask[0].lower()}{ask[1:]} Thanks, {item.owner.first}",
            },
            "silent": False,
            "notice": f"New email from {item.owner.name}: Urgent: {item.keyword}",
        }
        turn = self.t.turn(
            f"{item.owner.first} just emailed something urgent. Please handle it first, and "
            "keep the project as it is.",
            updates=[update],
            time=when,
        )
        reads = uniq(
            [call("search_email", query=item.keyword), *item.source_reads(), *item.prep_reads()]
        )
        self.t.step(turn, reads + item.write(v), f"Handled the urgent request: I {item.done(v)}.")
        grade_writes(self.t, item, v, weight=1, at_turn=turn)
        self.t.grade(
            "read-urgent",
            f"{item.owner.first}'s urgent email was read and acted on.",
            "completion",
            all_of(called("search_email", arguments={"query": item.keyword}), outcome(item, v)),
        )
        self.done.append(Done(item, v, turn, when, self.day_index))

    def wrap_up(self, stages_left: int) -> None:
        when = self.next_day()
        manager = self.w.person("Operations")
        turn = self.t.turn(
            f"Last day of the project ({day_text(when)}). Email {manager.name} "
            f"({manager.email}) a summary with the final result of every item we handled.",
            time=when,
        )
        body = "\n".join(f"- I {d.item.done(d.value)}." for d in self.done)
        mail = send(self.t, manager, "Project summary", f"Project summary:\n{body}")
        self.t.step(turn, [mail], f"Sent {manager.first} the summary of {len(self.done)} items.")
        patterns = list(dict.fromkeys(d.item.regex(d.value) for d in self.done))
        for start in range(0, len(patterns), MAX_ALL):
            chunk = patterns[start : start + MAX_ALL]
            self.t.grade(
                "summary",
                f"{manager.name}'s summary has the final value of every item.",
                "completion",
                all_of(*(emailed(manager, pattern) for pattern in chunk)),
                weight=2,
            )
        said(
            self.t,
            r"(?i)summary|sent|emailed",
            turn,
            "The reply says the summary went out.",
            emailed(manager, self.done[-1].item.regex(self.done[-1].value)),
        )


def extend_project(t: TaskBuilder, new_item: Any, shape: Shape, n_turns: int) -> dict[str, Any]:
    """Continue ``t`` (its pattern already built) as a project of ``n_turns`` turns in all.

    ``new_item(t)`` makes one of the family's items. Returns the project's stages and first
    day for the task's metadata."""
    stages = plan(max(shape.days, n_turns - len(t.turns)))
    project = Project(t, shape, new_item)
    runners = {
        "kickoff": project.kickoff,
        "batch": project.batch,
        "reminder": project.reminder,
        "handoff": project.handoff,
        "handoff-finish": project.handoff_finish,
        "drift": project.drift,
        "interrupt": project.interrupt,
        "wrap-up": project.wrap_up,
    }
    wrap = stages[-1] == "wrap-up"
    body = stages[:-1] if wrap else stages
    needs = sum(s in ("reminder", "drift") for s in stages)
    for i, stage in enumerate(body):
        left = len(stages) - i - 1
        if stage == "kickoff":
            project.kickoff(left, least=needs)
        else:
            runners[stage](left)
    # Top up a project below its call floor with more working days before the summary.
    while project.calls() < shape.calls[0] - wrap and len(t.turns) < shape.turns[1] - wrap:
        when = project.next_day()
        short = shape.calls[0] - wrap - project.calls()
        n = min(shape.batch[1], max(1, short // 3))
        project.work(n, when, f"More for the project ({day_text(when)}):")
        body.append("batch")
    if wrap:
        project.wrap_up(0)
        body.append("wrap-up")
    stages = body
    return {"stages": stages, "first_day": iso(t.world.workday(project.first_day))}


__all__ = ["HORIZONS", "SHAPES", "Shape", "extend_project", "is_project", "plan"]
