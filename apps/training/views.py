"""Training pages: jobs list, launch form, job page (live loss chart, log tail, cancel,
artifacts), overlay of several jobs' loss curves, the operator's command templates (read
only), and a trained model's serve command, evaluation launch and before/after comparison."""

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
from apps.core.safeinput import is_id, parse_id
from apps.datasets.selectors import sft_versions_ready, version_ids_with_images
from apps.llm.selectors import endpoint_list
from apps.training.access import (
    can_read_log,
    trained_model_get_for_user,
    training_job_get_for_user,
)
from apps.training.charts import job_loss_chart, loss_chart, rl_compare_chart, rl_job_chart
from apps.training.command_templates import TemplateFileError, command_templates
from apps.training.forms import IMAGES_NEED_VISION, EvaluateForm, LaunchForm
from apps.training.hyperparameters import (
    ADVANTAGES,
    CREDITS,
    GRPO_PRESETS,
    PRESETS,
    REWARD_VARIANTS,
)
from apps.training.models import TrainedModel, TrainingJob, TrainingMethod
from apps.training.redaction import scrub, scrub_json
from apps.training.selectors import (
    chart_sample,
    loss_series,
    rl_job_list,
    rl_series,
    rl_summary,
    runnable_environments,
    training_job_list,
    training_metrics_latest,
    training_metrics_sampled,
)
from apps.training.services import (
    training_job_cancel,
    training_job_create,
)
from apps.training.services.evaluation import before_after, serve_command, trained_model_evaluate

JOBS_PER_PAGE = 25
MAX_COMPARED = 6


@login_required
@require_GET
def job_list_view(request, slug):
    project = project_get_for_user(request.user, slug)
    page = Paginator(training_job_list(project=project), JOBS_PER_PAGE).get_page(
        request.GET.get("page")
    )
    context = {
        "project": project,
        "membership": check_project_role(request.user, project),
        "page": page,
    }
    return render_page(request, "training/list.html", context, partial="rows")


def _offered_templates() -> tuple[list, str]:
    """The operator's command templates, and why none can be offered when their file is
    broken (shown on the page; the operator fixes the file)."""
    try:
        return list(command_templates().values()), ""
    except TemplateFileError as exc:
        return [], exc.message


def _pick(queryset, value):
    return queryset.filter(pk=value).first() if is_id(value or "") else None


@login_required
@require_http_methods(["GET", "POST"])
def job_create_view(request, slug):
    project = project_get_for_user(request.user, slug, min_role=Role.AUTHOR)
    versions = sft_versions_ready(project=project)
    endpoints = endpoint_list(project=project)
    templates, templates_error = _offered_templates()
    initial = {}
    if is_id(request.GET.get("version", "")):
        initial["dataset_version"] = request.GET["version"]
    environments = runnable_environments(project=project)
    if request.GET.get("method") == TrainingMethod.GRPO:
        initial["method"] = TrainingMethod.GRPO
    form = LaunchForm(
        request.POST or None,
        initial=initial,
        versions=versions,
        endpoints=endpoints,
        templates=templates,
        environments=environments,
        with_images=version_ids_with_images(versions=versions),
    )
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            training_job = training_job_create(
                project=project,
                user=request.user,
                method=data["method"],
                environments=list(environments.filter(pk__in=data["environments"])),
                task_split=data["task_split"],
                dataset_version=_pick(versions, data["dataset_version"]),
                backend=data["backend"],
                base_model=data["base_model"],
                preset=data["preset"],
                hyperparameters=form.hyperparameters(),
                name=data["name"],
                eval_split="validation" if data["eval_on_validation"] else "",
                endpoint=_pick(endpoints, data["endpoint"]),
                command_template=data["command_template"],
                command_parameters=form.command_parameters(),
            )
        except ApplicationError as exc:
            form_add_service_error(form, exc)
        else:
            return redirect_after_post(
                request,
                reverse("training:detail", args=[training_job.pk]),
                f"Launched “{training_job.name}”.",
            )
    context = {
        "project": project,
        "membership": check_project_role(request.user, project),
        "form": form,
        "presets": PRESETS,
        "images_need_vision": IMAGES_NEED_VISION,
        "advanced": [form[name] for name in LaunchForm.ADVANCED],
        "grpo_fields": [form[name] for name in LaunchForm.GRPO],
        "parameter_fields": form.parameter_fields(),
        "templates_error": templates_error,
        "grpo_presets": GRPO_PRESETS,
    }
    return render_page(request, "training/launch.html", context, partial="form")


def _rl_context(training_job: TrainingJob, metrics: list) -> dict:
    if training_job.method != TrainingMethod.GRPO:
        return {}
    hp = training_job.hyperparameters or {}
    spreads = [m.group_reward_std for m in metrics if m.group_reward_std is not None]
    return {
        # every group's rewards equal at every step: GRPO's advantages were all zero
        "flat_groups": bool(spreads) and max(spreads) < 1e-9,
        "rl_chart": rl_job_chart(
            [(m.step, m.reward, m.pass_rate, m.group_reward_std) for m in metrics]
        ),
        "reward_label": REWARD_VARIANTS.get(hp.get("reward"), ""),
        "advantage_label": ADVANTAGES.get(hp.get("advantage"), ("",))[0],
        "credit_label": _credit_label(hp),
    }


def _credit_label(hp: dict) -> str:
    """The job's credit assignment (jobs from before the choice: trajectory), with gamma."""
    credit = hp.get("credit", "trajectory")
    label = CREDITS.get(credit, credit)
    return (
        label
        if credit == "trajectory"
        else f"{label}, \N{GREEK SMALL LETTER GAMMA} = {hp.get('gamma', 1.0):g}"
    )


def _detail_context(request, training_job: TrainingJob) -> dict:
    metrics = training_metrics_sampled(training_job=training_job)
    series = [(m.step, m.loss, m.eval_loss) for m in metrics]
    log_readable = can_read_log(request.user, training_job)
    # redacted again as shown: rows written before redaction existed are covered too
    training_job.log_tail = scrub(training_job.log_tail) if log_readable else ""
    training_job.command = scrub(training_job.command)
    training_job.artifacts = scrub_json(training_job.artifacts)
    trained_model = TrainedModel.objects.filter(training_job=training_job).first()
    return {
        **_rl_context(training_job, metrics),
        "project": training_job.project,
        "membership": check_project_role(request.user, training_job.project),
        "training_job": training_job,
        "job": training_job.job,
        "chart": job_loss_chart(series),
        "latest": training_metrics_latest(training_job=training_job),
        "log_readable": log_readable,
        "trained_model": trained_model,
        "serve_command": serve_command(trained_model) if trained_model else "",
        "evaluate_form": EvaluateForm(
            endpoints=endpoint_list(project=training_job.project),
            initial={"base_url": ""} if trained_model.endpoint_id else None,
        )
        if trained_model
        else None,
    }


@login_required
@require_GET
def job_detail_view(request, pk):
    training_job = training_job_get_for_user(request.user, pk)
    response = render_page(
        request, "training/detail.html", _detail_context(request, training_job), partial="live"
    )
    return refresh_when_ended(request, response, training_job.job, "training-live")


@login_required
@require_POST
def job_cancel_view(request, pk):
    training_job = training_job_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    url = reverse("training:detail", args=[training_job.pk])
    try:
        training_job_cancel(training_job=training_job)
    except ApplicationError as exc:
        return redirect_after_post(request, url, exc.message)
    return redirect_after_post(request, url, "Cancel requested.")


@login_required
@require_GET
def job_compare_view(request, slug):
    """The loss curves of several jobs on one chart (``?jobs=1&jobs=2``)."""
    project = project_get_for_user(request.user, slug)
    ids = [i for i in map(parse_id, request.GET.getlist("jobs")) if i is not None]
    ids = ids[:MAX_COMPARED]
    jobs = list(
        TrainingJob.objects.filter(project=project, pk__in=ids)
        .select_related("job", "dataset_version__dataset")
        .order_by("pk")
    )
    series = loss_series(training_jobs=jobs)
    lines = [
        {
            "name": f"#{job.pk} {job.name}"[:40],
            "points": [(s, loss) for s, loss, _ in series[job.pk]],
        }
        for job in jobs
    ]
    context = {
        "project": project,
        "membership": check_project_role(request.user, project),
        "jobs": jobs,
        "chart": loss_chart(lines),
        "choices": training_job_list(project=project)[:50],
        "selected": {job.pk for job in jobs},
    }
    return render_page(request, "training/compare.html", context, partial="chart")


@login_required
@require_GET
def job_compare_rl_view(request, slug):
    """Reward and pass-rate curves of several GRPO jobs on one chart each
    (``?jobs=1&jobs=2``), each line named by its job's reward, advantage and credit."""
    project = project_get_for_user(request.user, slug)
    ids = [i for i in map(parse_id, request.GET.getlist("jobs")) if i is not None]
    ids = ids[:MAX_COMPARED]
    jobs = list(rl_job_list(project=project).filter(pk__in=ids).order_by("pk"))
    series = rl_series(training_jobs=jobs)
    sampled = {job_id: chart_sample(points) for job_id, points in series.items()}
    rows = [
        {
            "job": job,
            "label": job.rl_label(),
            "reward": REWARD_VARIANTS.get(job.hyperparameters.get("reward"), ""),
            "advantage": ADVANTAGES.get(job.hyperparameters.get("advantage"), ("",))[0],
            "credit": _credit_label(job.hyperparameters),
            **rl_summary(series[job.pk]),
        }
        for job in jobs
    ]
    context = {
        "project": project,
        "membership": check_project_role(request.user, project),
        "rows": rows,
        "reward_chart": rl_compare_chart(jobs, sampled, "reward"),
        "pass_chart": rl_compare_chart(jobs, sampled, "pass_rate"),
        "choices": rl_job_list(project=project)[:50],
        "selected": {job.pk for job in jobs},
        "max_compared": MAX_COMPARED,
    }
    return render_page(request, "training/compare_rl.html", context, partial="chart")


@login_required
@require_GET
def template_list_view(request, slug):
    """The command templates the operator offers (read only: project members pick one and
    fill its parameters when they launch; the operator writes them, docs/commands.md)."""
    project = project_get_for_user(request.user, slug)
    templates, templates_error = _offered_templates()
    context = {
        "project": project,
        "membership": check_project_role(request.user, project),
        "templates": templates,
        "templates_error": templates_error,
    }
    return render_page(request, "training/templates.html", context, partial="templates")


@login_required
@require_POST
def model_evaluate_view(request, pk):
    trained_model = trained_model_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    endpoints = endpoint_list(project=trained_model.project)
    form = EvaluateForm(request.POST, endpoints=endpoints)
    if form.is_valid():
        data = form.cleaned_data
        try:
            trained_model_evaluate(
                trained_model=trained_model,
                user=request.user,
                base_url=data["base_url"],
                api_key_env=data["api_key_env"],
                base_endpoint=_pick(endpoints, data["base_endpoint"]),
                trials=data["trials"],
            )
        except ApplicationError as exc:
            form_add_service_error(form, exc)
        else:
            return redirect_after_post(
                request,
                reverse("training:model_compare", args=[trained_model.pk]),
                "Created the endpoint and the evaluation batches.",
            )
    context = _detail_context(request, trained_model.training_job)
    context["evaluate_form"] = form
    return render_page(request, "training/detail.html", context, partial="evaluate")


@login_required
@require_GET
def model_compare_view(request, pk):
    trained_model = trained_model_get_for_user(request.user, pk)
    context = {
        "project": trained_model.project,
        "membership": check_project_role(request.user, trained_model.project),
        "trained_model": trained_model,
        "comparison": before_after(trained_model),
    }
    return render_page(request, "training/model_compare.html", context, partial="comparison")
