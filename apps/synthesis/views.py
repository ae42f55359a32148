from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.accounts.access import check_project_role, project_get_for_user
from apps.accounts.models import Role
from apps.core.exceptions import ApplicationError
from apps.core.http import (
    form_add_service_error,
    redirect_after_post,
    refresh_when_ended,
    render_page,
)
from apps.core.text import count_of
from apps.synthesis.access import slot_get_for_user, synthesis_get_for_user
from apps.synthesis.forms import SynthesisForm
from apps.synthesis.models import SlotStatus
from apps.synthesis.selectors import (
    attempt_timeline,
    synthesis_list,
    synthesis_slots,
    synthesis_summary,
    with_capabilities,
)
from apps.synthesis.services import synthesis_cancel, synthesis_resume, synthesis_start

JOBS_PER_PAGE = 25
SLOTS_PER_PAGE = 100


@login_required
@require_GET
def synthesis_list_view(request, slug):
    project = project_get_for_user(request.user, slug)
    page = Paginator(synthesis_list(project=project), JOBS_PER_PAGE).get_page(
        request.GET.get("page")
    )
    page.object_list = with_capabilities(project=project, jobs=page.object_list)
    context = {
        "project": project,
        "membership": check_project_role(request.user, project),
        "page": page,
    }
    return render_page(request, "synthesis/list.html", context, partial="rows")


@login_required
@require_http_methods(["GET", "POST"])
def synthesis_create_view(request, slug):
    project = project_get_for_user(request.user, slug, min_role=Role.AUTHOR)
    form = SynthesisForm(request.POST or None, project=project, prefill=request.GET)
    if request.method == "POST" and form.is_valid():
        try:
            synthesis = synthesis_start(project=project, user=request.user, **form.service_kwargs())
        except ApplicationError as exc:
            form_add_service_error(form, exc)
        else:
            url = reverse("synthesis:detail", args=[synthesis.pk])
            return redirect_after_post(request, url, "Synthesis job started.")
    context = {
        "project": project,
        "membership": check_project_role(request.user, project),
        "form": form,
    }
    return render_page(request, "synthesis/create.html", context, partial="form")


@login_required
@require_GET
def synthesis_detail_view(request, pk):
    """The job's page; its ``progress`` partial is what the page polls while it runs."""
    synthesis = synthesis_get_for_user(request.user, pk)
    page = Paginator(synthesis_slots(synthesis=synthesis), SLOTS_PER_PAGE).get_page(
        request.GET.get("page")
    )
    summary = synthesis_summary(synthesis=synthesis)
    with_capabilities(project=synthesis.project, jobs=[synthesis])
    context = {
        "project": synthesis.project,
        "membership": check_project_role(request.user, synthesis.project),
        "synthesis": synthesis,
        "job": synthesis.job,
        "summary": summary,
        "status_counts": [
            (status, label, summary["counts"][status]) for status, label in SlotStatus.choices
        ],
        "page": page,
    }
    response = render_page(request, "synthesis/detail.html", context, partial="progress")
    return refresh_when_ended(request, response, synthesis.job, "synthesis-progress")


@login_required
@require_POST
def synthesis_cancel_view(request, pk):
    synthesis = synthesis_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    try:
        synthesis_cancel(synthesis=synthesis)
    except ApplicationError as exc:
        message = exc.message
    else:
        message = "Cancelled the slots not started yet; running ones stop at their next step."
    return redirect_after_post(request, reverse("synthesis:detail", args=[pk]), message)


@login_required
@require_POST
def synthesis_resume_view(request, pk):
    synthesis = synthesis_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    outcome = synthesis_resume(synthesis=synthesis)
    if outcome["enqueued"]:
        message = f"Queued {count_of(outcome['enqueued'], 'slot')} again."
    elif outcome["leased"]:
        message = (
            f"{count_of(outcome['leased'], 'slot')} held by a worker that is still reporting; "
            "nothing to resume."
        )
    else:
        message = "Nothing to resume."
    return redirect_after_post(request, reverse("synthesis:detail", args=[pk]), message)


@login_required
@require_GET
def synthesis_slot_view(request, pk):
    slot = slot_get_for_user(request.user, pk)
    synthesis = slot.synthesis
    context = {
        "project": synthesis.project,
        "membership": check_project_role(request.user, synthesis.project),
        "synthesis": synthesis,
        "slot": slot,
        "timeline": attempt_timeline(slot=slot),
    }
    return render_page(request, "synthesis/slot.html", context)
