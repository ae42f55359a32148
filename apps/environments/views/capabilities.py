"""The capability pages (catalogue, detail, coverage): environment reads over the catalogue."""

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.accounts.access import check_project_role, project_get_for_user
from apps.accounts.models import Role
from apps.capabilities.access import capability_get_for_user
from apps.capabilities.forms import CapabilityForm
from apps.capabilities.services import (
    capability_archive,
    capability_catalogue,
    capability_catalogue_seed,
    capability_create,
    capability_restore,
    capability_update,
)
from apps.core import charts
from apps.core.exceptions import ApplicationError
from apps.core.http import redirect_after_post, render_page
from apps.core.text import count_of
from apps.environments.capability_selectors import (
    capability_coverage,
    capability_exists,
    capability_groups,
    capability_list,
    capability_tasks,
)

LIST_PAGE_SIZE = 100
TASK_PAGE_SIZE = 50


def _apply_error(form, exc: ApplicationError) -> None:
    slug_errors = exc.extra.get("slug") if isinstance(exc.extra, dict) else None
    if slug_errors:
        form.add_error("slug", slug_errors[0])
    else:
        form.add_error(None, exc.message)


@login_required
@require_GET
def capability_list_view(request, slug):
    project = project_get_for_user(request.user, slug)
    q = request.GET.get("q", "").strip()[:200]
    group = request.GET.get("group", "").strip()[:60]
    archived = request.GET.get("archived") == "1"
    capabilities = capability_list(project=project, q=q, group=group, archived=archived)
    page = Paginator(capabilities, LIST_PAGE_SIZE).get_page(request.GET.get("page"))
    context = {
        "project": project,
        "membership": check_project_role(request.user, project),
        "page": page,
        "q": q,
        "group": group,
        "archived": archived,
        "groups": capability_groups(project=project),
        "filtered": bool(q or group),
        # Offer the standard catalogue to a project that has no capabilities at all.
        "offer_catalogue": not page.object_list and not capability_exists(project=project),
        "catalogue_size": len(capability_catalogue()["capabilities"]),
    }
    return render_page(request, "capabilities/list.html", context, partial="rows")


@login_required
@require_POST
def capability_catalogue_seed_view(request, slug):
    project = project_get_for_user(request.user, slug, min_role=Role.AUTHOR)
    added = capability_catalogue_seed(project=project, user=request.user)
    message = (
        f"Added {added} capabilities from the standard catalogue."
        if added
        else "The project already has every capability of the standard catalogue."
    )
    return redirect_after_post(request, reverse("capabilities:list", args=[project.slug]), message)


@login_required
@require_GET
def capability_detail(request, pk):
    capability = capability_get_for_user(request.user, pk)
    project = capability.project
    page = Paginator(capability_tasks(capability=capability), TASK_PAGE_SIZE).get_page(
        request.GET.get("page")
    )
    context = {
        "project": project,
        "membership": check_project_role(request.user, project),
        "capability": capability,
        "page": page,
    }
    return render_page(request, "capabilities/detail.html", context, partial="tasks")


@login_required
@require_http_methods(["GET", "POST"])
def capability_create_view(request, slug):
    project = project_get_for_user(request.user, slug, min_role=Role.AUTHOR)
    form = CapabilityForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            capability = capability_create(project=project, user=request.user, **form.cleaned_data)
        except ApplicationError as exc:
            _apply_error(form, exc)
        else:
            url = reverse("capabilities:detail", args=[capability.pk])
            return redirect_after_post(request, url, f"Created “{capability.name}”.")
    return _capability_form(request, project, form, None)


@login_required
@require_http_methods(["GET", "POST"])
def capability_edit(request, pk):
    capability = capability_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    project = capability.project
    form = CapabilityForm.for_capability(
        capability, request.POST or None, tasks_using=capability.task_links.count()
    )
    if request.method == "POST" and form.is_valid():
        changes = dict(form.cleaned_data)
        changes["slug"] = changes["slug"] or capability.slug
        try:
            capability = capability_update(capability=capability, **changes)
        except ApplicationError as exc:
            _apply_error(form, exc)
        else:
            url = reverse("capabilities:detail", args=[capability.pk])
            return redirect_after_post(request, url, f"Saved “{capability.name}”.")
    return _capability_form(request, project, form, capability)


def _capability_form(request, project, form, capability):
    """The create form (``capability`` None) or the edit form of ``capability``."""
    if capability is None:
        action_url = reverse("capabilities:create", args=[project.slug])
        back_url = reverse("capabilities:list", args=[project.slug])
    else:
        action_url = reverse("capabilities:edit", args=[capability.pk])
        back_url = reverse("capabilities:detail", args=[capability.pk])
    context = {
        "project": project,
        "membership": check_project_role(request.user, project),
        "form": form,
        "groups": capability_groups(project=project),
        "capability": capability,
        "action_url": action_url,
        "back_url": back_url,
    }
    return render_page(request, "capabilities/form.html", context, partial="form")


@login_required
@require_POST
def capability_archive_view(request, pk):
    capability = capability_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    capability = capability_archive(capability=capability)
    return redirect_after_post(
        request,
        reverse("capabilities:detail", args=[capability.pk]),
        f"Archived “{capability.name}”. Its tasks keep their links; it no longer appears in "
        "lists and pickers.",
    )


@login_required
@require_POST
def capability_restore_view(request, pk):
    capability = capability_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    capability = capability_restore(capability=capability)
    return redirect_after_post(
        request,
        reverse("capabilities:detail", args=[capability.pk]),
        f"Restored “{capability.name}”.",
    )


@login_required
@require_GET
def coverage(request, slug):
    project = project_get_for_user(request.user, slug)
    sort = request.GET.get("sort", "name")
    result = capability_coverage(project=project, sort=sort)
    context = {
        "project": project,
        "membership": check_project_role(request.user, project),
        "coverage": result,
        "columns": _coverage_columns(result),
        "horizon_charts": _horizon_charts(result.horizon),
    }
    return render_page(request, "capabilities/coverage.html", context, partial="matrix")


def _horizon_charts(distribution) -> list[dict]:
    """One bar chart per dimension (turns, reference calls, days spanned): the share of
    tasks in each bucket, the count as the note."""
    if not distribution.tasks:
        return []
    out = []
    for key, title in (
        ("turns", "Turns"),
        ("calls", "Reference calls"),
        ("days", "Days spanned"),
    ):
        buckets = getattr(distribution, key)
        out.append(
            {
                "key": key,
                "title": title,
                "median": distribution.median[key],
                "maximum": distribution.maximum[key],
                "chart": charts.bar_chart(
                    [
                        {
                            "label": b["label"],
                            "value": b["share"],
                            "note": count_of(b["count"], "task"),
                        }
                        for b in buckets
                    ],
                    width=380,
                    label_width=100,
                ),
            }
        )
    return out


COVERAGE_COLUMNS = [
    ("name", "Capability", "The workflow requirement."),
    ("tasks", "Tasks", "Tasks tagged with it, in environments that are not archived."),
    ("valid", "Valid tasks", "Tasks whose environment is valid or approved."),
    (
        "sensitivity",
        "Grader sensitivity",
        "Mean share of reference-solution mutants the graders catch, from each environment's "
        "latest validation.",
    ),
    ("train", "Train", "Tasks in the train split."),
    ("eval", "Eval", "Tasks in the eval split."),
]


def _coverage_columns(result) -> list[dict]:
    """Header cells: clicking a column sorts by it; clicking it again reverses the order."""
    columns = []
    for key, label, help_text in COVERAGE_COLUMNS:
        active = result.sort == key
        if active:  # the same column again reverses the order
            next_sort = key if result.descending else f"-{key}"
        else:  # counts read best largest first, names alphabetically
            next_sort = key if key == "name" else f"-{key}"
        columns.append(
            {
                "key": key,
                "label": label,
                "help": help_text,
                "sort": next_sort,
                "active": active,
                "aria_sort": ("descending" if result.descending else "ascending")
                if active
                else "none",
            }
        )
    return columns
