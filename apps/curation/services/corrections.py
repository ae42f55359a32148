"""Corrections: a reviewer's edits make a new version, re-graded against the environment.

Edits (applied in order to a copy of the current version's transcript; indexes are message
positions in that transcript):

- ``{"op": "edit", "index": i, "content": "..."}`` — rewrite an assistant message's text;
- ``{"op": "weight", "index": i, "weight": 0 | 1}`` — exclude an assistant turn from
  training (0) or include it again (1); maps onto OpenAI ``weight``, TRL masks and
  ShareGPT loss flags;
- ``{"op": "truncate", "index": i}`` — drop message i and everything after it (the system
  prompt and the first user message always stay).

The original (version 1) is never modified. A correction that turns a passing transcript
into a failing one is flagged (``passed→failed``) on the version and on the demonstration,
which the queue shows; any correction re-opens the demonstration for review in a new round.
"""

from __future__ import annotations

import copy

from django.db import transaction
from django.utils import timezone

from apps.core.exceptions import ApplicationError
from apps.curation.models import Demonstration, DemonstrationStatus, DemonstrationVersion
from apps.curation.services.grading import NotGradable, flip_label, regrade_transcript

MAX_CONTENT = 20_000
MAX_EDITS = 200
EDIT_OPS = ("edit", "weight", "truncate")


def _index(edit: dict, transcript: list) -> int:
    index = edit.get("index")
    if isinstance(index, bool) or not isinstance(index, int):
        raise ApplicationError("Every edit needs the message's index (an integer).")
    if not 0 <= index < len(transcript):
        raise ApplicationError(
            f"Message {index} does not exist; the transcript has {len(transcript)} messages."
        )
    return index


def _assistant(transcript: list, index: int, what: str) -> dict:
    message = transcript[index]
    if not isinstance(message, dict) or message.get("role") != "assistant":
        raise ApplicationError(f"Only assistant messages can be {what}; message {index} is not.")
    return message


def apply_edits(transcript: list, edits: list[dict]) -> list:
    """The corrected copy of ``transcript`` (ApplicationError on an invalid edit)."""
    if not isinstance(edits, list) or not edits:
        raise ApplicationError("A correction needs at least one edit.")
    if len(edits) > MAX_EDITS:
        raise ApplicationError(f"At most {MAX_EDITS} edits per correction.")
    result = copy.deepcopy(transcript)
    cut = None
    for edit in edits:
        if not isinstance(edit, dict) or edit.get("op") not in EDIT_OPS:
            raise ApplicationError(f"Each edit needs an op: one of {', '.join(EDIT_OPS)}.")
        index = _index(edit, result)
        if edit["op"] == "edit":
            _edit_text(result, index, edit.get("content"))
        elif edit["op"] == "weight":
            _set_weight(result, index, edit.get("weight"))
        else:
            _check_truncation(result, index)
            cut = index if cut is None else min(cut, index)
    if cut is not None:
        result = result[:cut]
    if result == transcript:
        raise ApplicationError("These edits change nothing.")
    return result


def _edit_text(transcript: list, index: int, content) -> None:
    if not isinstance(content, str):
        raise ApplicationError("An edit needs the new text as a string.")
    if len(content) > MAX_CONTENT:
        raise ApplicationError(f"A message is at most {MAX_CONTENT} characters.")
    message = _assistant(transcript, index, "edited")
    if not content.strip() and not message.get("tool_calls"):
        raise ApplicationError("A reply cannot be empty; exclude the turn from training instead.")
    message["content"] = content if content.strip() else None


def _set_weight(transcript: list, index: int, weight) -> None:
    if weight not in (0, 1) or isinstance(weight, bool):
        raise ApplicationError("A turn's weight is 0 (excluded) or 1 (trained on).")
    message = _assistant(transcript, index, "weighted")
    if weight == 0:
        message["weight"] = 0
    else:
        message.pop("weight", None)


def _check_truncation(transcript: list, index: int) -> None:
    """Truncating at ``index`` must keep the system prompt and the first user message."""
    users = [i for i, m in enumerate(transcript) if isinstance(m, dict) and m.get("role") == "user"]
    if not users or index <= users[0]:
        raise ApplicationError(
            "A transcript keeps its system prompt and first user message: drop from "
            "a later message."
        )


def demonstration_correct(
    *, demonstration: Demonstration, user, edits: list[dict], note: str = ""
) -> DemonstrationVersion:
    """Make the next version from the current one with ``edits``, re-grade it, make it
    current and re-open the demonstration for review."""
    with transaction.atomic():
        demo = (
            Demonstration.objects.select_for_update(of=("self",))
            .select_related("current_version", "task", "environment", "run", "project")
            .get(pk=demonstration.pk)
        )
        if demo.disputed:
            raise ApplicationError(
                "This demonstration's reviewers disagree; an admin adjudicates it first."
            )
        if (
            demo.status == DemonstrationStatus.PENDING
            and demo.claimed_by_id not in (None, user.pk)
            and demo.claim_expires_at is not None
            and demo.claim_expires_at >= timezone.now()
        ):
            raise ApplicationError("Another reviewer holds this demonstration right now.")
        base = demo.current_version
        corrected = apply_edits(base.transcript, edits)
        try:
            graded = regrade_transcript(demonstration=demo, transcript=corrected)
        except NotGradable as exc:
            graded = None
            problem = str(exc)
        last = demo.versions.order_by("-number").values_list("number", flat=True).first() or 0
        version = DemonstrationVersion(
            demonstration=demo,
            number=last + 1,
            transcript=graded.transcript if graded else corrected,
            tools=graded.tools if graded else base.tools,
            audit_log=graded.audit_log if graded else [],
            exogenous_log=graded.exogenous_log if graded else [],
            grading=graded.grading if graded else {"error": problem},
            score=graded.score if graded else None,
            passed=graded.passed if graded else None,
            strict=graded.strict if graded else None,
            environment_revision=graded.environment_revision if graded else None,
            spec_hash=graded.spec_hash if graded else "",
            changes=edits,
            flag=flip_label(base.passed, graded.passed) if graded else "not re-graded",
            created_by=user,
            note=(note or "").strip()[:500],
        )
        version.full_clean()
        version.save()
        Demonstration.objects.filter(pk=demo.pk).update(
            current_version=version,
            score=version.score,
            status=DemonstrationStatus.PENDING,
            review_round=demo.review_round + 1,
            disputed=False,
            decided_at=None,
            regrade_flag="passed→failed" if version.flag == "passed→failed" else "",
        )
    demonstration.refresh_from_db()
    return version
