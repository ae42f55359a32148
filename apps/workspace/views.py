"""The pages that compose the whole pipeline: a project's dashboard and starting a project."""

from django.contrib.auth.decorators import login_required
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from apps.accounts.access import check_project_role, project_get_for_user
from apps.accounts.forms import ProjectForm
from apps.accounts.views import CURRENT_PROJECT_SESSION_KEY
from apps.core.exceptions import ApplicationError
from apps.core.http import redirect_after_post, render_page
from apps.core.selectors import job_list
from apps.workspace.selectors import project_counts
from apps.workspace.services import project_start


@login_required
@require_http_methods(["GET", "POST"])
def project_create_view(request):
    form = ProjectForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            project = project_start(
                name=form.cleaned_data["name"],
                slug=form.cleaned_data["slug"],
                description=form.cleaned_data["description"],
                creator=request.user,
            )
        except ApplicationError as exc:
            form.add_error(None, exc.message)
        else:
            url = reverse("workspace:dashboard", args=[project.slug])
            return redirect_after_post(request, url, f"Created {project.name}.")
    return render_page(request, "workspace/project_create.html", {"form": form}, partial="form")


@login_required
@require_GET
def project_dashboard(request, slug):
    project = project_get_for_user(request.user, slug)
    request.session[CURRENT_PROJECT_SESSION_KEY] = project.slug
    context = {
        "project": project,
        "membership": check_project_role(request.user, project),
        "counts": (counts := project_counts(project=project)),
        "cards": _dashboard_cards(project, counts),
        "next_step": _next_step(project, counts),
        "recent_jobs": job_list(project=project, limit=5),
    }
    return render_page(request, "workspace/dashboard.html", context)


# Each figure of the dashboard: its label and the page that lists what it counts.
DASHBOARD_CARDS = [
    ("capabilities", "Capabilities", "capabilities:list", ""),
    ("environments", "Environments", "environments:list", ""),
    ("valid_environments", "Valid or approved environments", "environments:list", "?status=valid"),
    ("tasks", "Tasks", "capabilities:coverage", ""),
    ("runs", "Runs", "runs:batch_list", ""),
    ("demonstrations_pending", "Demonstrations awaiting review", "curation:queue", "?stay=1"),
    ("datasets", "Datasets", "datasets:list", ""),
    ("active_jobs", "Jobs in progress", "core:job_list", "?status=running"),
    ("members", "Members", "accounts:member_list", ""),
]


# The loop's stages in order: the first whose count is still zero (or, for the review
# queue, not zero) is what a project does next. (count, done when, what to do, page)
NEXT_STEPS = [
    ("capabilities", False, "Add the capabilities your agents must master", "capabilities:list"),
    ("environments", False, "Synthesize environments for your capabilities", "synthesis:create"),
    ("valid_environments", False, "Validate your environments", "environments:list"),
    ("runs", False, "Run a teacher batch on the valid environments", "runs:batch_create"),
    ("demonstrations_pending", True, "Review the demonstrations waiting", "curation:queue"),
    ("datasets", False, "Build a dataset from approved demonstrations", "datasets:create"),
]


def _next_step(project, counts: dict[str, int]) -> dict:
    for key, pending, text, url_name in NEXT_STEPS:
        if bool(counts.get(key)) == pending:
            return {"key": key, "text": text, "url": reverse(url_name, args=[project.slug])}
    url = reverse("training:create", args=[project.slug])
    return {"key": "training", "text": "Train a model on a dataset version", "url": url}


def _dashboard_cards(project, counts: dict[str, int]) -> list[dict]:
    return [
        {
            "key": key,
            "label": label,
            "value": counts[key],
            "url": reverse(url_name, args=[project.slug]) + query,
        }
        for key, label, url_name, query in DASHBOARD_CARDS
        if key in counts
    ]
