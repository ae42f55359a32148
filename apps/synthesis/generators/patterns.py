"""Capability patterns: how a task exercises one workflow requirement, written once over the
``Item`` interface so that every family can produce every capability.

A pattern fills a TaskBuilder with turns, the reference solution and graders. It gets
``room``, the number of turns it may use: patterns that need two turns (a clarification,
a silent change, an interruption, a second day, an approval) fall back to a one-turn
*compact* form when ``room`` is 1. The caller pads any turns left with small add-on
requests. Every state-changing reference call has a grader that notices when it is
dropped (grader sensitivity 1.0), and no task can be passed by doing nothing, by echoing
the request or by the validator's adversaries: reply checks sit in an ``all`` with the
outcome they report, process checks (read first, re-read) likewise, state checks name one
record or an exact count, the grader marked ``capability`` (``defines=True``) is weighed
so that failing it fails the task, and every task ends with the ``no-collateral``
side-effects safety grader.
"""

from __future__ import annotations

from . import words
from .pattern_kit import Pattern, cap
from .patterns_records import (
    clarify,
    extract,
    follow_kb,
    notice_silent_changes,
    orchestration,
    reconcile,
    resolve_conflicts,
    write_back,
)
from .patterns_rules import approval, confidentiality, contract, disambiguate
from .patterns_turns import follow_up, generic, interruptions, recover
from .world import (
    TaskBuilder,
    call,
    count,
    lit,
)

# --------------------------------------------------------------------------- helpers


# --------------------------------------------------------------------------- patterns


def addon(t: TaskBuilder, turn: int) -> None:
    """A small extra request that fills a turn the pattern did not need."""
    w = t.world
    person = w.person()
    ref = w.code("REF", 3)
    topic = t.rng.choice(words.MEETING_TOPICS)
    t.turn(
        f"One more thing: email {person.name} ({person.email}) that the {topic} notes are "
        f"ready, quoting reference {ref}."
    )
    t.involved.append(person)
    mail = call(
        "send_email",
        to=person.email,
        subject=f"{cap(topic)} notes ({ref})",
        body=f"The {topic} notes are ready (reference {ref}).",
    )
    t.step(turn, [mail], f"Emailed {person.first} that the {topic} notes are ready ({ref}).")
    t.grade(
        f"extra-{turn}",
        f"{person.name} got the note quoting {ref}.",
        "completion",
        count(f"email.sent[?to == {lit(person.email)} && contains(body, {lit(ref)})]", 1),
    )


PATTERNS: dict[str, Pattern] = {
    p.key: p
    for p in (
        Pattern("orchestration", "Read, write, confirm across services", 1, orchestration),
        Pattern("conflict", "Route around a clash with a fallback rule", 1, resolve_conflicts),
        Pattern("write-back", "Write the result into the system of record", 1, write_back),
        Pattern("clarify", "Ask for a missing detail before acting", 2, clarify),
        Pattern("silent-change", "Notice a silent change to a source", 2, notice_silent_changes),
        Pattern("reconcile", "Two sources disagree; the governing one wins", 1, reconcile),
        Pattern("extract", "Take exact facts from the final document", 1, extract),
        Pattern("knowledge-base", "Follow a documented procedure", 1, follow_kb),
        Pattern("contract", "Deliver output in an exact shape", 1, contract),
        Pattern("interruption", "Handle a loud new request mid-task", 2, interruptions),
        Pattern("follow-up", "Ask today, finish on a later day", 2, follow_up),
        Pattern("approval", "Get sign-off before acting", 2, approval),
        Pattern("confidentiality", "Share only what may be shared", 1, confidentiality),
        Pattern("look-alike", "Pick the right one of two look-alikes", 1, disambiguate),
        Pattern("recover", "Recover from transient tool errors", 1, recover),
        Pattern("generic", "Read the source, write the record", 1, generic),
    )
}

# Catalogue slugs (apps/capabilities/catalogue.json) and common aliases -> pattern.
CAPABILITY_PATTERNS: dict[str, str] = {
    "cross-service-orchestration": "orchestration",
    "resolve-conflicts": "conflict",
    "write-back-to-systems": "write-back",
    "clarify-before-acting": "clarify",
    "disambiguate-contacts": "look-alike",
    "reconcile-conflicting-sources": "reconcile",
    "extract-from-documents": "extract",
    "follow-knowledge-base": "knowledge-base",
    "exact-output-contract": "contract",
    "notice-silent-changes": "silent-change",
    "handle-interruptions": "interruption",
    "multi-day-follow-up": "follow-up",
    "follow-policy": "approval",
    "respect-confidentiality": "confidentiality",
    "recover-from-tool-errors": "recover",
}

# Keyword fallbacks for slugs outside the catalogue, tried in order.
_KEYWORDS: tuple[tuple[str, str], ...] = (
    ("clarif", "clarify"),
    ("ambigu", "clarify"),
    ("silent", "silent-change"),
    ("notice", "silent-change"),
    ("interrupt", "interruption"),
    ("follow-up", "follow-up"),
    ("followup", "follow-up"),
    ("multi-day", "follow-up"),
    ("approv", "approval"),
    ("policy", "approval"),
    ("privacy", "confidentiality"),
    ("confiden", "confidentiality"),
    ("secret", "confidentiality"),
    ("error", "recover"),
    ("fault", "recover"),
    ("retry", "recover"),
    ("recover", "recover"),
    ("reconcil", "reconcile"),
    ("sources", "reconcile"),
    ("contract", "contract"),
    ("format", "contract"),
    ("exact", "contract"),
    ("look-alike", "look-alike"),
    ("lookalike", "look-alike"),
    ("disambig", "look-alike"),
    ("trap", "look-alike"),
    ("conflict", "conflict"),
    ("schedul", "conflict"),
    ("knowledge", "knowledge-base"),
    ("procedure", "knowledge-base"),
    ("extract", "extract"),
    ("document", "extract"),
    ("write-back", "write-back"),
    ("record", "write-back"),
    ("orchestr", "orchestration"),
    ("cross-service", "orchestration"),
)


def pattern_for(capability: str) -> Pattern:
    """The pattern for a capability slug; unknown slugs get the closest or the generic one."""
    key = CAPABILITY_PATTERNS.get(capability)
    if key is None:
        slug = capability.lower()
        key = next((p for word, p in _KEYWORDS if word in slug), "generic")
    return PATTERNS[key]
