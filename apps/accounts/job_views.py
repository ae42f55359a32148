"""The job pages (a project's jobs, one job, its status and cancel), under ``core:``."""

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from apps.accounts.access import check_project_role, project_get_for_user
from apps.accounts.job_access import job_get_for_user
from apps.accounts.models import Role
from apps.core.exceptions import ApplicationError
from apps.core.http import redirect_after_post, render_page
from apps.core.models import JobStatus
from apps.core.selectors import job_list
from apps.core.services import job_cancel, worker_check_start


@login_required
@require_GET
def project_job_list(request, slug):
    project = project_get_for_user(request.user, slug)
    status = request.GET.get("status", "")
    jobs = job_list(project=project)
    if status in JobStatus.values:
        jobs = jobs.filter(status=status)
    page = Paginator(jobs, 25).get_page(request.GET.get("page"))
    context = {
        "project": project,
        "membership": check_project_role(request.user, project),
        "page": page,
        "status": status,
        "statuses": JobStatus.choices,
    }
    return render_page(request, "core/job_list.html", context, partial="rows")


@login_required
@require_GET
def job_detail(request, pk):
    job = job_get_for_user(request.user, pk)
    context = {
        "project": job.project,
        "membership": check_project_role(request.user, job.project),
        "job": job,
    }
    return render_page(request, "core/job_detail.html", context)


@login_required
@require_GET
def job_status(request, pk):
    """The live status fragment; it keeps polling only while the job is active. The poll
    that sees the job ended fires a ``job-finished`` event, so parts of the page that show
    the job's output (an LLM call log, a list) can reload themselves."""
    job = job_get_for_user(request.user, pk)
    context = {"job": job, "membership": check_project_role(request.user, job.project)}
    response = render_page(request, "core/job_detail.html", context, partial="status")
    if not job.is_active:
        response["HX-Trigger"] = "job-finished"
    return response


@login_required
@require_POST
def job_cancel_view(request, pk):
    job = job_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    try:
        job = job_cancel(job=job)
    except ApplicationError as exc:
        message = exc.message
    else:
        message = "Cancelled." if job.status == JobStatus.CANCELLED else "Asked the job to stop."
    return redirect_after_post(request, reverse("core:job_detail", args=[job.pk]), message)


@login_required
@require_POST
def worker_check_create(request, slug):
    project = project_get_for_user(request.user, slug, min_role=Role.AUTHOR)
    job = worker_check_start(project=project, started_by=request.user)
    return redirect_after_post(request, reverse("core:job_detail", args=[job.pk]))
