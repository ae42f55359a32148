"""Synthesis pages: list, create, detail (live progress), cancel, resume, slot timeline."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from apps.capabilities.models import Capability
from apps.core.models import Job, JobStatus
from apps.synthesis.models import SlotStatus, SynthesisAttempt, SynthesisJob
from apps.synthesis.services import synthesis_run_inline
from tests.conftest import HTMX_HEADERS

pytestmark = pytest.mark.django_db


@pytest.fixture
def finished(start_template):
    synthesis = start_template(count=2, seed=21)
    synthesis_run_inline(synthesis=synthesis)
    return synthesis


def form_data(chosen, **overrides):
    data = {
        "capabilities": [c.pk for c in chosen],
        "services": ["email"],
        "count": 2,
        "tasks_per_environment": 2,
        "turns_min": 1,
        "turns_max": 2,
        "difficulty": "easy",
        "horizon": "medium",
        "generator": "template",
        "endpoint": "",
        "max_repair_rounds": 3,
        "domain_hint": "",
        "scenario_hint": "",
        "seed": 9,
    }
    data.update(overrides)
    return data


def capability_spans(synthesis) -> str:
    """The capabilities as the pages show them: names, each with its slug as the tooltip."""
    names = dict(Capability.objects.filter(project=synthesis.project).values_list("slug", "name"))
    return ", ".join(
        f'<span title="{slug}">{escape(names[slug])}</span>' for slug in synthesis.capability_slugs
    )


def shown_capabilities(synthesis, html: str) -> str:
    return html.split('data-testid="synthesis-capabilities">')[1].split("</td>")[0]


# --- list -----------------------------------------------------------------------------


def test_list_shows_jobs_with_counts(client_for, viewer, finished):
    response = client_for(viewer).get(reverse("synthesis:list", args=["acme"]))
    assert response.status_code == 200
    html = response.content.decode()
    assert f"#{finished.pk} · 2 environments" in html
    assert shown_capabilities(finished, html) == capability_spans(finished)
    assert html.count('data-testid="synthesis-row"') == 1
    assert "New synthesis job" not in html  # viewers cannot start one


def test_list_empty_state_and_htmx_rows(client_for, author, project):
    client = client_for(author)
    html = client.get(reverse("synthesis:list", args=["acme"])).content.decode()
    assert "No synthesis jobs yet." in html and "New synthesis job" in html
    partial = client.get(reverse("synthesis:list", args=["acme"]), **HTMX_HEADERS)
    assert partial.content.decode().lstrip().startswith('<div id="synthesis-rows">')


def test_list_and_detail_name_capabilities_like_the_form(client_for, author, finished):
    """Names, as the form lists them, with the slug as the tooltip; a capability renamed
    since shows its new name, one deleted since its slug."""
    client = client_for(author)
    slugs = finished.capability_slugs
    assert len(slugs) == 2
    Capability.objects.filter(project=finished.project, slug=slugs[0]).update(name="Ask first")
    for headers in ({}, HTMX_HEADERS):
        html = client.get(reverse("synthesis:list", args=["acme"]), **headers).content.decode()
        assert shown_capabilities(finished, html) == capability_spans(finished)
        assert f'<span title="{slugs[0]}">Ask first</span>' in html
    detail = client.get(reverse("synthesis:detail", args=[finished.pk])).content.decode()
    assert f'title="{slugs[0]}" data-testid="synthesis-capability">Ask first</span>' in detail
    form = client.get(reverse("synthesis:create", args=["acme"])).content.decode()
    assert "Ask first" in form
    Capability.objects.filter(project=finished.project, slug=slugs[1]).delete()
    html = client.get(reverse("synthesis:list", args=["acme"])).content.decode()
    assert f'<span title="{slugs[1]}">{slugs[1]}</span>' in html


def test_list_refuses_anonymous_outsider_and_post(client, client_for, outsider, project):
    url = reverse("synthesis:list", args=["acme"])
    assert client.get(url).status_code == 302
    assert client_for(outsider).get(url).status_code == 404
    assert client_for(outsider).post(url).status_code == 405


# --- create ---------------------------------------------------------------------------


def test_create_starts_a_job_and_redirects(
    client_for, author, capabilities, django_capture_on_commit_callbacks
):
    client = client_for(author)
    assert client.get(reverse("synthesis:create", args=["acme"])).status_code == 200
    with django_capture_on_commit_callbacks() as callbacks:
        response = client.post(reverse("synthesis:create", args=["acme"]), form_data(capabilities))
    synthesis = SynthesisJob.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("synthesis:detail", args=[synthesis.pk])
    assert len(callbacks) == 1  # the slots are queued once the transaction commits
    assert (synthesis.count, synthesis.seed, synthesis.services) == (2, 9, ["email"])
    assert (synthesis.turns_min, synthesis.turns_max, synthesis.difficulty) == (1, 2, "easy")
    assert synthesis.horizon == "medium"
    # A multi-select has no order: the capabilities come in catalogue order.
    assert sorted(synthesis.capability_slugs) == sorted(c.slug for c in capabilities)
    assert list(synthesis.slots.values_list("index", "status")) == [
        (0, SlotStatus.REQUESTED),
        (1, SlotStatus.REQUESTED),
    ]
    assert synthesis.job.status == JobStatus.PENDING


def test_create_htmx_redirects_by_header(client_for, author, capabilities):
    response = client_for(author).post(
        reverse("synthesis:create", args=["acme"]), form_data(capabilities), **HTMX_HEADERS
    )
    assert response.status_code == 200
    assert response["HX-Redirect"] == reverse(
        "synthesis:detail", args=[SynthesisJob.objects.get().pk]
    )


@pytest.mark.parametrize(
    ("overrides", "field", "error"),
    [
        ({"generator": "llm"}, "endpoint", "Choose the model endpoint the LLM generator uses."),
        ({"turns_min": 3, "turns_max": 2}, "turns_max", "Must be at least “Turns from”."),
        ({"count": 0}, "count", "Ensure this value is greater than or equal to 1."),
        ({"capabilities": []}, "capabilities", "This field is required."),
        (
            {"horizon": "weeks"},
            "horizon",
            "Select a valid choice. weeks is not one of the available choices.",
        ),
    ],
)
def test_create_invalid_form_rerenders_partial(
    client_for, author, capabilities, overrides, field, error
):
    response = client_for(author).post(
        reverse("synthesis:create", args=["acme"]),
        form_data(capabilities, **overrides),
        **HTMX_HEADERS,
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith("<form")
    assert f'<ul class="errorlist" id="id_{field}_error"><li>{error}</li></ul>' in html
    assert SynthesisJob.objects.count() == 0


def test_create_without_endpoints_points_to_adding_one(client_for, author, capabilities):
    """The LLM generator needs an endpoint: with none in the project the form says where to
    add one (before, and with the error after choosing LLM)."""
    page = client_for(author).get(reverse("synthesis:create", args=["acme"])).content.decode()
    assert 'data-testid="no-endpoints"' in page
    assert 'href="/p/acme/models/new/">Add an endpoint</a>' in page
    refused = client_for(author).post(
        reverse("synthesis:create", args=["acme"]),
        form_data(capabilities, generator="llm"),
        **HTMX_HEADERS,
    )
    assert 'data-testid="no-endpoints"' in refused.content.decode()


def test_create_refuses_viewer_outsider_anonymous(
    client, client_for, viewer, outsider, capabilities
):
    url = reverse("synthesis:create", args=["acme"])
    assert client.post(url, form_data(capabilities)).status_code == 302
    assert client_for(outsider).post(url, form_data(capabilities)).status_code == 404
    assert client_for(viewer).post(url, form_data(capabilities)).status_code == 403
    assert client_for(viewer).put(url).status_code == 405
    assert SynthesisJob.objects.count() == 0 and Job.objects.count() == 0


# --- detail ---------------------------------------------------------------------------


def test_detail_shows_slots_counts_and_results(client_for, viewer, finished):
    response = client_for(viewer).get(reverse("synthesis:detail", args=[finished.pk]))
    html = response.content.decode()
    assert response.status_code == 200
    assert html.count('data-testid="slot-row" data-status="valid"') == 2
    assert "2 of 2 finished: 2 valid, 0 invalid, 0 failed." in html
    for slot in finished.slots.all():
        assert reverse("environments:detail", args=[slot.environment_id]) in html
        assert reverse("synthesis:slot", args=[slot.pk]) in html
    assert 'hx-trigger="every 2s"' not in html  # finished: no polling
    assert "Cancel</button>" not in html
    # the template generator calls no model: no token counts of 0 / 0
    assert html.count('data-testid="no-model">no model used<') == 2
    assert "0 / 0" not in html


def test_detail_progress_partial_polls_while_running(client_for, author, start_template):
    synthesis = start_template(count=2)
    response = client_for(author).get(
        reverse("synthesis:detail", args=[synthesis.pk]), **HTMX_HEADERS
    )
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="synthesis-progress"')
    assert 'hx-trigger="every 2s"' in html
    assert html.count('data-status="requested"') == 3  # the stat and two rows
    assert "Cancel</button>" in html


def test_detail_refuses_outsider_anonymous_and_post(client, client_for, outsider, viewer, finished):
    url = reverse("synthesis:detail", args=[finished.pk])
    assert client.get(url).status_code == 302
    assert client_for(outsider).get(url).status_code == 404
    assert client_for(viewer).post(url).status_code == 405


# --- cancel and resume ----------------------------------------------------------------


def test_cancel_cancels_pending_slots(client_for, author, start_template):
    synthesis = start_template(count=2)
    response = client_for(author).post(reverse("synthesis:cancel", args=[synthesis.pk]))
    assert response.status_code == 302
    assert set(synthesis.slots.values_list("status", flat=True)) == {SlotStatus.CANCELLED}
    assert Job.objects.get(pk=synthesis.job_id).status == JobStatus.CANCELLED


def test_cancel_refuses_viewer_and_changes_nothing(
    client, client_for, viewer, outsider, start_template
):
    synthesis = start_template(count=2)
    url = reverse("synthesis:cancel", args=[synthesis.pk])
    assert client.post(url).status_code == 302
    assert client_for(outsider).post(url).status_code == 404
    assert client_for(viewer).post(url).status_code == 403
    assert client_for(viewer).get(url).status_code == 405
    assert set(synthesis.slots.values_list("status", flat=True)) == {SlotStatus.REQUESTED}
    assert Job.objects.get(pk=synthesis.job_id).cancel_requested is False


def test_cancel_htmx_and_finished_job_message(client_for, author, finished):
    response = client_for(author).post(
        reverse("synthesis:cancel", args=[finished.pk]), **HTMX_HEADERS
    )
    assert response["HX-Redirect"] == reverse("synthesis:detail", args=[finished.pk])
    page = client_for(author).get(reverse("synthesis:detail", args=[finished.pk]))
    assert "This synthesis job has already succeeded." in page.content.decode()


def test_resume_queues_unstarted_slots(
    client_for, author, start_template, django_capture_on_commit_callbacks
):
    synthesis = start_template(count=2)
    with django_capture_on_commit_callbacks() as callbacks:
        response = client_for(author).post(reverse("synthesis:resume", args=[synthesis.pk]))
    assert response.status_code == 302
    assert len(callbacks) == 1
    page = client_for(author).get(response["Location"])
    assert "Queued 2 slots again." in page.content.decode()


def test_the_progress_reloads_the_page_once_the_job_has_ended(client_for, author, start_template):
    synthesis = start_template(count=2)
    url = reverse("synthesis:detail", args=[synthesis.pk])
    poll = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TRIGGER": "synthesis-progress"}
    client = client_for(author)
    assert "HX-Refresh" not in client.get(url, **poll)
    synthesis_run_inline(synthesis=synthesis)
    assert client.get(url, **poll)["HX-Refresh"] == "true"


def test_resume_is_offered_only_once_the_job_has_stalled(client_for, author, start_template):
    synthesis = start_template(count=2)
    url = reverse("synthesis:detail", args=[synthesis.pk])
    html = client_for(author).get(url).content.decode()
    assert "Cancel</button>" in html
    assert 'data-testid="resume-synthesis"' not in html  # moving: nothing to resume
    long_ago = timezone.now() - timedelta(hours=1)
    Job.objects.filter(pk=synthesis.job_id).update(created_at=long_ago, heartbeat_at=None)
    html = client_for(author).get(url).content.decode()
    assert 'data-testid="synthesis-stalled"' in html
    assert 'data-testid="resume-synthesis"' in html


def test_resume_refuses_viewer(
    client_for, viewer, start_template, django_capture_on_commit_callbacks
):
    synthesis = start_template(count=2)
    with django_capture_on_commit_callbacks() as callbacks:
        assert (
            client_for(viewer).post(reverse("synthesis:resume", args=[synthesis.pk])).status_code
            == 403
        )
    assert callbacks == []


# --- slot timeline --------------------------------------------------------------------


def test_slot_page_shows_timeline_with_escaped_diff(client_for, viewer, start_template):
    synthesis = start_template(count=1)
    synthesis_run_inline(synthesis=synthesis)
    slot = synthesis.slots.get()
    first = SynthesisAttempt.objects.get(slot=slot)
    # A second round whose draft differs by a hostile string: it must be shown escaped.
    document = dict(first.document, description="<script>alert(1)</script>")
    SynthesisAttempt.objects.create(
        slot=slot, round=1, kind="repair", document=document, report=first.report, valid=True
    )
    response = client_for(viewer).get(reverse("synthesis:slot", args=[slot.pk]))
    html = response.content.decode()
    assert response.status_code == 200
    assert html.count('data-testid="attempt"') == 2
    assert html.count('data-testid="attempt-diff"') == 1
    assert (
        '<span class="diff-add">+  &quot;description&quot;: '
        "&quot;&lt;script&gt;alert(1)&lt;/script&gt;&quot;,</span>" in html
    )
    assert "<script>alert(1)" not in html
    assert reverse("environments:detail", args=[slot.environment_id]) in html


def test_slot_page_shows_problems_and_llm_links(client_for, viewer, start_template):
    synthesis = start_template(count=1)
    slot = synthesis.slots.get()
    SynthesisAttempt.objects.create(
        slot=slot,
        round=0,
        kind="draft",
        raw_text="not json",
        error="Unusable answer (LLM call #5): The answer contains no JSON object.",
        llm_call_ids=[5],
    )
    SynthesisAttempt.objects.create(
        slot=slot,
        round=1,
        kind="repair",
        document={"schema": "x"},
        report={
            "valid": False,
            "problems": [
                {
                    "code": "schema_invalid",
                    "severity": "error",
                    "pointer": "/name",
                    "message": "'name' is required",
                    "hint": "Add it.",
                }
            ],
        },
        valid=False,
        error_count=1,
    )
    html = client_for(viewer).get(reverse("synthesis:slot", args=[slot.pk])).content.decode()
    assert "Unusable answer (LLM call #5): The answer contains no JSON object." in html
    assert "schema_invalid" in html and "/name" in html and "&#x27;name&#x27; is required" in html
    assert '<span class="diff-del">-not json</span>' in html


def test_slot_page_refuses_outsider_anonymous_post(client, client_for, outsider, viewer, finished):
    slot = finished.slots.first()
    url = reverse("synthesis:slot", args=[slot.pk])
    assert client.get(url).status_code == 302
    assert client_for(outsider).get(url).status_code == 404
    assert client_for(viewer).post(url).status_code == 405
    assert client_for(viewer).get(reverse("synthesis:slot", args=[999999])).status_code == 404


def test_environment_page_shows_synthesis_lineage(client_for, viewer, finished):
    slot = finished.slots.get(index=0)
    response = client_for(viewer).get(reverse("environments:detail", args=[slot.environment_id]))
    html = response.content.decode()
    assert response.status_code == 200
    assert f'Synthesized by <a href="{reverse("synthesis:detail", args=[finished.pk])}">' in html
    assert (
        f'<a href="{reverse("synthesis:slot", args=[slot.pk])}" '
        'data-testid="attempt-timeline-link">attempt timeline (1)</a>'
    ) in html
    assert 'prompts <span class="mono">template-v1</span>' in html
