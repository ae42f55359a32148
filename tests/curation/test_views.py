"""Pages: queue, review item, decisions, corrections, list, detail (diff), adjudication,
settings, promotion — success, wrong method, anonymous, outsider, too-low role, htmx."""

import pytest
from django.urls import reverse

from apps.core.models import Job
from apps.curation.models import Demonstration, DemonstrationVersion, Review, ReviewReasonTag
from apps.curation.services import (
    demonstration_claim,
    demonstration_correct,
    demonstration_review,
)
from apps.runs.models import Run, RunRole
from tests.conftest import HTMX_HEADERS
from tests.curation.conftest import teacher_batch_run

pytestmark = pytest.mark.django_db


def _final_reply(demo):
    transcript = demo.current_version.transcript
    return max(
        i for i, m in enumerate(transcript) if m["role"] == "assistant" and not m.get("tool_calls")
    )


def read_urls(demo):
    return [
        reverse("curation:list", args=["acme"]),
        reverse("curation:detail", args=[demo.pk]),
    ]


def reviewer_read_urls(demo):
    return [
        reverse("curation:queue", args=["acme"]) + "?stay=1",
        reverse("curation:review", args=["acme", demo.pk]),
        reverse("curation:adjudicate", args=["acme"]),
    ]


def test_pages_read_for_their_roles(client_for, viewer, reviewer, admin, demonstrations):
    demo = demonstrations[0]
    for url in read_urls(demo):
        assert client_for(viewer).get(url).status_code == 200, url
    for url in reviewer_read_urls(demo):
        assert client_for(viewer).get(url).status_code == 403, url
        assert client_for(reviewer).get(url).status_code == 200, url
    settings_url = reverse("curation:settings", args=["acme"])
    assert client_for(reviewer).get(settings_url).status_code == 403
    assert client_for(admin).get(settings_url).status_code == 200


def test_anonymous_and_outsider(client, client_for, outsider, demonstrations):
    demo = demonstrations[0]
    for url in read_urls(demo) + reviewer_read_urls(demo):
        response = client.get(url)
        assert response.status_code == 302 and "/login/" in response["Location"], url
    response = client.post(reverse("curation:decide", args=[demo.pk]), {"decision": "approved"})
    assert response.status_code == 302 and "/login/" in response["Location"]
    outsider_client = client_for(outsider)
    for url in read_urls(demo) + reviewer_read_urls(demo):
        assert outsider_client.get(url).status_code == 404, url
    posts = [
        reverse("curation:decide", args=[demo.pk]),
        reverse("curation:correct", args=[demo.pk]),
        reverse("curation:claim", args=[demo.pk]),
    ]
    for url in posts:
        assert outsider_client.post(url, {"decision": "approved"}).status_code == 404
    assert Review.objects.count() == 0


def test_wrong_methods(client_for, reviewer, admin, demonstrations):
    demo = demonstrations[0]
    client = client_for(admin)
    for url in [
        reverse("curation:decide", args=[demo.pk]),
        reverse("curation:correct", args=[demo.pk]),
        reverse("curation:claim", args=[demo.pk]),
        reverse("curation:release", args=[demo.pk]),
        reverse("curation:reopen", args=[demo.pk]),
        reverse("curation:queue_start", args=["acme"]),
        reverse("curation:queue_move", args=["acme", demo.pk]),
        reverse("curation:regrade", args=["acme"]),
        reverse("curation:adjudicate_decide", args=[demo.pk]),
        reverse("curation:promote", args=[demo.run_id]),
        reverse("curation:tag_create", args=["acme"]),
    ]:
        assert client.get(url).status_code == 405, url
    for url in [
        reverse("curation:list", args=["acme"]),
        reverse("curation:detail", args=[demo.pk]),
    ]:
        assert client.post(url).status_code == 405, url


def test_start_claims_the_first_item_and_the_queue_returns_to_it(
    client_for, reviewer, demonstrations
):
    client = client_for(reviewer)
    response = client.post(reverse("curation:queue_start", args=["acme"]), {"filters": ""})
    first = demonstrations[0]
    assert response.status_code == 302
    assert response["Location"] == reverse("curation:review", args=["acme", first.pk])
    first.refresh_from_db()
    assert first.claimed_by == reviewer
    # Opening the queue again resumes the held item.
    response = client.get(reverse("curation:queue", args=["acme"]))
    assert response["Location"] == reverse("curation:review", args=["acme", first.pk])


def test_review_page_shows_task_trajectory_and_verdicts(client_for, reviewer, demonstrations):
    demo = demonstrations[0]
    demonstration_claim(demonstration=demo, user=reviewer)
    response = client_for(reviewer).get(reverse("curation:review", args=["acme", demo.pk]))
    body = response.content.decode()
    assert response.status_code == 200
    assert 'data-testid="timeline"' in body
    assert 'data-testid="task-panel"' in body
    assert body.count('data-testid="verdict"') == len(demo.current_version.grading["verdicts"])
    assert "Reserved for you until" in body
    assert (
        'data-testid="approve"' in body
        and "disabled" not in body.split('data-testid="approve"')[1][:20]
    )
    assert "js/review.js" in body
    partial = client_for(reviewer).get(
        reverse("curation:review", args=["acme", demo.pk]), **HTMX_HEADERS
    )
    assert partial.content.lstrip().startswith(b'<div id="review-item"')


def test_approve_moves_to_the_next_item(client_for, reviewer, demonstrations):
    first, second, _ = demonstrations
    demonstration_claim(demonstration=first, user=reviewer)
    response = client_for(reviewer).post(
        reverse("curation:decide", args=[first.pk]), {"decision": "approved", "filters": ""}
    )
    assert response.status_code == 302
    assert response["Location"] == reverse("curation:review", args=["acme", second.pk])
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.status, first.claimed_by, second.claimed_by) == ("approved", None, reviewer)


def test_reject_without_reason_rerenders_with_the_error(client_for, reviewer, demonstrations):
    demo = demonstrations[0]
    response = client_for(reviewer).post(
        reverse("curation:decide", args=[demo.pk]), {"decision": "rejected", "filters": ""}
    )
    assert response.status_code == 200
    assert "Give a reason tag or a comment" in response.content.decode()
    assert Review.objects.count() == 0
    response = client_for(reviewer).post(
        reverse("curation:decide", args=[demo.pk]),
        {"decision": "rejected", "reason_tags": ["wrong tool"], "comment": "<b>no</b>"},
    )
    assert response.status_code == 302
    review = Review.objects.get()
    assert (review.decision, review.reason_tags, review.comment) == (
        "rejected",
        ["wrong tool"],
        "<b>no</b>",
    )


def test_decision_htmx_variant_redirects_the_client(client_for, reviewer, demonstrations):
    demo = demonstrations[0]
    response = client_for(reviewer).post(
        reverse("curation:decide", args=[demo.pk]),
        {"decision": "approved", "filters": "split=train"},
        **HTMX_HEADERS,
    )
    assert response.status_code == 200
    second = demonstrations[1]
    assert response["HX-Redirect"] == (
        reverse("curation:review", args=["acme", second.pk]) + "?split=train"
    )


@pytest.mark.parametrize("role", ["viewer", "author"])
def test_too_low_roles_cannot_decide_or_correct(request, client_for, demonstrations, role):
    user = request.getfixturevalue(role)
    demo = demonstrations[0]
    client = client_for(user)
    assert (
        client.post(
            reverse("curation:decide", args=[demo.pk]), {"decision": "approved"}
        ).status_code
        == 403
    )
    assert (
        client.post(
            reverse("curation:correct", args=[demo.pk]), {"op": "truncate", "index": 3}
        ).status_code
        == 403
    )
    assert client.post(reverse("curation:claim", args=[demo.pk])).status_code == 403
    demo.refresh_from_db()
    assert (demo.status, demo.claimed_by, demo.versions.count()) == ("pending", None, 1)
    assert Review.objects.count() == 0


def test_correction_via_the_page(client_for, reviewer, demonstrations):
    demo = demonstrations[0]
    index = _final_reply(demo)
    response = client_for(reviewer).post(
        reverse("curation:correct", args=[demo.pk]),
        {"op": "edit", "index": index, "content": "Done: booked and told Dana.", "filters": ""},
        follow=True,
    )
    assert response.status_code == 200
    demo.refresh_from_db()
    assert demo.current_version.number == 2
    assert demo.current_version.transcript[index]["content"] == "Done: booked and told Dana."
    assert "Version 2 saved and re-graded" in response.content.decode()
    response = client_for(reviewer).post(
        reverse("curation:correct", args=[demo.pk]),
        {"op": "weight", "index": index, "weight": "0"},
        follow=True,
    )
    demo.refresh_from_db()
    assert demo.current_version.transcript[index]["weight"] == 0
    assert 'data-testid="excluded"' in response.content.decode()


def test_bad_correction_shows_why(client_for, reviewer, demonstrations):
    demo = demonstrations[0]
    response = client_for(reviewer).post(
        reverse("curation:correct", args=[demo.pk]),
        {"op": "edit", "index": 1, "content": "x"},
        follow=True,
    )
    assert "Only assistant messages can be edited" in response.content.decode()
    assert DemonstrationVersion.objects.filter(demonstration=demo).count() == 1


def test_next_and_previous(client_for, reviewer, demonstrations):
    a, b, _c = demonstrations
    demonstration_claim(demonstration=a, user=reviewer)
    client = client_for(reviewer)
    response = client.post(
        reverse("curation:queue_move", args=["acme", a.pk]), {"direction": "next"}
    )
    assert response["Location"] == reverse("curation:review", args=["acme", b.pk])
    response = client.post(
        reverse("curation:queue_move", args=["acme", b.pk]), {"direction": "previous"}
    )
    assert response["Location"] == reverse("curation:review", args=["acme", a.pk])
    assert list(Demonstration.objects.filter(claimed_by=reviewer)) == [a]


def test_list_filters_counts_and_htmx(client_for, viewer, reviewer, demonstrations):
    demonstration_review(demonstration=demonstrations[0], user=reviewer, decision="approved")
    client = client_for(viewer)
    response = client.get(reverse("curation:list", args=["acme"]))
    assert response.status_code == 200
    assert [row[2] for row in response.context["status_rows"]] == [2, 1, 0, 0]
    assert len(response.context["page"].object_list) == 3
    response = client.get(reverse("curation:list", args=["acme"]) + "?status=approved")
    assert [d.pk for d in response.context["page"].object_list] == [demonstrations[0].pk]
    Demonstration.objects.filter(pk=demonstrations[2].pk).update(split="eval")
    response = client.get(reverse("curation:list", args=["acme"]) + "?split=eval", **HTMX_HEADERS)
    assert response.content.lstrip().startswith(b'<div id="demonstration-rows">')
    assert response.content.decode().count('data-testid="demonstration-row"') == 1


def test_detail_shows_versions_diff_and_hides_the_open_round(
    client_for, viewer, reviewer, demonstrations
):
    demo = demonstrations[0]
    index = _final_reply(demo)
    demonstration_correct(
        demonstration=demo, user=reviewer, edits=[{"op": "edit", "index": index, "content": "Hi"}]
    )
    Demonstration.objects.filter(pk=demo.pk).update(reviews_required=2)
    demonstration_review(demonstration=demo, user=reviewer, decision="approved")
    response = client_for(viewer).get(reverse("curation:detail", args=[demo.pk]) + "?a=1&b=2")
    body = response.content.decode()
    assert response.status_code == 200
    assert [row["status"] for row in response.context["diff"]].count("changed") == 1
    assert response.context["reviews"] == []
    assert "1 of 2 reviews of round 2 are in" in body


def test_regrade_button_starts_a_job(client_for, reviewer, viewer, demonstrations):
    assert client_for(viewer).post(reverse("curation:regrade", args=["acme"])).status_code == 403
    assert not Job.objects.filter(kind="curation.regrade").exists()
    response = client_for(reviewer).post(reverse("curation:regrade", args=["acme"]))
    job = Job.objects.get(kind="curation.regrade")
    assert response["Location"] == reverse("core:job_detail", args=[job.pk])
    assert job.progress_total == 3


def test_promote_a_run_by_hand(client_for, reviewer, author, project, curation_environment):
    batch = teacher_batch_run(project, author, curation_environment, role=RunRole.EVAL)
    run = Run.objects.filter(batch=batch).first()
    page = client_for(reviewer).get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert 'data-testid="promote"' in page
    assert (
        'data-testid="promote"'
        not in client_for(author).get(reverse("runs:detail", args=[run.pk])).content.decode()
    )
    assert client_for(author).post(reverse("curation:promote", args=[run.pk])).status_code == 403
    assert not Demonstration.objects.exists()
    response = client_for(reviewer).post(reverse("curation:promote", args=[run.pk]))
    demo = Demonstration.objects.get()
    assert response["Location"] == reverse("curation:detail", args=[demo.pk])
    assert demo.promoted_by == reviewer


def test_an_eval_task_run_shows_no_promote_button_and_is_refused(
    client_for, reviewer, author, project
):
    from tests.curation.conftest import import_valid, spec_document

    environment = import_valid(project, author, spec_document(eval_tasks=True))
    batch = teacher_batch_run(project, author, environment, role=RunRole.EVAL)
    run = Run.objects.get(batch=batch, task_key="notice-moved-dentist")
    client = client_for(reviewer)
    page = client.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert 'data-testid="promote"' not in page
    assert 'data-testid="eval-not-promotable"' in page
    response = client.post(reverse("curation:promote", args=[run.pk]), follow=True)
    assert response.redirect_chain[-1][0] == reverse("runs:detail", args=[run.pk])
    assert "is of an eval task (notice-moved-dentist)" in response.content.decode()
    assert not Demonstration.objects.exists()


def test_adjudication_page(client_for, reviewer, admin, demonstrations):
    from apps.accounts.models import Membership, Role
    from tests.factories import UserFactory

    other = UserFactory(username="rev2")
    Membership.objects.create(project=demonstrations[0].project, user=other, role=Role.REVIEWER)
    demo = demonstrations[0]
    Demonstration.objects.filter(pk=demo.pk).update(reviews_required=2)
    demonstration_review(demonstration=demo, user=reviewer, decision="approved")
    demonstration_review(demonstration=demo, user=other, decision="rejected", comment="wrong")
    page = client_for(reviewer).get(reverse("curation:adjudicate", args=["acme"]))
    assert page.content.decode().count('data-testid="disputed"') == 1
    url = reverse("curation:adjudicate_decide", args=[demo.pk])
    assert client_for(reviewer).post(url, {"decision": "approved"}).status_code == 403
    demo.refresh_from_db()
    assert demo.disputed is True
    response = client_for(admin).post(url, {"decision": "approved"})
    assert response.status_code == 302
    demo.refresh_from_db()
    assert (demo.status, demo.disputed) == ("approved", False)


def test_settings_and_tags(client_for, admin, reviewer, project):
    url = reverse("curation:settings", args=["acme"])
    data = {"pass_threshold": "0.9", "strict_only": "on", "reviews_required": "2"}
    assert client_for(reviewer).post(url, data).status_code == 403
    response = client_for(admin).post(url, data)
    assert response.status_code == 302
    settings = project.curation_settings
    settings.refresh_from_db()
    assert (settings.pass_threshold, settings.strict_only, settings.reviews_required) == (
        0.9,
        True,
        2,
    )
    bad = client_for(admin).post(url, {**data, "reviews_required": "9"}, **HTMX_HEADERS)
    assert bad.status_code == 200
    assert bad.content.lstrip().startswith(b'<form method="post"')
    client_for(admin).post(
        reverse("curation:tag_create", args=["acme"]), {"name": "leaks data", "description": ""}
    )
    tag = ReviewReasonTag.objects.get(project=project, name="leaks data")
    client_for(admin).post(reverse("curation:tag_update", args=[tag.pk]), {"action": "archive"})
    tag.refresh_from_db()
    assert tag.archived_at is not None
    assert (
        client_for(reviewer)
        .post(reverse("curation:tag_update", args=[tag.pk]), {"action": "restore"})
        .status_code
        == 403
    )
