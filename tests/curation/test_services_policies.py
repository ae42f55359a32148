"""Approval by a recorded rule beside the human queue."""

import pytest
from django.urls import reverse

from apps.core.exceptions import ApplicationError
from apps.curation.models import Demonstration, DemonstrationStatus, DemonstrationVersion, Review
from apps.curation.services import (
    demonstration_reopen,
    demonstration_review,
    demonstrations_approve_by_policy,
)


def test_strict_passes_are_approved_and_say_which_rule_did(project, demonstrations):
    first, _second, third = demonstrations
    # the oracle's runs are strict; make one merely passing
    DemonstrationVersion.objects.filter(pk=third.current_version_id).update(strict=False)
    approved = demonstrations_approve_by_policy(project=project, policy="approve-strict-passes")
    assert approved == 2
    rows = {d.pk: d for d in Demonstration.objects.all()}
    assert rows[first.pk].status == DemonstrationStatus.APPROVED
    assert rows[first.pk].approved_by_policy == "policy:approve-strict-passes"
    assert rows[first.pk].decided_at is not None
    assert rows[third.pk].status == DemonstrationStatus.PENDING
    assert rows[third.pk].approved_by_policy == ""
    assert not Review.objects.exists()  # a rule writes no review: it is not a person
    assert demonstrations_approve_by_policy(project=project, policy="approve-passes") == 1


def test_human_review_still_works_beside_the_rule(project, demonstrations, reviewer):
    first, second, _third = demonstrations
    demonstration_review(demonstration=first, user=reviewer, decision="approved")
    assert demonstrations_approve_by_policy(project=project, policy="approve-passes") == 2
    first.refresh_from_db()
    assert first.approved_by_policy == ""  # the person's decision stands as theirs
    assert Review.objects.get().reviewer == reviewer
    # reopened, a policy-approved item goes back to people, the rule's mark cleared
    demonstration_reopen(demonstration=second)
    second.refresh_from_db()
    assert (second.status, second.approved_by_policy) == (DemonstrationStatus.PENDING, "")
    demonstration_review(demonstration=second, user=reviewer, decision="approved")
    second.refresh_from_db()
    assert (second.status, second.approved_by_policy) == (DemonstrationStatus.APPROVED, "")


def test_only_the_given_batch_and_other_projects_untouched(
    project, other_project, demonstrations, teacher_batch
):
    assert demonstrations_approve_by_policy(project=other_project, policy="approve-passes") == 0
    assert demonstrations_approve_by_policy(
        project=project, policy="approve-passes", batch=teacher_batch
    ) == len(demonstrations)


def test_an_unknown_rule_is_refused_and_nothing_changes(project, demonstrations):
    with pytest.raises(ApplicationError, match="Unknown approval policy"):
        demonstrations_approve_by_policy(project=project, policy="approve-everything")
    assert not Demonstration.objects.exclude(status=DemonstrationStatus.PENDING).exists()


def test_the_page_and_the_api_name_the_rule(
    project, demonstrations, reviewer, client_for, api_client_for
):
    demonstrations_approve_by_policy(project=project, policy="approve-strict-passes")
    demo = demonstrations[0]
    page = client_for(reviewer).get(reverse("curation:detail", args=[demo.pk])).content.decode()
    assert (
        'data-testid="approved-by-policy">policy:approve-strict-passes</span>, not a person' in page
    )
    body = api_client_for(reviewer).get(f"/api/v1/demonstrations/{demo.pk}/").json()
    assert body["approved_by_policy"] == "policy:approve-strict-passes"
