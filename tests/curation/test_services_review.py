"""Claiming, decisions, second review and agreement, adjudication, and what the datasets
app may read."""

from datetime import timedelta

import pytest
from django.core.exceptions import PermissionDenied
from django.utils import timezone

from apps.core.exceptions import ApplicationError
from apps.curation.models import Demonstration, DemonstrationStatus, Review
from apps.curation.selectors import demonstration_agreement, demonstrations_for_dataset
from apps.curation.services import (
    claim_held,
    demonstration_adjudicate,
    demonstration_claim,
    demonstration_claim_next,
    demonstration_release,
    demonstration_review,
)
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def second_reviewer(project):
    from apps.accounts.models import Membership, Role

    user = UserFactory(username="rev2")
    Membership.objects.create(project=project, user=user, role=Role.REVIEWER)
    return user


def test_two_claims_on_one_item_one_wins(demonstrations, reviewer, second_reviewer):
    demo = demonstrations[0]
    first = Demonstration.objects.get(pk=demo.pk)
    second = Demonstration.objects.get(pk=demo.pk)
    assert demonstration_claim(demonstration=first, user=reviewer) is True
    assert demonstration_claim(demonstration=second, user=second_reviewer) is False
    demo.refresh_from_db()
    assert demo.claimed_by == reviewer
    # The loser's "next" skips the held item.
    taken = demonstration_claim_next(queryset=Demonstration.objects.all(), user=second_reviewer)
    assert taken.pk == demonstrations[1].pk
    # And the holder cannot be overruled by a decision either.
    with pytest.raises(ApplicationError, match="Another reviewer holds"):
        demonstration_review(demonstration=demo, user=second_reviewer, decision="approved")
    assert Review.objects.count() == 0


def test_an_expired_claim_can_be_taken(demonstrations, reviewer, second_reviewer):
    demo = demonstrations[0]
    assert demonstration_claim(demonstration=demo, user=reviewer)
    Demonstration.objects.filter(pk=demo.pk).update(
        claim_expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert demonstration_claim(demonstration=demo, user=second_reviewer) is True
    demo.refresh_from_db()
    assert demo.claimed_by == second_reviewer
    assert claim_held(project=demo.project, user=reviewer) is None
    assert claim_held(project=demo.project, user=second_reviewer) == demo


def test_a_reviewer_holds_one_item_at_a_time(demonstrations, reviewer):
    assert demonstration_claim(demonstration=demonstrations[0], user=reviewer)
    assert demonstration_claim(demonstration=demonstrations[1], user=reviewer)
    held = list(Demonstration.objects.filter(claimed_by=reviewer).values_list("pk", flat=True))
    assert held == [demonstrations[1].pk]
    assert demonstration_release(demonstration=demonstrations[1], user=reviewer)
    assert not Demonstration.objects.filter(claimed_by__isnull=False).exists()


def test_next_and_previous_wrap_around(demonstrations, reviewer):
    qs = Demonstration.objects.all()
    a, b, c = (d.pk for d in demonstrations)
    assert demonstration_claim_next(queryset=qs, user=reviewer, after=a).pk == b
    assert demonstration_claim_next(queryset=qs, user=reviewer, after=c).pk == a
    assert demonstration_claim_next(queryset=qs, user=reviewer, after=a, backwards=True).pk == c
    assert demonstration_claim_next(queryset=qs, user=reviewer, after=c, backwards=True).pk == b


def test_single_review_decides_and_releases(demonstrations, reviewer):
    demo = demonstrations[0]
    demonstration_claim(demonstration=demo, user=reviewer)
    review = demonstration_review(demonstration=demo, user=reviewer, decision="approved")
    demo.refresh_from_db()
    assert (demo.status, demo.claimed_by, demo.agreement) == ("approved", None, None)
    assert demo.decided_at is not None
    assert (review.round, review.version_id, review.reviewer_name) == (
        1,
        demo.current_version_id,
        reviewer.username,
    )
    with pytest.raises(ApplicationError, match="already decided"):
        demonstration_review(demonstration=demo, user=reviewer, decision="rejected", comment="x")


def test_reject_needs_a_known_reason(demonstrations, reviewer, project):
    demo = demonstrations[0]
    with pytest.raises(ApplicationError, match="Give a reason"):
        demonstration_review(demonstration=demo, user=reviewer, decision="rejected")
    with pytest.raises(ApplicationError, match="Unknown reason tag “made up”"):
        demonstration_review(
            demonstration=demo, user=reviewer, decision="rejected", reason_tags=["made up"]
        )
    assert Review.objects.count() == 0
    demonstration_review(
        demonstration=demo,
        user=reviewer,
        decision="rejected",
        reason_tags=["wrong tool", "wrong tool"],
        comment="  Used search instead of get.  ",
    )
    review = Review.objects.get()
    assert (review.reason_tags, review.comment) == (["wrong tool"], "Used search instead of get.")


def test_a_rejected_item_never_reaches_a_dataset(demonstrations, reviewer, project):
    approved, rejected, _pending = demonstrations
    demonstration_review(demonstration=approved, user=reviewer, decision="approved")
    demonstration_review(
        demonstration=rejected, user=reviewer, decision="rejected", reason_tags=["wrong tool"]
    )
    exported = list(demonstrations_for_dataset(project=project))
    assert exported == [approved]
    assert exported[0].current_version.number == 1


def test_dataset_filters(demonstrations, reviewer, project, other_project):
    for demo in demonstrations:
        demonstration_review(demonstration=demo, user=reviewer, decision="approved")
    ids = lambda qs: [d.pk for d in qs]  # noqa: E731
    first, second, third = demonstrations
    Demonstration.objects.filter(pk=third.pk).update(split="eval")  # recorded as eval
    assert ids(demonstrations_for_dataset(project=other_project)) == []
    assert ids(demonstrations_for_dataset(project=project, splits=["eval"])) == [third.pk]
    assert ids(
        demonstrations_for_dataset(project=project, capabilities=["clarify-before-acting"])
    ) == [second.pk]
    assert ids(demonstrations_for_dataset(project=project, environment_ids=[0])) == []
    Demonstration.objects.filter(pk=first.pk).update(score=0.1)
    first.current_version.__class__.objects.filter(pk=first.current_version_id).update(score=0.5)
    assert ids(demonstrations_for_dataset(project=project, min_score=0.9)) == [
        second.pk,
        third.pk,
    ]
    # One reviewer gives no agreement figure: left out once min_agreement is asked for.
    assert ids(demonstrations_for_dataset(project=project, min_agreement=0.0)) == []


def test_second_review_is_blind_and_agreement_is_recorded(
    demonstrations, reviewer, second_reviewer, admin
):
    agreed, split = demonstrations[0], demonstrations[1]
    Demonstration.objects.filter(pk__in=[agreed.pk, split.pk]).update(reviews_required=2)
    agreed.refresh_from_db()
    split.refresh_from_db()

    demonstration_review(demonstration=agreed, user=reviewer, decision="approved")
    agreed.refresh_from_db()
    assert (agreed.status, agreed.agreement) == ("pending", None)
    # The first reviewer cannot take it again this round; the second can.
    assert demonstration_claim(demonstration=agreed, user=reviewer) is False
    assert demonstration_claim(demonstration=agreed, user=second_reviewer) is True
    demonstration_review(demonstration=agreed, user=second_reviewer, decision="approved")
    agreed.refresh_from_db()
    assert (agreed.status, agreed.agreement, agreed.disputed) == ("approved", 1.0, False)
    assert demonstration_agreement(agreed) == 1.0

    demonstration_review(demonstration=split, user=reviewer, decision="approved")
    demonstration_review(
        demonstration=split, user=second_reviewer, decision="rejected", reason_tags=["wrong tool"]
    )
    split.refresh_from_db()
    assert (split.status, split.agreement, split.disputed) == ("pending", 0.0, True)
    assert demonstration_agreement(split) == 0.0
    # Disputed items leave the queue until an admin adjudicates.
    assert demonstration_claim(demonstration=split, user=admin) is False
    with pytest.raises(PermissionDenied):
        demonstration_adjudicate(demonstration=split, user=reviewer, decision="approved")
    demonstration_adjudicate(
        demonstration=split, user=admin, decision="rejected", comment="Wrong tool indeed."
    )
    split.refresh_from_db()
    assert (split.status, split.disputed, split.agreement) == ("rejected", False, 0.0)
    assert Review.objects.filter(demonstration=split, adjudication=True).count() == 1
    assert [d.pk for d in demonstrations_for_dataset(project=agreed.project, min_agreement=1)] == [
        agreed.pk
    ]


def test_agreement_with_three_reviewers_is_pairwise(
    demonstrations, reviewer, second_reviewer, admin
):
    demo = demonstrations[0]
    Demonstration.objects.filter(pk=demo.pk).update(reviews_required=3)
    demonstration_review(demonstration=demo, user=reviewer, decision="approved")
    demonstration_review(demonstration=demo, user=second_reviewer, decision="approved")
    demonstration_review(demonstration=demo, user=admin, decision="needs_changes", comment="tone")
    demo.refresh_from_db()
    assert demo.agreement == pytest.approx(1 / 3)
    assert demo.disputed is True
    assert demo.status == DemonstrationStatus.PENDING


@pytest.mark.django_db(transaction=True)
def test_concurrent_claims_have_one_winner(project, author, reviewer, admin, curation_environment):
    """Two reviewers claim the same item at the same moment from two threads (two database
    connections): the conditional UPDATE lets exactly one of them win."""
    import threading

    from django.db import connection

    from tests.curation.conftest import teacher_batch_run

    teacher_batch_run(project, author, curation_environment)
    demo = Demonstration.objects.order_by("id").first()
    barrier = threading.Barrier(2)
    results = {}

    def claim(user):
        try:
            barrier.wait(timeout=10)
            results[user.username] = demonstration_claim(
                demonstration=Demonstration.objects.get(pk=demo.pk), user=user
            )
        finally:
            connection.close()

    threads = [threading.Thread(target=claim, args=(user,)) for user in (reviewer, admin)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(results.values()) == [False, True]
    winner = next(name for name, won in results.items() if won)
    demo.refresh_from_db()
    assert demo.claimed_by.username == winner
