from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.accounts.access import check_project_role, project_get_for_user
from apps.accounts.job_access import job_get_for_user
from apps.accounts.models import Role
from apps.core.exceptions import ApplicationError
from apps.core.http import (
    form_add_service_error,
    is_partial_request,
    redirect_after_post,
    render_page,
)
from apps.llm.access import endpoint_get_for_user, error_bodies_visible
from apps.llm.forms import ModelEndpointForm, ProjectJudgeForm
from apps.llm.models import LLMCallStatus
from apps.llm.selectors import (
    endpoint_last_test,
    endpoint_list,
    judge_verdict_totals,
    llm_call_list,
    llm_call_totals,
    project_judge_get,
)
from apps.llm.services import (
    TEST_TIMEOUT_CAP_S,
    endpoint_create,
    endpoint_delete,
    endpoint_test_start,
    endpoint_update,
    project_judge_set,
)

CALLS_PER_PAGE = 20


@login_required
@require_GET
def endpoint_list_view(request, slug):
    project = project_get_for_user(request.user, slug)
    context = {
        "project": project,
        "membership": check_project_role(request.user, project),
        "endpoints": endpoint_list(project=project),
        "judge": project_judge_get(project=project),
    }
    return render_page(request, "llm/endpoint_list.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def judge_setting_view(request, slug):
    """Choose the project's LLM judge (authors and above)."""
    project = project_get_for_user(request.user, slug, min_role=Role.AUTHOR)
    current = project_judge_get(project=project)
    form = ProjectJudgeForm(
        request.POST or None,
        project=project,
        initial={"endpoint": current.endpoint if current else None},
    )
    if request.method == "POST" and form.is_valid():
        endpoint = form.cleaned_data["endpoint"]
        try:
            project_judge_set(project=project, endpoint=endpoint, user=request.user)
        except ApplicationError as exc:
            form_add_service_error(form, exc)
        else:
            message = (
                f"The judge is now “{endpoint.name}” ({endpoint.model})."
                if endpoint
                else "No judge: judge graders will be skipped."
            )
            url = reverse("llm:endpoint_list", args=[project.slug])
            return redirect_after_post(request, url, message)
    context = {
        "project": project,
        "membership": check_project_role(request.user, project),
        "form": form,
        "judge": current,
        "totals": judge_verdict_totals(project=project),
    }
    return render_page(request, "llm/judge_setting.html", context, partial="form")


@login_required
@require_http_methods(["GET", "POST"])
def endpoint_create_view(request, slug):
    project = project_get_for_user(request.user, slug, min_role=Role.AUTHOR)
    form = ModelEndpointForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            endpoint = endpoint_create(
                project=project, created_by=request.user, **form.cleaned_data
            )
        except ApplicationError as exc:
            form_add_service_error(form, exc)
        else:
            url = reverse("llm:endpoint_detail", args=[endpoint.pk])
            return redirect_after_post(request, url, f"Added the endpoint “{endpoint.name}”.")
    context = {
        "project": project,
        "membership": check_project_role(request.user, project),
        "form": form,
        "endpoint": None,
    }
    return render_page(request, "llm/endpoint_form.html", context, partial="form")


@login_required
@require_http_methods(["GET", "POST"])
def endpoint_edit_view(request, pk):
    endpoint = endpoint_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    form = ModelEndpointForm(request.POST or None, instance=endpoint)
    if request.method == "POST" and form.is_valid():
        try:
            endpoint = endpoint_update(endpoint=endpoint, **form.cleaned_data)
        except ApplicationError as exc:
            form_add_service_error(form, exc)
        else:
            url = reverse("llm:endpoint_detail", args=[endpoint.pk])
            return redirect_after_post(request, url, f"Saved “{endpoint.name}”.")
    context = {
        "project": endpoint.project,
        "membership": check_project_role(request.user, endpoint.project),
        "form": form,
        "endpoint": endpoint,
    }
    return render_page(request, "llm/endpoint_form.html", context, partial="form")


@login_required
@require_http_methods(["GET", "POST"])
def endpoint_delete_view(request, pk):
    endpoint = endpoint_get_for_user(request.user, pk, min_role=Role.ADMIN)
    project = endpoint.project
    error = None
    if request.method == "POST":
        name = endpoint.name
        try:
            endpoint_delete(endpoint=endpoint)
        except ApplicationError as exc:
            error = exc.message
        else:
            url = reverse("llm:endpoint_list", args=[project.slug])
            return redirect_after_post(request, url, f"Deleted “{name}”. Its call log is kept.")
    context = {
        "project": project,
        "membership": check_project_role(request.user, project),
        "endpoint": endpoint,
        "totals": llm_call_totals(endpoint=endpoint),
        "error": error,
    }
    return render_page(request, "llm/endpoint_delete.html", context)


def _detail_context(request, endpoint):
    status = request.GET.get("status", "")
    calls = llm_call_list(endpoint=endpoint, status=status)
    membership = check_project_role(request.user, endpoint.project)
    return {
        "project": endpoint.project,
        "membership": membership,
        "show_error_bodies": error_bodies_visible(membership),
        "endpoint": endpoint,
        "totals": llm_call_totals(endpoint=endpoint),
        "page": Paginator(calls, CALLS_PER_PAGE).get_page(request.GET.get("page")),
        "status": status,
        "statuses": LLMCallStatus.choices,
        "calls_url": reverse("llm:endpoint_detail", args=[endpoint.pk]),
        "test_job": endpoint_last_test(endpoint=endpoint),
        "test_cap_s": f"{TEST_TIMEOUT_CAP_S:g}",
    }


@login_required
@require_GET
def endpoint_detail_view(request, pk):
    endpoint = endpoint_get_for_user(request.user, pk)
    return render_page(
        request, "llm/endpoint_detail.html", _detail_context(request, endpoint), partial="calls"
    )


@login_required
@require_POST
def endpoint_test_view(request, pk):
    """Queue one tiny request as a job; its status partial polls until the answer is in."""
    endpoint = endpoint_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    job = endpoint_test_start(endpoint=endpoint, started_by=request.user)
    if not is_partial_request(request):
        return redirect_after_post(request, reverse("llm:endpoint_detail", args=[endpoint.pk]))
    context = {
        "project": endpoint.project,
        "membership": check_project_role(request.user, endpoint.project),
        "endpoint": endpoint,
        "test_job": job,
        "test_cap_s": f"{TEST_TIMEOUT_CAP_S:g}",
    }
    return render_page(request, "llm/endpoint_detail.html", context, partial="test_result")


@login_required
@require_GET
def job_calls_view(request, pk):
    job = job_get_for_user(request.user, pk)
    status = request.GET.get("status", "")
    calls = llm_call_list(job=job, status=status)
    membership = check_project_role(request.user, job.project)
    context = {
        "project": job.project,
        "membership": membership,
        "show_error_bodies": error_bodies_visible(membership),
        "job": job,
        "totals": llm_call_totals(job=job),
        "page": Paginator(calls, CALLS_PER_PAGE).get_page(request.GET.get("page")),
        "status": status,
        "statuses": LLMCallStatus.choices,
        "calls_url": reverse("llm:job_calls", args=[job.pk]),
    }
    return render_page(request, "llm/job_calls.html", context, partial="calls")
