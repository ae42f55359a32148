"""Pages: the demonstrations list, re-grading, adjudication of disputed reviews, and the
project's curation settings and reason tags."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.accounts.access import check_project_role, project_get_for_user
from apps.accounts.models import Role
from apps.core.exceptions import ApplicationError
from apps.core.http import redirect_after_post, render_page
from apps.core.safeinput import is_id
from apps.curation.access import demonstration_get_for_user, reason_tag_get_for_user
from apps.curation.forms import (
    CurationSettingsForm,
    DecisionForm,
    ReasonTagForm,
)
from apps.curation.models import Decision, DemonstrationStatus, ReviewReasonTag
from apps.curation.selectors import (
    DemonstrationFilters,
    active_reason_tags,
    demonstration_list,
    disputed_list,
    filter_choices,
    project_agreement,
    status_counts,
)
from apps.curation.services import (
    curation_settings_get,
    curation_settings_update,
    demonstration_adjudicate,
    reason_tag_archive,
    reason_tag_create,
    reason_tag_restore,
    reason_tag_update,
    regrade_job_start,
)

PER_PAGE = 50


@login_required
@require_GET
def list_view(request, slug):
    project = project_get_for_user(request.user, slug)
    filters = DemonstrationFilters.from_query(request.GET)
    counts = status_counts(project=project)
    page = Paginator(demonstration_list(project=project, filters=filters), PER_PAGE).get_page(
        request.GET.get("page")
    )
    context = {
        "project": project,
        "membership": check_project_role(request.user, project),
        "filters": filters,
        "filters_query": filters.to_query(),
        "choices": filter_choices(project=project),
        "status_rows": [
            (value, label, counts[value]) for value, label in DemonstrationStatus.choices
        ],
        "statuses": DemonstrationStatus,
        "agreement": project_agreement(project=project),
        "page": page,
    }
    return render_page(request, "curation/list.html", context, partial="rows")


@login_required
@require_POST
def regrade_view(request, slug):
    project = project_get_for_user(request.user, slug, Role.REVIEWER)
    environment = None
    env_id = request.POST.get("environment", "")
    if is_id(env_id):
        from apps.environments.access import environment_get_for_user

        environment = environment_get_for_user(request.user, env_id, Role.REVIEWER)
    job = regrade_job_start(
        project=project, environment=environment, user=request.user, only_stale=False
    )
    return redirect_after_post(
        request, reverse("core:job_detail", args=[job.pk]), "Re-grading started."
    )


@login_required
@require_GET
def adjudicate_view(request, slug):
    project = project_get_for_user(request.user, slug, Role.REVIEWER)
    page = Paginator(disputed_list(project=project), 20).get_page(request.GET.get("page"))
    context = {
        "project": project,
        "membership": check_project_role(request.user, project),
        "page": page,
        "agreement": project_agreement(project=project),
        "tags": active_reason_tags(project=project),
        "decisions": Decision,
    }
    return render_page(request, "curation/adjudicate.html", context)


@login_required
@require_POST
def adjudicate_decide_view(request, pk):
    demo = demonstration_get_for_user(request.user, pk, Role.ADMIN)
    form = DecisionForm(request.POST, tags=active_reason_tags(project=demo.project))
    back = reverse("curation:adjudicate", args=[demo.project.slug])
    if not form.is_valid():
        first = next(iter(form.errors.values()))[0]
        messages.error(request, f"Not decided: {first}")
        return redirect_after_post(request, back)
    try:
        demonstration_adjudicate(
            demonstration=demo,
            user=request.user,
            decision=form.cleaned_data["decision"],
            reason_tags=form.cleaned_data["reason_tags"],
            comment=form.cleaned_data["comment"],
        )
    except ApplicationError as exc:
        messages.error(request, f"Not decided: {exc.message}")
        return redirect_after_post(request, back)
    label = Decision(form.cleaned_data["decision"]).label.lower()
    return redirect_after_post(request, back, f"Demonstration #{demo.pk} adjudicated: {label}.")


@login_required
@require_http_methods(["GET", "POST"])
def settings_view(request, slug):
    project = project_get_for_user(request.user, slug, Role.ADMIN)
    settings = curation_settings_get(project=project)
    if request.method == "POST":
        form = CurationSettingsForm(request.POST)
        if form.is_valid():
            curation_settings_update(project=project, **form.cleaned_data)
            return redirect_after_post(
                request, reverse("curation:settings", args=[slug]), "Curation settings saved."
            )
    else:
        form = CurationSettingsForm(
            initial={
                "pass_threshold": settings.pass_threshold,
                "strict_only": settings.strict_only,
                "reviews_required": settings.reviews_required,
            }
        )
    context = {
        "project": project,
        "membership": check_project_role(request.user, project),
        "form": form,
        "tag_form": ReasonTagForm(),
        "tags": list(ReviewReasonTag.objects.filter(project=project)),
    }
    return render_page(request, "curation/settings.html", context, partial="settings_form")


@login_required
@require_POST
def tag_create_view(request, slug):
    project = project_get_for_user(request.user, slug, Role.ADMIN)
    form = ReasonTagForm(request.POST)
    back = reverse("curation:settings", args=[slug])
    if not form.is_valid():
        messages.error(request, "A reason tag needs a name (at most 60 characters).")
        return redirect_after_post(request, back)
    try:
        tag = reason_tag_create(project=project, **form.cleaned_data)
    except ApplicationError as exc:
        messages.error(request, exc.message)
        return redirect_after_post(request, back)
    return redirect_after_post(request, back, f"Added the reason tag “{tag.name}”.")


@login_required
@require_POST
def tag_update_view(request, pk):
    tag = reason_tag_get_for_user(request.user, pk)
    back = reverse("curation:settings", args=[tag.project.slug])
    action = request.POST.get("action", "save")
    if action == "archive":
        reason_tag_archive(tag=tag)
        return redirect_after_post(request, back, f"Archived “{tag.name}”.")
    if action == "restore":
        reason_tag_restore(tag=tag)
        return redirect_after_post(request, back, f"Restored “{tag.name}”.")
    form = ReasonTagForm(request.POST)
    if not form.is_valid():
        messages.error(request, "A reason tag needs a name (at most 60 characters).")
        return redirect_after_post(request, back)
    try:
        reason_tag_update(tag=tag, **form.cleaned_data)
    except ApplicationError as exc:
        messages.error(request, exc.message)
        return redirect_after_post(request, back)
    return redirect_after_post(request, back, f"Saved “{tag.name}”.")
