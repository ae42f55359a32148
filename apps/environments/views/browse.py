"""Browsing environments: the list, import, export, bulk actions and one-click actions.

The detail page lives in ``detail.py`` and its edit forms in ``editing.py`` and
``task_editing.py``; the actions here redirect there.
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import RequestDataTooBig
from django.core.paginator import Paginator
from django.http import HttpResponse, HttpResponseRedirect, QueryDict
from django.urls import reverse
from django.utils.http import content_disposition_header, url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.accounts.access import check_project_role, project_get_for_user
from apps.accounts.models import Role
from apps.core.exceptions import ApplicationError
from apps.core.http import redirect_after_post, render_page
from apps.environments.access import environment_get_for_user
from apps.environments.forms import EnvironmentImportForm
from apps.environments.models import (
    EnvironmentSource,
    EnvironmentStatus,
    Split,
    ValidationReport,
)
from apps.environments.selectors import (
    SORTS,
    EnvironmentFilters,
    environment_capability_choices,
    environment_domains,
    environment_list,
    environment_status_counts,
    environments_by_ids,
)
from apps.environments.services import (
    MAX_EXPORT_ENVIRONMENTS,
    environment_approve,
    environment_archive,
    environment_delete,
    environment_duplicate,
    environment_import_text,
    environment_import_upload,
    environment_restore,
    environment_spec_filename,
    environment_spec_json,
    environment_validation_start,
    environments_export_zip,
)
from apps.environments.services.imports import human_size, max_upload_bytes
from apps.environments.services.interop import (
    claw_eval_checks_propose_start,
    claw_eval_export_filename,
    claw_eval_import_upload,
    clawmark_export_filename,
    environment_claw_eval_zip,
    environment_clawmark_zip,
    is_claw_eval_upload,
)
from apps.llm.judge import project_judge_endpoint

PAGE_SIZE = 25
MAX_PROBLEMS_SHOWN = 200
SORT_LABELS = {
    "updated": "Recently updated",
    "name": "Name",
    "status": "Status",
    "tasks": "Most tasks",
    "created": "Newest",
}
FILTER_KEYS = ("q", "status", "domain", "capability", "split", "source")


def validation_summary(environment) -> dict | None:
    """What a list row says about the latest validation (None if never validated)."""
    report: ValidationReport | None = environment.latest_validation
    if report is None:
        return None
    sensitivities = [
        task["sensitivity"]
        for task in report.tasks
        if isinstance(task, dict) and isinstance(task.get("sensitivity"), int | float)
    ]
    return {
        "valid": report.valid,
        "errors": report.error_count,
        "warnings": report.warning_count,
        "mean_sensitivity": sum(sensitivities) / len(sensitivities) if sensitivities else None,
        "revision": report.revision,
        "outdated": report.revision != environment.revision,
        "created_at": report.created_at,
    }


def _list_url(project, query: str = "") -> str:
    url = reverse("environments:list", args=[project.slug])
    return f"{url}?{query}" if query else url


def _detail_url(environment) -> str:
    return reverse("environments:detail", args=[environment.pk])


def _next_url(request) -> str | None:
    """A same-site ``next`` from the form, for actions offered on more than one page."""
    url = request.POST.get("next", "")
    if url and url_has_allowed_host_and_scheme(
        url, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return url
    return None


def _attachment(content, *, filename: str, content_type: str) -> HttpResponse:
    response = HttpResponse(content, content_type=content_type)
    response["Content-Disposition"] = content_disposition_header(True, filename)
    response["X-Content-Type-Options"] = "nosniff"
    return response


# --- the list ------------------------------------------------------------------------------


@login_required
@require_GET
def environment_list_view(request, slug):
    project = project_get_for_user(request.user, slug)
    membership = check_project_role(request.user, project)
    filters = EnvironmentFilters.from_query(request.GET)
    page = Paginator(environment_list(project=project, filters=filters), PAGE_SIZE).get_page(
        request.GET.get("page")
    )
    rows = list(page.object_list)
    for environment in rows:
        environment.validation = validation_summary(environment)
    page.object_list = rows
    filtered = any(getattr(filters, key) for key in FILTER_KEYS)
    filter_query = QueryDict(mutable=True)
    for key in (*FILTER_KEYS, "sort"):
        if request.GET.get(key):
            filter_query[key] = request.GET[key]
    counts = environment_status_counts(project=project)
    context = {
        "project": project,
        "membership": membership,
        "list_url": _list_url(project),
        "can_author": membership.has_role(Role.AUTHOR),
        "page": page,
        "filters": filters,
        "filtered": filtered,
        "filter_query": filter_query.urlencode(),
        "status_counts": [
            (value, label, counts[value]) for value, label in EnvironmentStatus.choices
        ],
        "active_count": sum(n for s, n in counts.items() if s != EnvironmentStatus.ARCHIVED),
        "archived_count": counts[EnvironmentStatus.ARCHIVED],
        "project_has_environments": any(counts.values()),
        "statuses": EnvironmentStatus.choices,
        "sources": EnvironmentSource.choices,
        "splits": Split.choices,
        "sorts": [(key, SORT_LABELS[key]) for key in SORTS],
        "domains": environment_domains(project=project),
        "capabilities": environment_capability_choices(project=project),
        "max_export": MAX_EXPORT_ENVIRONMENTS,
    }
    return render_page(request, "environments/list.html", context, partial="rows")


@login_required
@require_POST
def environment_bulk_view(request, slug):
    """Act on the rows ticked in the list: validate them (one job) or download them (zip)."""
    project = project_get_for_user(request.user, slug)
    action = request.POST.get("action", "")
    back = _list_url(project, QueryDict(request.POST.get("query", "")).urlencode())
    if action not in ("validate", "export"):
        messages.error(request, "Choose “Validate selected” or “Export selected”.")
        return redirect_after_post(request, back)
    if action == "validate":
        check_project_role(request.user, project, Role.AUTHOR)
    ids = request.POST.getlist("ids")
    environments = list(environments_by_ids(project=project, ids=ids))
    if not environments:
        messages.error(request, "Select at least one environment first.")
        return redirect_after_post(request, back)
    if action == "export":
        if len(environments) > MAX_EXPORT_ENVIRONMENTS:
            messages.error(request, f"Export at most {MAX_EXPORT_ENVIRONMENTS} at a time.")
            return redirect_after_post(request, back)
        return _attachment(
            environments_export_zip(environments=environments),
            filename=f"{project.slug}-environments.zip",
            content_type="application/zip",
        )
    try:
        job = environment_validation_start(
            project=project, environments=environments, started_by=request.user
        )
    except ApplicationError as exc:
        messages.error(request, exc.message)
        return redirect_after_post(request, back)
    return redirect_after_post(request, reverse("core:job_detail", args=[job.pk]))


@login_required
@require_GET
def environment_export_matching_view(request, slug):
    """A zip of every environment the list's current filters match."""
    project = project_get_for_user(request.user, slug)
    environments = environment_list(
        project=project, filters=EnvironmentFilters.from_query(request.GET)
    )
    count = environments.count()
    query = request.GET.urlencode()
    if count == 0:
        messages.error(request, "No environments match these filters: nothing to export.")
        return HttpResponseRedirect(_list_url(project, query))
    if count > MAX_EXPORT_ENVIRONMENTS:
        messages.error(
            request,
            f"{count} environments match; export at most {MAX_EXPORT_ENVIRONMENTS} at a time. "
            "Narrow the filters (for example by domain or status) and export each part.",
        )
        return HttpResponseRedirect(_list_url(project, query))
    return _attachment(
        environments_export_zip(environments=environments.select_related(None)),
        filename=f"{project.slug}-environments.zip",
        content_type="application/zip",
    )


# --- import --------------------------------------------------------------------------------


@login_required
@require_http_methods(["GET", "POST"])
def environment_import_view(request, slug):
    project = project_get_for_user(request.user, slug, min_role=Role.AUTHOR)
    membership = check_project_role(request.user, project, Role.AUTHOR)
    error, problems = None, []
    if request.method == "POST":
        try:
            form = EnvironmentImportForm(request.POST, request.FILES)
        except RequestDataTooBig:
            form = EnvironmentImportForm()
            error = "The pasted text is too large; upload it as a .json file instead."
        else:
            if form.is_valid():
                try:
                    environments = _import(project, request.user, form.cleaned_data)
                except ApplicationError as exc:
                    error = exc.message
                    problems = exc.extra.get("problems", [])
                else:
                    return _after_import(request, project, environments, form.cleaned_data)
    else:
        form = EnvironmentImportForm()
    context = {
        "project": project,
        "membership": membership,
        "form": form,
        "error": error,
        "problems": problems[:MAX_PROBLEMS_SHOWN],
        "problems_hidden": max(0, len(problems) - MAX_PROBLEMS_SHOWN),
        "max_upload": human_size(max_upload_bytes()),
    }
    return render_page(request, "environments/import.html", context, partial="form")


def _import(project, user, data) -> list:
    upload = data.get("file")
    if upload:
        content = upload.read()
        if is_claw_eval_upload(upload.name, content):
            return claw_eval_import_upload(
                project=project, user=user, filename=upload.name, content=content
            )
        return environment_import_upload(
            project=project, user=user, filename=upload.name, content=content
        )
    return [environment_import_text(project=project, user=user, text=data["text"])]


def _after_import(request, project, environments, data):
    count = len(environments)
    message = (
        f"Imported “{environments[0].name}” as a draft."
        if count == 1
        else f"Imported {count} environments as drafts."
    )
    if data.get("validate"):
        job = environment_validation_start(
            project=project, environments=environments, started_by=request.user
        )
        message += f" Validation job #{job.pk} is checking {'it' if count == 1 else 'them'}."
    else:
        message += " Validate to find out whether they are usable."
    url = _detail_url(environments[0]) if count == 1 else _list_url(project, "sort=created")
    return redirect_after_post(request, url, message)


# --- export of one -------------------------------------------------------------------------


@login_required
@require_GET
def environment_export_view(request, pk):
    environment = environment_get_for_user(request.user, pk)
    return _attachment(
        environment_spec_json(environment),
        filename=environment_spec_filename(environment),
        content_type="application/json; charset=utf-8",
    )


@login_required
@require_GET
def environment_export_claw_eval_view(request, pk):
    environment = environment_get_for_user(request.user, pk)
    try:
        content = environment_claw_eval_zip(environment)
    except ApplicationError as exc:
        messages.error(request, exc.message)
        return HttpResponseRedirect(_detail_url(environment))
    return _attachment(
        content, filename=claw_eval_export_filename(environment), content_type="application/zip"
    )


@login_required
@require_GET
def environment_export_clawmark_view(request, pk):
    environment = environment_get_for_user(request.user, pk)
    try:
        content = environment_clawmark_zip(environment)
    except ApplicationError as exc:
        messages.error(request, exc.message)
        return HttpResponseRedirect(_detail_url(environment))
    return _attachment(
        content, filename=clawmark_export_filename(environment), content_type="application/zip"
    )


@login_required
@require_POST
def environment_propose_checks_view(request, pk):
    """Checks for an imported Claw-Eval task, proposed by the project's judge model."""
    environment = environment_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    endpoint = project_judge_endpoint(project=environment.project)
    if endpoint is None:
        messages.error(
            request,
            "Choose the project's LLM judge first (project settings): it proposes the checks.",
        )
        return redirect_after_post(request, _detail_url(environment))
    try:
        job = claw_eval_checks_propose_start(
            environment=environment, endpoint=endpoint, started_by=request.user
        )
    except ApplicationError as exc:
        messages.error(request, exc.message)
        return redirect_after_post(request, _detail_url(environment))
    return redirect_after_post(
        request,
        reverse("core:job_detail", args=[job.pk]),
        f"{endpoint.name} is proposing checks; they replace the task's when it is done.",
    )


# --- actions on one environment ------------------------------------------------------------


@login_required
@require_POST
def environment_validate_view(request, pk):
    environment = environment_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    try:
        job = environment_validation_start(
            project=environment.project, environments=[environment], started_by=request.user
        )
    except ApplicationError as exc:
        messages.error(request, exc.message)
        return redirect_after_post(request, _detail_url(environment))
    # Straight to the validation tab: it follows the job live and lists the problems, each
    # linking to what it names, as soon as the report is in.
    return redirect_after_post(
        request,
        reverse("environments:tab", args=[environment.pk, "validation"]),
        f"Validation started (job #{job.pk}): the report appears here when it is done.",
    )


@login_required
@require_POST
def environment_duplicate_view(request, pk):
    environment = environment_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    copy = environment_duplicate(environment=environment, user=request.user)
    return redirect_after_post(
        request, _detail_url(copy), f"Duplicated as “{copy.name}”, a draft you can edit."
    )


@login_required
@require_POST
def environment_archive_view(request, pk):
    environment = environment_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    if environment.status == EnvironmentStatus.ARCHIVED:
        messages.info(request, "This environment is already archived.")
        return redirect_after_post(request, _detail_url(environment))
    environment_archive(environment=environment)
    return redirect_after_post(
        request,
        _next_url(request) or _detail_url(environment),
        "Archived: it is hidden from the list and read-only until restored.",
    )


@login_required
@require_POST
def environment_restore_view(request, pk):
    environment = environment_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    try:
        environment_restore(environment=environment)
    except ApplicationError as exc:
        messages.error(request, exc.message)
        return redirect_after_post(request, _detail_url(environment))
    return redirect_after_post(
        request, _detail_url(environment), "Restored as a draft; validate it again to use it."
    )


@login_required
@require_POST
def environment_approve_view(request, pk):
    environment = environment_get_for_user(request.user, pk, min_role=Role.REVIEWER)
    try:
        environment_approve(environment=environment)
    except ApplicationError as exc:
        messages.error(request, exc.message)
        return redirect_after_post(request, _detail_url(environment))
    return redirect_after_post(
        request, _detail_url(environment), f"Approved revision {environment.revision}."
    )


@login_required
@require_http_methods(["GET", "POST"])
def environment_delete_view(request, pk):
    """Deleting is two steps on purpose: archive first, then delete from this page.

    An environment in use (valid, approved, being edited) cannot be deleted by one stray
    click; the archive step is reversible, the delete is not.
    """
    environment = environment_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    archived = environment.status == EnvironmentStatus.ARCHIVED
    if request.method == "POST":
        project, name = environment.project, environment.name
        try:
            environment_delete(environment=environment)
        except ApplicationError as exc:
            messages.error(request, exc.message)
            return redirect_after_post(
                request, reverse("environments:delete", args=[environment.pk])
            )
        return redirect_after_post(
            request, _list_url(project), f"Deleted “{name}” and everything it held."
        )
    context = {
        "project": environment.project,
        "membership": check_project_role(request.user, environment.project),
        "environment": environment,
        "archived": archived,
        "task_count": environment.tasks.count(),
        "record_count": environment.records.count(),
        "report_count": environment.validation_reports.count(),
    }
    return render_page(request, "environments/confirm_delete.html", context)
