"""Pages: the review queue (one demonstration at a time), corrections, and a
demonstration's detail page. The list, adjudication and settings are in ``library_views``."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, QueryDict
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from apps.accounts.access import check_project_role, project_get_for_user
from apps.accounts.models import Role
from apps.core.exceptions import ApplicationError
from apps.core.http import redirect_after_post, render_page
from apps.core.safeinput import is_id, parse_id
from apps.curation.access import demonstration_get_for_user
from apps.curation.forms import (
    CorrectionForm,
    DecisionForm,
)
from apps.curation.models import Decision, DemonstrationStatus, Review
from apps.curation.selectors import (
    DemonstrationFilters,
    active_reason_tags,
    filter_choices,
    project_agreement,
    queue_queryset,
    reviewer_progress,
    round_progress,
    version_diff,
    visible_reviews,
)
from apps.curation.services import (
    claim_held,
    demonstration_claim,
    demonstration_claim_next,
    demonstration_correct,
    demonstration_from_run,
    demonstration_release,
    demonstration_reopen,
    demonstration_review,
)
from apps.environments.attachments import attachment_url_for
from apps.runs.access import run_get_for_user
from apps.runs.selectors import grader_anchors
from apps.runs.timeline import failures, run_timeline, verdict_rows


def _filters(request) -> DemonstrationFilters:
    source = request.POST if request.method == "POST" else request.GET
    if request.method == "POST" and "filters" in request.POST:
        source = QueryDict(request.POST.get("filters", ""))
    return DemonstrationFilters.from_query(source)


def _item_url(project, pk, filters: DemonstrationFilters) -> str:
    url = reverse("curation:review", args=[project.slug, pk])
    query = filters.to_query(with_status=False)
    return f"{url}?{query}" if query else url


def _queue_url(project, filters: DemonstrationFilters) -> str:
    url = reverse("curation:queue", args=[project.slug])
    query = filters.to_query(with_status=False)
    return f"{url}?{query}" if query else url


def _assistant_turns(transcript: list) -> list[dict]:
    turns, turn = [], -1
    for index, message in enumerate(transcript or []):
        if not isinstance(message, dict):
            continue
        if message.get("role") == "user":
            turn += 1
        if message.get("role") != "assistant":
            continue
        calls = [
            (c.get("function") or {}).get("name", "")
            for c in message.get("tool_calls") or []
            if isinstance(c, dict)
        ]
        turns.append(
            {
                "index": index,
                "turn": max(turn, 0),
                "content": message.get("content") or "",
                "calls": calls,
                "excluded": message.get("weight") == 0,
            }
        )
    return turns


def _version_view(demo, version) -> dict:
    environment = demo.environment
    items = run_timeline(
        transcript=version.transcript,
        audit_log=version.audit_log,
        exogenous_log=version.exogenous_log,
        attachments=environment.attachments if environment is not None else None,
        attachment_url=attachment_url_for(environment),
    )
    for item in items:
        if item["kind"] == "assistant":
            index = int(item["anchor"].removeprefix("msg-"))
            message = version.transcript[index]
            item["excluded"] = isinstance(message, dict) and message.get("weight") == 0
    verdicts = (version.grading or {}).get("verdicts") or []
    anchors = grader_anchors(run=demo.run) if demo.run and demo.run.task_id else {}
    return {
        "version": version,
        "items": items,
        "verdicts": verdict_rows(verdicts, anchors),
        "failures": failures(items, verdicts),
    }


def _task_panel(demo) -> dict | None:
    task = demo.task
    if task is None:
        return None
    return {
        "task": task,
        "turns": [t.get("message", "") for t in task.turns or [] if isinstance(t, dict)],
        "constraints": task.constraints or [],
        "graders": list(task.graders.order_by("position", "id")),
    }


def _review_context(request, demo, filters, *, decision_form=None, open_panel="") -> dict:
    project = demo.project
    membership = check_project_role(request.user, project)
    version = demo.current_version
    now_held_by_me = demo.claimed_by_id == request.user.pk
    reviewed = Review.objects.filter(
        demonstration=demo, round=demo.review_round, reviewer=request.user, adjudication=False
    ).exists()
    pending = demo.status == DemonstrationStatus.PENDING and not demo.disputed
    held_by_other = (
        demo.claimed_by_id not in (None, request.user.pk)
        and demo.claim_expires_at is not None
        and demo.claim_expires_at >= timezone.now()
    )
    return {
        "project": project,
        "membership": membership,
        "demo": demo,
        "filters": filters,
        "filters_query": filters.to_query(with_status=False),
        "choices": filter_choices(project=project),
        "progress": reviewer_progress(project=project, user=request.user, filters=filters),
        "round": round_progress(demo),
        "held_by_me": now_held_by_me and not held_by_other,
        "held_by_other": held_by_other,
        "already_reviewed": reviewed,
        "can_decide": pending and not reviewed and not held_by_other,
        "tags": active_reason_tags(project=project),
        "decision_form": decision_form,
        "open_panel": open_panel,
        "chosen_tags": decision_form.data.getlist("reason_tags") if decision_form else [],
        "chosen_comment": decision_form.data.get("comment", "") if decision_form else "",
        "assistant_turns": _assistant_turns(version.transcript if version else []),
        "panel": _task_panel(demo),
        "version_count": demo.versions.count(),
        "decisions": Decision,
        **(_version_view(demo, version) if version else {"items": [], "verdicts": []}),
    }


# --------------------------------------------------------------------------- the queue


@login_required
@require_GET
def queue_view(request, slug):
    project = project_get_for_user(request.user, slug, Role.REVIEWER)
    filters = _filters(request)
    held = claim_held(project=project, user=request.user)
    if held is not None and request.GET.get("stay") != "1":
        return redirect_after_post(request, _item_url(project, held.pk, filters))
    context = {
        "project": project,
        "membership": check_project_role(request.user, project),
        "filters": filters,
        "filters_query": filters.to_query(with_status=False),
        "choices": filter_choices(project=project),
        "progress": reviewer_progress(project=project, user=request.user, filters=filters),
        "agreement": project_agreement(project=project),
        "held": held,
    }
    return render_page(request, "curation/queue.html", context)


@login_required
@require_POST
def queue_start_view(request, slug):
    project = project_get_for_user(request.user, slug, Role.REVIEWER)
    filters = _filters(request)
    demo = demonstration_claim_next(
        queryset=queue_queryset(project=project, filters=filters), user=request.user
    )
    if demo is None:
        messages.info(request, "Nothing is waiting for you under these filters.")
        return redirect_after_post(request, _queue_url(project, filters) + _stay(filters))
    return redirect_after_post(request, _item_url(project, demo.pk, filters))


def _stay(filters) -> str:
    return ("&" if filters.active else "?") + "stay=1"


@login_required
@require_GET
def review_view(request, slug, pk):
    demo = demonstration_get_for_user(request.user, pk, Role.REVIEWER)
    if demo.project.slug != slug:
        raise Http404("No such demonstration.")
    context = _review_context(request, demo, _filters(request))
    return render_page(request, "curation/review.html", context, partial="item")


@login_required
@require_POST
def queue_move_view(request, slug, pk):
    demo = demonstration_get_for_user(request.user, pk, Role.REVIEWER)
    if demo.project.slug != slug:
        raise Http404("No such demonstration.")
    filters = _filters(request)
    backwards = request.POST.get("direction") == "previous"
    demonstration_release(demonstration=demo, user=request.user)
    following = demonstration_claim_next(
        queryset=queue_queryset(project=demo.project, filters=filters),
        user=request.user,
        after=demo.pk,
        backwards=backwards,
    )
    if following is None:
        messages.info(request, "Nothing else is waiting for you under these filters.")
        return redirect_after_post(request, _queue_url(demo.project, filters) + _stay(filters))
    return redirect_after_post(request, _item_url(demo.project, following.pk, filters))


@login_required
@require_POST
def claim_view(request, pk):
    demo = demonstration_get_for_user(request.user, pk, Role.REVIEWER)
    filters = _filters(request)
    if demonstration_claim(demonstration=demo, user=request.user):
        messages.success(request, f"You hold demonstration #{demo.pk} for 15 minutes.")
    else:
        messages.error(
            request,
            "You cannot take this demonstration: another reviewer holds it, it is decided, "
            "or you already decided it in this round.",
        )
    return redirect_after_post(request, _item_url(demo.project, demo.pk, filters))


@login_required
@require_POST
def release_view(request, pk):
    demo = demonstration_get_for_user(request.user, pk, Role.REVIEWER)
    demonstration_release(demonstration=demo, user=request.user)
    filters = _filters(request)
    return redirect_after_post(
        request, _queue_url(demo.project, filters) + _stay(filters), "Released."
    )


@login_required
@require_POST
def decide_view(request, pk):
    demo = demonstration_get_for_user(request.user, pk, Role.REVIEWER)
    filters = _filters(request)
    form = DecisionForm(request.POST, tags=active_reason_tags(project=demo.project))
    if form.is_valid():
        try:
            demonstration_review(
                demonstration=demo,
                user=request.user,
                decision=form.cleaned_data["decision"],
                reason_tags=form.cleaned_data["reason_tags"],
                comment=form.cleaned_data["comment"],
            )
        except ApplicationError as exc:
            form.add_error(None, exc.message)
    if not form.is_valid() or form.errors:
        demo.refresh_from_db()
        context = _review_context(
            request,
            demo,
            filters,
            decision_form=form,
            open_panel=request.POST.get("decision", ""),
        )
        return render_page(request, "curation/review.html", context, partial="item")
    label = Decision(form.cleaned_data["decision"]).label.lower()
    following = demonstration_claim_next(
        queryset=queue_queryset(project=demo.project, filters=filters),
        user=request.user,
        after=demo.pk,
    )
    message = (
        f"Demonstration #{demo.pk}: {label}d."
        if label != "needs changes"
        else (f"Demonstration #{demo.pk}: marked as needing changes.")
    )
    if following is None:
        return redirect_after_post(
            request,
            _queue_url(demo.project, filters) + _stay(filters),
            message + " Nothing else is waiting for you.",
        )
    return redirect_after_post(request, _item_url(demo.project, following.pk, filters), message)


@login_required
@require_POST
def correct_view(request, pk):
    demo = demonstration_get_for_user(request.user, pk, Role.REVIEWER)
    filters = _filters(request)
    form = CorrectionForm(request.POST)
    back = _item_url(demo.project, demo.pk, filters)
    if not form.is_valid():
        first = next(iter(form.errors.values()))[0]
        messages.error(request, f"The correction was not saved: {first}")
        return redirect_after_post(request, back)
    try:
        version = demonstration_correct(
            demonstration=demo,
            user=request.user,
            edits=[form.edit()],
            note=form.cleaned_data.get("note", ""),
        )
    except ApplicationError as exc:
        messages.error(request, f"The correction was not saved: {exc.message}")
        return redirect_after_post(request, back)
    demonstration_claim(demonstration=demo, user=request.user)
    if version.flag == "passed→failed":
        messages.warning(
            request,
            f"Version {version.number} saved, but it no longer passes the task "
            f"(score {version.score:.2f}): flagged passed→failed.",
        )
    elif version.score is None:
        messages.warning(
            request,
            f"Version {version.number} saved; it could not be re-graded: "
            f"{version.grading.get('error', '')}",
        )
    else:
        outcome = "passes" if version.passed else "does not pass"
        messages.success(
            request,
            f"Version {version.number} saved and re-graded: score {version.score:.2f}, {outcome}.",
        )
    return redirect_after_post(request, back)


# --------------------------------------------------------------------------- lists and detail


@login_required
@require_GET
def detail_view(request, pk):
    demo = demonstration_get_for_user(request.user, pk)
    versions = list(demo.versions.select_related("created_by").order_by("number"))
    by_number = {v.number: v for v in versions}

    def pick(name, default):
        value = request.GET.get(name, "")
        return by_number.get(parse_id(value)) if is_id(value) else default

    shown = pick("v", demo.current_version) or versions[-1]
    a = pick("a", None)
    b = pick("b", None)
    diff = version_diff(a, b) if a and b and a != b else None
    context = {
        "project": demo.project,
        "membership": check_project_role(request.user, demo.project),
        "demo": demo,
        "versions": versions,
        "reviews": visible_reviews(demo),
        "round": round_progress(demo),
        "diff": diff,
        "diff_a": a,
        "diff_b": b,
        "panel": _task_panel(demo),
        **_version_view(demo, shown),
    }
    return render_page(request, "curation/detail.html", context, partial="timeline")


@login_required
@require_POST
def reopen_view(request, pk):
    demo = demonstration_get_for_user(request.user, pk, Role.REVIEWER)
    try:
        demonstration_reopen(demonstration=demo)
    except ApplicationError as exc:
        messages.error(request, exc.message)
        return redirect_after_post(request, reverse("curation:detail", args=[demo.pk]))
    return redirect_after_post(
        request,
        reverse("curation:detail", args=[demo.pk]),
        f"Demonstration #{demo.pk} is back in the review queue.",
    )


@login_required
@require_POST
def promote_view(request, pk):
    run = run_get_for_user(request.user, pk, Role.REVIEWER)
    try:
        demo = demonstration_from_run(run=run, user=request.user)
    except ApplicationError as exc:
        messages.error(request, exc.message)
        return redirect_after_post(request, reverse("runs:detail", args=[run.pk]))
    return redirect_after_post(
        request,
        reverse("curation:detail", args=[demo.pk]),
        f"Run #{run.pk} is demonstration #{demo.pk}, waiting for review.",
    )


# --------------------------------------------------------------------------- adjudication


# --------------------------------------------------------------------------- settings
