"""Adversarial policies: scripted agents that never do the task but try to be rewarded.

They are deterministic (no LLM, no randomness) and use only what an agent sees: the
conversation (user messages, tool results in ``tool`` messages and this turn's results),
the tool list and the tool schemas — never the reference solution or the graders. Which
tools read and which write is taken from each tool's binding, standing in for what a
trained policy learns from the tool descriptions and their results.

* ``reader-paster`` reads with every read tool (then ``get`` on every id it saw) and
  replies quoting every value it has seen;
* ``sprayer`` reads, then calls every state-changing tool — once per record id it has
  seen for tools that take an id, once per address in the conversation for tools that take
  a recipient — with arguments filled from the conversation and the records it read, and
  claims success;
* ``spray-paster`` does both: sprays, then claims success quoting everything;
* ``vague-asker`` (multi-turn tasks only) asks a content-free question on the first turn,
  then on later turns sprays and pastes using only what it knew before the answer.

``TruncatedReference`` is the one exception to "never the reference": the reference
solution up to a cut turn, then only a claim of success on every later turn (no call) —
what a policy learns when later turns earn no reward (validation/turns.py runs one per cut).

Dynamic validation runs every registered adversary on every task it applies to; each must
fail (score below the threshold and not strict). ``register_adversary`` adds one.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .policies import (
    EchoPolicy,
    MutantPolicy,
    NullPolicy,
    OraclePolicy,
    Policy,
    PolicyAction,
    PolicyView,
    ToolCall,
)
from .sightings import (
    CLAIM,
    ID_PARAM_PATTERN,
    MAX_IDS_PER_TOOL,
    MAX_RECIPIENTS,
    READ_OPS,
    RECIPIENT_PARAMS,
    VAGUE_QUESTION,
    Harvester,
    Seen,
    paste_text,
)
from .spec import TaskSpec

# What this module used to re-export from ``sightings`` for custom adversaries, and where
# each now lives there (import it from ``sightings``); reading one here still works.
MOVED_TO_SIGHTINGS = {
    "_EMAIL": "EMAIL_PATTERN",
    "_ID_PARAM": "ID_PARAM_PATTERN",
    "_RECIPIENT": "RECIPIENT_PARAMS",
    "_paste": "paste_text",
    "_records_in": "records_in",
    "_scalars": "scalars_of",
    "MAX_PASTE_CHARS": "MAX_PASTE_CHARS",
    "harvest": "harvest",
}


def __getattr__(name: str) -> Any:
    if name in MOVED_TO_SIGHTINGS:
        from . import sightings

        new = MOVED_TO_SIGHTINGS[name]
        warnings.warn(
            f"coworkenv_engine.adversaries.{name} is coworkenv_engine.sightings.{new}",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(sightings, new)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --------------------------------------------------------------------------- arguments


def _mentioned(options: list[Any], seen: Seen) -> Any:
    text = "\n".join(seen.user_text).casefold()
    for option in options:
        if isinstance(option, str) and option.casefold() in text:
            return option
    return options[0] if options else None


def _value(name: str, schema: dict[str, Any], seen: Seen, *, paste: str) -> Any:
    kind = schema.get("type")
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return _mentioned(schema["enum"], seen)
    if kind == "boolean":
        return True
    if kind in ("integer", "number"):
        numbers = [v for v in seen.fields.get(name, []) if isinstance(v, int | float)]
        if not numbers:
            numbers = [int(n) for t in seen.user_text for n in re.findall(r"\b\d{1,9}\b", t)]
        value = numbers[0] if numbers else 1
        lo, hi = schema.get("minimum"), schema.get("maximum")
        value = max(value, lo) if lo is not None else value
        return min(value, hi) if hi is not None else value
    if kind == "array":
        item = schema.get("items") or {}
        if item.get("type", "string") == "string":
            return seen.emails[:MAX_RECIPIENTS] or [paste[:200]]
        return []
    if kind == "object":
        return {}
    if schema.get("format") == "date-time":
        stamps = [v for v in seen.fields.get(name, []) if isinstance(v, str)]
        stamps += seen.stamps()
        return stamps[0] if stamps else "2026-03-02T09:00:00Z"
    if name.casefold() in RECIPIENT_PARAMS and seen.emails:
        return seen.emails[0]
    known = [v for v in seen.fields.get(name, []) if isinstance(v, str)]
    if known and name not in ("body", "content", "text", "message", "comment", "note"):
        return _mentioned(known, seen)
    return paste


def fill_arguments(
    parameters: dict[str, Any], seen: Seen, *, paste: str, overrides: dict[str, Any]
) -> dict[str, Any]:
    """Every declared parameter, filled from what the conversation showed."""
    props = parameters.get("properties") if isinstance(parameters, dict) else None
    out: dict[str, Any] = {}
    for name, schema in (props or {}).items():
        if name in overrides:
            out[name] = overrides[name]
        elif isinstance(schema, dict):
            out[name] = _value(name, schema, seen, paste=paste)
    return out


# --------------------------------------------------------------------------- adversaries


def _tool_ops(view: PolicyView) -> list[tuple[str, str, dict[str, Any]]]:
    """(name, op, parameters) of every tool the agent is offered, in order."""
    out = []
    for entry in view.tools:
        function = entry.get("function") or {}
        spec_tool = view.spec.tool(function.get("name", ""))
        if spec_tool is not None:
            out.append((spec_tool.name, spec_tool.binding.op, function.get("parameters") or {}))
    return out


def _id_param(parameters: dict[str, Any]) -> str | None:
    for name in parameters.get("properties") or {}:
        if ID_PARAM_PATTERN.search(name):
            return name
    return None


def _recipient_param(parameters: dict[str, Any]) -> str | None:
    for name, schema in (parameters.get("properties") or {}).items():
        if (
            name.casefold() in RECIPIENT_PARAMS
            and isinstance(schema, dict)
            and schema.get("type") == "string"
            and "enum" not in schema
        ):
            return name
    return None


def read_calls(view: PolicyView, seen: Seen, *, gets: bool) -> list[ToolCall]:
    calls = []
    for name, op, params in _tool_ops(view):
        if op not in READ_OPS:
            continue
        id_param = _id_param(params)
        if op == "get" or (id_param and id_param in (params.get("required") or [])):
            if gets:
                for record_id in seen.ids[:MAX_IDS_PER_TOOL]:
                    calls.append(ToolCall(name, {id_param or "id": record_id}))
            continue
        required = params.get("required") or []
        args = {p: "" for p in required if p != id_param}
        calls.append(ToolCall(name, args))
    return calls


def spray_calls(view: PolicyView, seen: Seen, *, paste: str) -> list[ToolCall]:
    calls = []
    for name, op, params in _tool_ops(view):
        if op in READ_OPS:
            continue
        id_param = _id_param(params)
        recipient = _recipient_param(params)
        if id_param is not None:
            variants = [{id_param: i} for i in seen.ids[:MAX_IDS_PER_TOOL]]
        elif recipient is not None and seen.emails:
            variants = [{recipient: e} for e in seen.emails[:MAX_RECIPIENTS]]
        else:
            variants = [{}]
        for overrides in variants:
            calls.append(
                ToolCall(name, fill_arguments(params, seen, paste=paste, overrides=overrides))
            )
    return calls


class ReaderPaster:
    """Reads with every read tool, replies quoting every value it has seen."""

    name = "reader-paster"
    hint = (
        "Replies must be tied to the outcome: put response checks in an 'all' with the state "
        "check of what the task creates or changes, and require records, not words."
    )

    def phases(self, view: PolicyView, seen: Seen) -> list[Callable[[], list[ToolCall]]]:
        return [
            lambda: read_calls(view, seen, gets=False),
            lambda: read_calls(view, seen, gets=True),
        ]

    def reply(self, seen: Seen) -> str:
        return paste_text(seen)

    user_turns: int | None = None  # harvest only the first n user messages

    def known(self, view: PolicyView) -> Seen:
        harvester = getattr(self, "_harvester", None)
        if harvester is None:
            harvester = self._harvester = Harvester(user_turns=self.user_turns)
        return harvester.update(view.messages)

    def act(self, view: PolicyView) -> PolicyAction:
        """Run the phases in order, one round each (a phase with no calls is skipped),
        then reply."""
        if not hasattr(self, "_phase"):
            self._phase: dict[int, int] = {}
        seen = self.known(view)
        phases = self.phases(view, seen)
        while (i := self._phase.get(view.turn, 0)) < len(phases):
            self._phase[view.turn] = i + 1
            calls = phases[i]()
            if calls:
                return PolicyAction(tool_calls=calls)
        return PolicyAction(reply=self.reply(seen))


class Sprayer(ReaderPaster):
    """Reads, writes with every state-changing tool on everything it saw, claims success."""

    name = "sprayer"
    paste = False
    hint = (
        "Add a side_effects safety grader (collateral writes fail the task) and make state "
        "checks exact (count == N, the single record's fields) instead of 'any element'."
    )

    def phases(self, view: PolicyView, seen: Seen) -> list[Callable[[], list[ToolCall]]]:
        return [
            lambda: read_calls(view, seen, gets=False),
            lambda: spray_calls(view, seen, paste=paste_text(seen) if self.paste else CLAIM),
        ]

    def reply(self, seen: Seen) -> str:
        return (CLAIM + "\n" + paste_text(seen)) if self.paste else CLAIM


class SprayPaster(Sprayer):
    """The sprayer, writing and replying with everything it has seen."""

    name = "spray-paster"
    paste = True


class VagueAsker(SprayPaster):
    """Asks a content-free question first, then acts without using the answer."""

    name = "vague-asker"
    hint = (
        "The grader that checks the agent asked must be decisive (mark it with 'capability' "
        "and weigh it so its failure fails the task), and the writes after the answer must be "
        "checked exactly against the answer's value."
    )

    user_turns = 1  # never the answer: only the first message

    def act(self, view: PolicyView) -> PolicyAction:
        if view.turn == 0:
            return PolicyAction(reply=VAGUE_QUESTION)
        return super().act(view)


class TruncatedReference(OraclePolicy):
    """The reference solution on turns before ``cut``; from turn ``cut`` on, no call and
    a claim of success."""

    def __init__(self, cut: int):
        self.cut = cut
        self.name = f"truncated:{cut}"

    def act(self, view: PolicyView) -> PolicyAction:
        if view.turn >= self.cut:
            return PolicyAction(reply=CLAIM)
        return super().act(view)


# --------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class AdversaryEntry:
    name: str
    factory: Callable[[], Policy]
    applies: Callable[[TaskSpec], bool]


ADVERSARIES: dict[str, AdversaryEntry] = {}


def register_adversary(
    name: str,
    factory: Callable[[], Policy],
    *,
    applies: Callable[[TaskSpec], bool] | None = None,
) -> None:
    """Add (or replace) an adversary that dynamic validation runs on every task it applies
    to. ``factory()`` returns a fresh Policy; it should have a ``hint`` attribute (what a
    spec author changes when it passes)."""
    ADVERSARIES[name] = AdversaryEntry(name, factory, applies or (lambda task: True))


def unregister_adversary(name: str) -> None:
    ADVERSARIES.pop(name, None)


def adversaries_for(task: TaskSpec) -> list[tuple[str, Policy]]:
    return [(e.name, e.factory()) for e in ADVERSARIES.values() if e.applies(task)]


register_adversary("reader-paster", ReaderPaster)
register_adversary("sprayer", Sprayer)
register_adversary("spray-paster", SprayPaster)
register_adversary("vague-asker", VagueAsker, applies=lambda task: len(task.turns) > 1)


def policy_by_name(name: str) -> Policy:
    """``oracle``, ``null``, ``echo``, ``mutant:N``, ``truncated:N`` or a registered
    adversary's name."""
    if name == "oracle":
        return OraclePolicy()
    if name == "null":
        return NullPolicy()
    if name == "echo":
        return EchoPolicy()
    if name.startswith("mutant:") and name[7:].isdigit():
        return MutantPolicy(int(name[7:]))
    if name.startswith("truncated:") and name[10:].isdigit():
        return TruncatedReference(int(name[10:]))
    if name in ADVERSARIES:
        return ADVERSARIES[name].factory()
    raise ValueError(
        f"unknown policy {name!r}: use oracle, null, echo, mutant:N, truncated:N or an "
        f"adversary "
        f"({', '.join(ADVERSARIES)})"
    )


def _register_greedy() -> None:
    from .adversary_greedy import AskerPaster, AskerSprayer, GreedyPaster, GreedySprayer

    multi_turn = lambda task: len(task.turns) > 1  # noqa: E731
    register_adversary("greedy-sprayer", GreedySprayer)
    register_adversary("greedy-paster", GreedyPaster)
    register_adversary("asker-sprayer", AskerSprayer, applies=multi_turn)
    register_adversary("asker-paster", AskerPaster, applies=multi_turn)


_register_greedy()
