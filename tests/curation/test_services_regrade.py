"""Re-grading on change: a grader edit + validation starts a job that lists the flips."""

import pytest

from apps.core.models import Job, JobStatus
from apps.curation.models import Demonstration, DemonstrationVersion
from apps.curation.services import demonstration_review, regrade_job_start, regrade_transcript
from apps.curation.tasks import regrade_demonstrations_task
from apps.environments.models import Grader
from apps.environments.services import environment_validate, grader_update

pytestmark = pytest.mark.django_db


def _validate(environment):
    environment.refresh_from_db()
    return environment_validate(environment=environment)


def _skip_calendar_check(demo):
    """Make the demonstration a teacher's that booked without reading the calendar first:
    it still passes (0.8) under the example's graders, unlike a stricter edit of them."""
    version = demo.current_version
    transcript = [
        m
        for m in version.transcript
        if not (m.get("tool_calls") and m["tool_calls"][0]["function"]["name"] == "list_events")
        and m.get("tool_call_id") != _call_id(version.transcript, "list_events")
    ]
    graded = regrade_transcript(demonstration=demo, transcript=transcript)
    DemonstrationVersion.objects.filter(pk=version.pk).update(
        transcript=transcript, grading=graded.grading, score=graded.score, passed=graded.passed
    )
    return graded


def _call_id(transcript, tool):
    for m in transcript:
        for call in m.get("tool_calls") or []:
            if call["function"]["name"] == tool:
                return call["id"]
    raise AssertionError(tool)


def test_a_grader_edit_regrades_and_lists_the_flips(demonstrations, curation_environment, reviewer):
    booking = next(d for d in demonstrations if d.task_key == "book-q3-review")
    others = [d for d in demonstrations if d != booking]
    graded = _skip_calendar_check(booking)
    assert (graded.score, graded.passed) == (pytest.approx(0.8), True)
    demonstration_review(demonstration=booking, user=reviewer, decision="approved")
    grader = Grader.objects.get(task=booking.task, key="checked-calendar-first")
    grader_update(grader=grader, data={"weight": 3.0})

    report = _validate(curation_environment)
    assert report.valid is True  # the oracle still reads the calendar first
    job = Job.objects.get(kind="curation.regrade")
    assert job.params == {"environment": curation_environment.pk, "only_stale": True}
    assert job.progress_total == 3

    regrade_demonstrations_task(job.pk)

    job.refresh_from_db()
    curation_environment.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED
    assert job.result["flipped"] == [booking.pk]
    assert job.result["failed"] == []
    assert job.message == "Re-graded 3 demonstrations; 1 flipped."
    booking.refresh_from_db()
    version = booking.current_version
    assert booking.regrade_flag == "passed→failed"
    assert (booking.status, booking.review_round) == ("pending", 2)
    assert (version.passed, version.score) == (False, pytest.approx(0.6))
    assert version.grading["previous"]["passed"] is True
    assert version.environment_revision == curation_environment.revision == 2
    for demo in others:
        demo.refresh_from_db()
        assert demo.regrade_flag == ""
        assert demo.current_version.environment_revision == 2
        assert demo.current_version.passed is True

    # A redelivered message finds nothing stale and keeps the flips it recorded.
    Job.objects.filter(pk=job.pk).update(status=JobStatus.PENDING)
    regrade_demonstrations_task(job.pk)
    job.refresh_from_db()
    assert job.message == "Re-graded 0 demonstrations; 1 flipped."
    assert job.result["flipped"] == [booking.pk]


def test_validation_without_demonstrations_starts_nothing(curation_environment):
    _validate(curation_environment)
    assert not Job.objects.filter(kind="curation.regrade").exists()


def test_regrade_by_hand_reuses_an_active_job(demonstrations, project, reviewer):
    first = regrade_job_start(project=project, user=reviewer, only_stale=False)
    second = regrade_job_start(project=project, user=reviewer, only_stale=False)
    assert first == second
    assert first.progress_total == 3
    regrade_demonstrations_task(first.pk)
    first.refresh_from_db()
    assert (first.status, first.result["flipped"]) == (JobStatus.SUCCEEDED, [])
    assert Demonstration.objects.filter(regraded_at__isnull=False).count() == 3


def test_a_whole_spec_edit_regrades_and_relinks_the_tasks(demonstrations, curation_environment):
    from apps.environments.services import environment_replace_spec
    from apps.environments.specs import environment_spec

    document = environment_spec(curation_environment)
    document["description"] = "Edited as a whole."
    environment_replace_spec(environment=curation_environment, spec=document)
    assert Demonstration.objects.filter(task__isnull=True).count() == 3  # rows recreated
    _validate(curation_environment)
    job = Job.objects.get(kind="curation.regrade")
    regrade_demonstrations_task(job.pk)
    job.refresh_from_db()
    assert job.message == "Re-graded 3 demonstrations; 0 flipped."
    for demo in demonstrations:
        demo.refresh_from_db()
        assert demo.task.key == demo.task_key
        assert demo.task.environment_id == curation_environment.pk
        assert demo.current_version.passed is True
