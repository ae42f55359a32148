"""Experiment pages: the list, the launch form (a recipe) and the experiment page (its
stages with links and live status, then the results table)."""

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.accounts.access import check_project_role, project_get_for_user
from apps.accounts.models import Role
from apps.core.exceptions import ApplicationError
from apps.core.http import redirect_after_post, render_page
from apps.experiments.access import experiment_get_for_user
from apps.experiments.forms import ExperimentForm, shipped_recipes
from apps.experiments.outcomes import ARM_STAGES, experiment_curves, experiment_results
from apps.experiments.results import ARMS, table_csv, table_markdown, table_summary
from apps.experiments.selectors import experiment_list, experiment_stages, stage_links
from apps.experiments.services import experiment_continue, experiment_create
from apps.experiments.targeting import experiment_synthesize_for_weaknesses, targeted_report
from apps.training.charts import job_loss_chart, rl_job_chart


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
    recipes = shipped_recipes()
    form = ExperimentForm(request.POST or None, shipped=recipes.get(request.GET.get("recipe", "")))
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
    context = {"project": project, "form": form, "recipes": recipes}
    return render_page(request, "experiments/launch.html", context, partial="form")


@login_required
@require_GET
def experiment_detail_view(request, pk):
    experiment = experiment_get_for_user(request.user, pk)
    records = experiment_stages(experiment=experiment)
    context = {
        "project": experiment.project,
        "membership": check_project_role(request.user, experiment.project),
        "experiment": experiment,
        "stages": [(stage, stage_links(stage)) for stage in records],
        **_results_context(experiment, records),
    }
    response = render_page(request, "experiments/detail.html", context, partial="live")
    if (
        getattr(request, "htmx", False)
        and request.htmx.trigger == "experiment-live"
        and not experiment.is_active
    ):
        response["HX-Refresh"] = "true"
    return response


def _results_context(experiment, records) -> dict:
    """The table's rows as (group, [(arm label, stats, deltas, batch url)]), the sentence,
    and the curves; every figure links to the student batch whose runs it counts."""
    table = experiment_results(experiment)
    if not table["rows"]:
        return {"results": None}
    batches = {r.stage: r.outputs.get("batch") for r in records}
    labels = dict(ARMS)
    rows = [
        (
            row["group"],
            [
                (
                    labels[arm],
                    row["arms"][arm],
                    row["deltas"].get(arm, {}),
                    reverse("runs:batch_detail", args=[batches[ARM_STAGES[arm]]]),
                )
                for arm in table["arms"]
            ],
        )
        for row in table["rows"]
    ]
    curves = experiment_curves(experiment)
    rl = [(p["step"], p["reward"], p["pass_rate"], p["group_reward_std"]) for p in curves["grpo"]]
    return {
        "results": {"k": table["k"], "rows": rows, "summary": table_summary(table)},
        "targeted": targeted_report(experiment),
        "sft_chart": job_loss_chart(curves["sft_loss"]) if curves["sft_loss"] else None,
        "grpo_chart": rl_job_chart(rl) if rl else None,
    }


RENDERINGS = {"csv": (table_csv, "text/csv"), "md": (table_markdown, "text/markdown")}


@login_required
@require_GET
def experiment_results_view(request, pk, fmt):
    """The results table as a CSV or Markdown file."""
    experiment = experiment_get_for_user(request.user, pk)
    render, content_type = RENDERINGS[fmt]
    response = HttpResponse(
        render(experiment_results(experiment)), content_type=f"{content_type}; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="experiment-{experiment.pk}.{fmt}"'
    return response


@login_required
@require_POST
def experiment_continue_view(request, pk):
    experiment = experiment_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    url = reverse("experiments:detail", args=[experiment.pk])
    try:
        experiment_continue(experiment=experiment)
    except ApplicationError as exc:
        return redirect_after_post(request, url, exc.message)
    return redirect_after_post(request, url, "The experiment goes on.")


@login_required
@require_POST
def experiment_weaknesses_view(request, pk):
    """Start the second round, synthesizing for the capabilities the student failed."""
    experiment = experiment_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    try:
        second = experiment_synthesize_for_weaknesses(experiment=experiment, user=request.user)
    except ApplicationError as exc:
        return redirect_after_post(
            request, reverse("experiments:detail", args=[experiment.pk]), exc.message
        )
    return redirect_after_post(
        request,
        reverse("experiments:detail", args=[second.pk]),
        f"Started “{second.name}” for {', '.join(second.recipe['capabilities'])}.",
    )
