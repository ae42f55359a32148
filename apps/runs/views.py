from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.accounts.access import check_project_role, project_get_for_user
from apps.accounts.models import Role
from apps.core import charts
from apps.core.exceptions import ApplicationError
from apps.core.http import is_partial_request, redirect_after_post, render_page
from apps.core.safeinput import is_id, parse_id
from apps.core.text import count_of
from apps.environments.access import environment_get_for_user
from apps.environments.attachments import attachment_url_for
from apps.runs.access import batch_get_for_user, run_get_for_user
from apps.runs.evaluation import DAY_BUCKETS, TURN_BUCKETS
from apps.runs.forms import RunBatchForm
from apps.runs.models import RunStatus
from apps.runs.rollouts import (
    ADVANTAGE_LABELS,
    CREDIT_LABELS,
    CREDIT_METHODS,
    REWARD_LABELS,
    Variant,
    group_list,
    group_members,
    member_runs,
)
from apps.runs.selectors import (
    RunFilters,
    batch_list,
    batch_metrics,
    batch_status_counts,
    capability_names,
    environment_run_choices,
    environment_runs,
    grader_anchors,
    leaderboard,
    model_evaluation,
    run_list,
    runs_failing_grader,
    sibling_runs,
    task_anchor,
)
from apps.runs.services import run_batch_cancel, run_batch_create, run_batch_resume
from apps.runs.timeline import failures, run_timeline, turn_days, verdict_rows

RUNS_PER_PAGE = 50
BATCHES_PER_PAGE = 25
GROUPS_PER_PAGE = 10


def _label_capabilities(evaluations: list[dict], names: dict[str, str]) -> None:
    """Give each capability row its name to show (runs record slugs; the slug stays the
    key, shown on hover)."""
    for evaluation in evaluations:
        for row in evaluation["by_capability"]:
            row["label"] = names.get(row["name"], row["name"])


def _capability_chart(evaluation: dict) -> dict:
    return charts.bar_chart(
        [
            {
                "label": row.get("label", row["name"]),
                "value": row["average_score"],
                "note": f"{row['graded']} graded runs",
            }
            for row in evaluation["by_capability"]
        ]
    )


def _capability_comparison(models: list[dict]) -> dict:
    """Average score per capability, one bar per model (one chart instead of a table and a
    chart per model)."""
    if len(models) == 1:
        return _capability_chart(models[0])
    labels = {
        row["name"]: row.get("label", row["name"]) for m in models for row in m["by_capability"]
    }
    names = sorted(labels, key=lambda slug: labels[slug])
    scores = [{row["name"]: row["average_score"] for row in m["by_capability"]} for m in models]
    return charts.bar_chart(
        [{"label": labels[name], "values": [s.get(name) for s in scores]} for name in names],
        series=[m["name"] for m in models],
    )


def _horizon_chart(models: list[dict], field: str) -> dict | None:
    """Average score per horizon bucket (``by_turns`` / ``by_days``), one bar per model:
    where an agent falls off as tasks grow longer."""
    rows = [m[field] for m in models]
    names = []
    for table in rows:
        names += [row["name"] for row in table if row["name"] not in names]
    if not names:
        return None
    order = [label for label, _ in (*TURN_BUCKETS, *DAY_BUCKETS)]
    names.sort(key=lambda n: order.index(n) if n in order else len(order))
    scores = [{row["name"]: row["average_score"] for row in table} for table in rows]
    if len(models) == 1:
        notes = {row["name"]: f"{row['graded']} graded runs" for row in rows[0]}
        return charts.bar_chart(
            [{"label": n, "value": scores[0].get(n), "note": notes[n]} for n in names]
        )
    return charts.bar_chart(
        [{"label": n, "values": [s.get(n) for s in scores]} for n in names],
        series=[m["name"] for m in models],
    )


def _k_chart(series: list[dict]) -> dict:
    return charts.line_chart(series)


@login_required
@require_GET
def batch_list_view(request, slug):
    project = project_get_for_user(request.user, slug)
    page = Paginator(batch_list(project=project), BATCHES_PER_PAGE).get_page(
        request.GET.get("page")
    )
    context = {
        "project": project,
        "membership": check_project_role(request.user, project),
        "page": page,
    }
    return render_page(request, "runs/batch_list.html", context, partial="rows")


@login_required
@require_http_methods(["GET", "POST"])
def batch_create_view(request, slug):
    project = project_get_for_user(request.user, slug, min_role=Role.AUTHOR)
    # ?environment=<id> (the environment page's "New run batch") preselects that environment
    preselected = parse_id(request.GET.get("environment", ""))
    initial = {"environments": [preselected]} if preselected is not None else {}
    form = RunBatchForm(request.POST or None, project=project, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            batch = run_batch_create(project=project, user=request.user, **form.service_arguments())
        except ApplicationError as exc:
            form.add_error(None, exc.message)
        else:
            url = reverse("runs:batch_detail", args=[batch.pk])
            return redirect_after_post(
                request, url, f"Started “{batch.name}”: {batch.slot_count} runs."
            )
    context = {
        "project": project,
        "membership": check_project_role(request.user, project),
        "form": form,
    }
    return render_page(request, "runs/batch_form.html", context, partial="form")


@login_required
@require_GET
def environment_runs_view(request, pk):
    """The environment page's Runs tab loads this fragment (runs read runs, environments
    don't); opened directly, it sends the browser to that tab with the same filters."""
    environment = environment_get_for_user(request.user, pk)
    if not is_partial_request(request):
        url = reverse("environments:tab", args=[environment.pk, "runs"])
        query = request.GET.urlencode()
        return HttpResponseRedirect(f"{url}?{query}" if query else url)
    filters = RunFilters.from_query(request.GET)
    page = Paginator(environment_runs(environment=environment, filters=filters), RUNS_PER_PAGE)
    context = {
        "environment": environment,
        "project": environment.project,
        "membership": check_project_role(request.user, environment.project),
        "filters": filters,
        "filtered": bool(filters.batch or filters.status or filters.policy),
        "statuses": RunStatus.choices,
        "page": page.get_page(request.GET.get("page")),
        **environment_run_choices(environment=environment),
    }
    return render(request, "runs/environment_runs.html", context)


def _batch_context(request, batch) -> dict:
    filters = RunFilters.from_query(request.GET)
    runs = run_list(
        project=batch.project,
        filters=RunFilters(
            batch=batch.pk,
            status=filters.status,
            passed=filters.passed,
            task=filters.task,
        ),
    )
    grader = request.GET.get("grader", "").strip()
    if grader and filters.task is not None:
        runs = runs.filter(
            pk__in=runs_failing_grader(batch=batch, task_ref=filters.task, grader=grader)
        )
    page = Paginator(runs, RUNS_PER_PAGE).get_page(request.GET.get("page"))
    return {
        "project": batch.project,
        "membership": check_project_role(request.user, batch.project),
        "batch": batch,
        "job": batch.job,
        "counts": batch_status_counts(batch=batch),
        "page": page,
        "filters": filters,
        "grader": grader,
        "statuses": RunStatus.choices,
    }


@login_required
@require_GET
def batch_detail_view(request, pk):
    batch = batch_get_for_user(request.user, pk)
    context = _batch_context(request, batch)
    evaluation = batch_metrics(batch=batch)
    _label_capabilities([evaluation], capability_names(project=batch.project))
    summary = evaluation["summary"]
    context.update(
        {
            "evaluation": evaluation,
            "capability_chart": _capability_chart(evaluation),
            "k_chart": _k_chart(
                [
                    {"name": "pass@k", "points": summary["pass_at_k"]},
                    {"name": "pass^k", "points": summary["pass_hat_k"]},
                ]
            ),
            "ks": list(range(1, batch.trials + 1)),
        }
    )
    return render_page(request, "runs/batch_detail.html", context, partial="runs")


@login_required
@require_GET
def batch_progress_view(request, pk):
    """The live progress fragment: polls while the batch runs; once it has ended, a polling
    page is asked to reload so its figures appear."""
    batch = batch_get_for_user(request.user, pk)
    context = {
        "batch": batch,
        "job": batch.job,
        "counts": batch_status_counts(batch=batch),
        "membership": check_project_role(request.user, batch.project),
    }
    response = render(request, "runs/batch_detail.html#progress", context)
    if is_partial_request(request) and not batch.job.is_active:
        response["HX-Refresh"] = "true"
    return response


@login_required
@require_POST
def batch_cancel_view(request, pk):
    batch = batch_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    try:
        run_batch_cancel(batch=batch)
    except ApplicationError as exc:
        message = exc.message
    else:
        message = "Cancelled: pending runs will not start."
    return redirect_after_post(request, reverse("runs:batch_detail", args=[batch.pk]), message)


@login_required
@require_POST
def batch_resume_view(request, pk):
    """Hand an unfinished batch to the workers again, e.g. after a worker or broker was lost."""
    batch = batch_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    try:
        enqueued = run_batch_resume(batch=batch)
    except ApplicationError as exc:
        message = exc.message
    else:
        message = (
            f"Queued {count_of(enqueued, 'run')} again."
            if enqueued
            else "Nothing to resume right now."
        )
    return redirect_after_post(request, reverse("runs:batch_detail", args=[batch.pk]), message)


@login_required
@require_GET
def batch_groups_view(request, pk):
    """A student batch's rollout groups under one reward/advantage/credit variant (chosen
    with the selector; an htmx change swaps only the tables). An unknown or inconsistent
    variant is refused with its reason (the page 400, the htmx fragment 200 so that it is
    swapped in) and the selector keeps what was asked."""
    batch = batch_get_for_user(request.user, pk)
    asked = {k: request.GET.get(k, "") for k in ("reward", "advantage", "credit")}
    error = None
    try:
        variant = Variant.parse(**asked)
    except ApplicationError as exc:
        variant, error = None, exc.message
    page = Paginator(group_list(batch=batch), GROUPS_PER_PAGE).get_page(request.GET.get("page"))
    groups = []
    if variant is not None:
        runs = member_runs(page.object_list, with_calls=variant.credit == "call")
        groups = [
            {"group": group, "members": group_members(group, variant, runs)}
            for group in page.object_list
        ]
    context = {
        "project": batch.project,
        "membership": check_project_role(request.user, batch.project),
        "batch": batch,
        "page": page,
        "groups": groups,
        "variant": variant,
        "asked": asked,
        "error": error,
        "reward_choices": REWARD_LABELS.items(),
        "advantage_choices": ADVANTAGE_LABELS.items(),
        "credit_choices": CREDIT_LABELS.items(),
        # what per-turn and per-call credit accept, marked in the selector
        "credit_rewards": ("score",),
        "credit_advantages": CREDIT_METHODS,
        "variant_labels": variant
        and {
            "reward": REWARD_LABELS[variant.reward],
            "advantage": ADVANTAGE_LABELS[variant.advantage],
        },
    }
    return render_page(
        request,
        "runs/batch_groups.html",
        context,
        partial="groups",
        # htmx swaps only 2xx answers: the fragment with the reason comes back 200, as an
        # invalid form does; the whole page says 400
        status=400 if error and not is_partial_request(request) else 200,
    )


def _run_view_data(run) -> dict:
    environment = run.environment
    items = run_timeline(
        transcript=run.transcript,
        audit_log=run.audit_log,
        exogenous_log=run.exogenous_log,
        attachments=environment.attachments if environment is not None else None,
        attachment_url=attachment_url_for(environment),
        context_events=run.context_events,
    )
    return {
        "run": run,
        "items": items,
        "verdicts": verdict_rows(run.verdicts, grader_anchors(run=run)),
        "failures": failures(items, run.verdicts),
    }


@login_required
@require_GET
def run_detail_view(request, pk):
    run = run_get_for_user(request.user, pk)
    context = {
        "project": run.project,
        "membership": check_project_role(request.user, run.project),
        "batch": run.batch,
        "task_href": task_anchor(run=run),
        "siblings": sibling_runs(run=run),
        "only_failures": request.GET.get("only") == "failures",
        **_run_view_data(run),
    }
    context["turn_days"] = turn_days(context["items"])
    return render_page(request, "runs/run_detail.html", context, partial="timeline")


@login_required
@require_GET
def run_compare_view(request):
    a_id, b_id = request.GET.get("a", ""), request.GET.get("b", "")
    if not (is_id(a_id) and is_id(b_id)):
        raise Http404("Choose two runs to compare: ?a=<run id>&b=<run id>.")
    a = run_get_for_user(request.user, a_id)
    b = run_get_for_user(request.user, b_id)
    if a.project_id != b.project_id:
        raise Http404("No such run.")
    left, right = _run_view_data(a), _run_view_data(b)
    statuses = {}
    for side, data in (("a", left), ("b", right)):
        for verdict in data["verdicts"]:
            statuses.setdefault(verdict["grader_id"], {})[side] = verdict
    context = {
        "project": a.project,
        "membership": check_project_role(request.user, a.project),
        "a": left,
        "b": right,
        "same_task": (a.environment_id, a.task_key) == (b.environment_id, b.task_key),
        "verdict_pairs": [
            {"grader_id": key, "a": pair.get("a"), "b": pair.get("b")}
            for key, pair in statuses.items()
        ],
    }
    return render_page(request, "runs/run_compare.html", context)


@login_required
@require_GET
def evaluation_view(request, slug):
    project = project_get_for_user(request.user, slug)
    chosen = [parse_id(v) for v in request.GET.getlist("batch") if is_id(v)]
    data = model_evaluation(project=project, batch_ids=chosen or None)
    models = data["models"]
    _label_capabilities(models, capability_names(project=project))
    for model in models:
        model["ks"] = sorted(model["summary"]["pass_at_k"])
    context = {
        "project": project,
        "membership": check_project_role(request.user, project),
        "batches": data["batches"],
        "chosen": chosen,
        "models": models,
        "capability_chart": _capability_comparison(models) if models else None,
        "turns_chart": _horizon_chart(models, "by_turns"),
        "days_chart": _horizon_chart(models, "by_days"),
        "k_chart": _k_chart(
            [{"name": m["name"], "points": m["summary"]["pass_at_k"]} for m in models]
        ),
        "hat_chart": _k_chart(
            [{"name": m["name"], "points": m["summary"]["pass_hat_k"]} for m in models]
        ),
    }
    return render_page(request, "runs/evaluation.html", context)


@login_required
@require_GET
def leaderboard_view(request, slug):
    project = project_get_for_user(request.user, slug)
    context = {
        "project": project,
        "membership": check_project_role(request.user, project),
        "boards": leaderboard(project=project),
    }
    return render_page(request, "runs/leaderboard.html", context)
