"""Corrections make new versions, re-graded by replaying the corrected transcript."""

import pytest

from apps.core.exceptions import ApplicationError
from apps.curation.models import Demonstration, DemonstrationVersion
from apps.curation.services import (
    demonstration_claim,
    demonstration_correct,
    demonstration_review,
)

pytestmark = pytest.mark.django_db


def _booking(demonstrations):
    return next(d for d in demonstrations if d.task_key == "book-q3-review")


def _final_reply_index(transcript):
    return max(
        i for i, m in enumerate(transcript) if m["role"] == "assistant" and not m.get("tool_calls")
    )


def test_editing_a_reply_makes_a_regraded_version(demonstrations, reviewer):
    demo = _booking(demonstrations)
    original = demo.current_version
    index = _final_reply_index(original.transcript)
    version = demonstration_correct(
        demonstration=demo,
        user=reviewer,
        edits=[{"op": "edit", "index": index, "content": "Booked Thursday 16:00; Dana knows."}],
        note="Shorter reply.",
    )
    demo.refresh_from_db()
    original.refresh_from_db()
    assert version.number == 2
    assert demo.current_version == version
    assert version.transcript[index]["content"] == "Booked Thursday 16:00; Dana knows."
    assert original.transcript[index]["content"] != version.transcript[index]["content"]
    assert (version.score, version.passed, version.strict, version.flag) == (1.0, True, True, "")
    assert version.grading["divergent_calls"] == []
    assert version.changes[0]["op"] == "edit"
    assert (version.created_by, version.note) == (reviewer, "Shorter reply.")
    assert (demo.status, demo.review_round, demo.regrade_flag) == ("pending", 2, "")


def test_dropping_the_state_changing_calls_flips_and_flags(demonstrations, reviewer):
    demo = _booking(demonstrations)
    transcript = demo.current_version.transcript
    create_at = next(
        i
        for i, m in enumerate(transcript)
        if m["role"] == "assistant"
        and any(c["function"]["name"] == "create_event" for c in m.get("tool_calls") or [])
    )
    version = demonstration_correct(
        demonstration=demo, user=reviewer, edits=[{"op": "truncate", "index": create_at}]
    )
    demo.refresh_from_db()
    assert len(version.transcript) == create_at
    assert version.passed is False
    assert version.flag == "passed→failed"
    assert demo.regrade_flag == "passed→failed"
    verdicts = {v["grader_id"]: v["status"] for v in version.grading["verdicts"]}
    assert verdicts["event-booked"] == "failed"
    assert verdicts["dana-told"] == "failed"
    assert demo.score == version.score < 0.75


def test_excluding_a_turn_sets_weight_zero_and_keeps_the_grade(demonstrations, reviewer):
    demo = _booking(demonstrations)
    index = _final_reply_index(demo.current_version.transcript)
    version = demonstration_correct(
        demonstration=demo, user=reviewer, edits=[{"op": "weight", "index": index, "weight": 0}]
    )
    assert version.transcript[index]["weight"] == 0
    assert version.passed is True
    again = demonstration_correct(
        demonstration=demo, user=reviewer, edits=[{"op": "weight", "index": index, "weight": 1}]
    )
    assert "weight" not in again.transcript[index]
    assert again.number == 3


@pytest.mark.parametrize(
    ("edits", "message"),
    [
        ([], "at least one edit"),
        ([{"op": "explode", "index": 2}], "Each edit needs an op"),
        ([{"op": "edit", "index": 999, "content": "x"}], "Message 999 does not exist"),
        ([{"op": "edit", "index": 1, "content": "x"}], "Only assistant messages"),
        ([{"op": "weight", "index": 0, "weight": 0}], "Only assistant messages"),
        ([{"op": "truncate", "index": 1}], "keeps its system prompt"),
        ([{"op": "weight", "index": 2, "weight": 5}], "weight is 0"),
        ([{"op": "weight", "index": 2, "weight": 1}], "change nothing"),
    ],
)
def test_invalid_corrections_change_nothing(demonstrations, reviewer, edits, message):
    demo = _booking(demonstrations)
    assert demo.current_version.transcript[2]["role"] == "assistant"
    with pytest.raises(ApplicationError, match=message):
        demonstration_correct(demonstration=demo, user=reviewer, edits=edits)
    assert DemonstrationVersion.objects.filter(demonstration=demo).count() == 1


def test_correcting_a_decided_item_reopens_it(demonstrations, reviewer, admin):
    demo = _booking(demonstrations)
    demonstration_review(demonstration=demo, user=reviewer, decision="approved")
    index = _final_reply_index(demo.current_version.transcript)
    demonstration_correct(
        demonstration=demo, user=admin, edits=[{"op": "weight", "index": index, "weight": 0}]
    )
    demo.refresh_from_db()
    assert (demo.status, demo.review_round, demo.decided_at) == ("pending", 2, None)
    # The reviewer who approved round 1 may review the corrected version.
    assert demonstration_claim(demonstration=demo, user=reviewer) is True


def test_someone_elses_claim_blocks_a_correction(demonstrations, reviewer, admin):
    demo = _booking(demonstrations)
    demonstration_claim(demonstration=demo, user=admin)
    with pytest.raises(ApplicationError, match="Another reviewer"):
        demonstration_correct(
            demonstration=demo, user=reviewer, edits=[{"op": "truncate", "index": 3}]
        )
    assert Demonstration.objects.get(pk=demo.pk).current_version.number == 1


def test_a_deleted_task_still_allows_text_corrections_unregraded(demonstrations, reviewer):
    demo = _booking(demonstrations)
    demo.task.delete()
    demo.refresh_from_db()
    index = _final_reply_index(demo.current_version.transcript)
    version = demonstration_correct(
        demonstration=demo, user=reviewer, edits=[{"op": "edit", "index": index, "content": "ok"}]
    )
    assert (version.flag, version.passed, version.score) == ("not re-graded", None, None)
    assert version.grading["error"] == (
        "The environment no longer has the task “book-q3-review” (deleted or renamed)."
    )
