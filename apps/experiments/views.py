"""Experiment pages: the list, the launch form (a recipe) and the experiment page (its
stages with links and live status, then the results table)."""

from django.contrib.auth.decorators import login_required
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from apps.accounts.access import check_project_role, project_get_for_user
from apps.accounts.models import Role
from apps.core.exceptions import ApplicationError
from apps.core.http import redirect_after_post, render_page
from apps.experiments.access import experiment_get_for_user
from apps.experiments.forms import ExperimentForm
from apps.experiments.selectors import experiment_list, experiment_stages, stage_links
from apps.experiments.services import experiment_create


@login_required
@require_GET
def experiment_list_view(request, slug):
    project = project_get_for_user(request.user, slug)
    context = {
        "project": project,
        "membership": check_project_role(request.user, project),
        "experiments": experiment_list(project=project)[:100],
    }
    return render_page(request, "experiments/list.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def experiment_create_view(request, slug):
    project = project_get_for_user(request.user, slug, min_role=Role.AUTHOR)
    form = ExperimentForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            experiment = experiment_create(
                project=project, user=request.user, recipe=form.cleaned_data["recipe"]
            )
        except ApplicationError as exc:
            form.add_error("recipe", exc.message)
        else:
            return redirect_after_post(
                request,
                reverse("experiments:detail", args=[experiment.pk]),
                f"Started “{experiment.name}”.",
            )
    context = {"project": project, "form": form}
    return render_page(request, "experiments/launch.html", context, partial="form")


@login_required
@require_GET
def experiment_detail_view(request, pk):
    experiment = experiment_get_for_user(request.user, pk)
    context = {
        "project": experiment.project,
        "membership": check_project_role(request.user, experiment.project),
        "experiment": experiment,
        "stages": [
            (stage, stage_links(stage)) for stage in experiment_stages(experiment=experiment)
        ],
    }
    response = render_page(request, "experiments/detail.html", context, partial="live")
    if (
        getattr(request, "htmx", False)
        and request.htmx.trigger == "experiment-live"
        and not experiment.is_active
    ):
        response["HX-Refresh"] = "true"
    return response
