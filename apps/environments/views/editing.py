"""The environment's detail page (tabs) and every edit of an environment's parts.

Each view: resolve access (404 other projects, 403 too-low roles), bind a form, call a
service, then redirect back to the tab and anchor of what changed, or re-render the form
(status 200, only its partial for htmx) with the errors and the spec problems.
"""

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.accounts.access import check_project_role
from apps.accounts.models import Role
from apps.core.exceptions import ApplicationError
from apps.core.http import redirect_after_post, render_page
from apps.core.safeinput import is_id
from apps.core.text import count_of
from apps.environments.access import (
    environment_get_for_user,
    grader_get_for_user,
    record_get_for_user,
    task_get_for_user,
    tool_get_for_user,
)
from apps.environments.forms import (
    NEW_TASK_INITIAL,
    EnvironmentEditForm,
    GraderForm,
    RecordForm,
    SpecEditForm,
    TaskForm,
    ToolForm,
)
from apps.environments.jsontext import (
    JSONTextError,
    locate_in_fields,
    nearest_line,
    parse_json_text,
    value_lines,
)
from apps.environments.models import Environment, EnvironmentStatus, ValidationReport
from apps.environments.pointers import (
    RECORDS_PER_PAGE,
    TABS,
    collection_anchor,
    page_param,
    record_anchor,
)
from apps.environments.selectors import (
    collection_records,
    environment_active_validation_job,
    environment_collections,
    environment_part_counts,
    environment_task_records,
    environment_tasks,
    environment_validation_reports,
)
from apps.environments.services import (
    environment_replace_spec,
    environment_update,
    grader_create,
    grader_delete,
    grader_update,
    record_create,
    record_delete,
    record_update,
    spec_canonical,
    task_create_with_graders,
    task_delete,
    task_update,
    tool_create,
    tool_delete,
    tool_update,
)
from apps.environments.specs import environment_spec
from coworkenv_engine.problems import SpecError
from coworkenv_engine.validation import validate_spec

DETAIL = "environments/detail.html"
TASK_RECORDS_SHOWN = 50


# --- helpers --------------------------------------------------------------------------------


def tab_url(environment, tab: str, anchor: str = "") -> str:
    url = reverse("environments:tab", args=[environment.pk, tab])
    return f"{url}#{anchor}" if anchor else url


def _page_context(request, environment: Environment, **extra) -> dict:
    membership = check_project_role(request.user, environment.project)
    can_author = membership.has_role(Role.AUTHOR)
    return {
        "project": environment.project,
        "membership": membership,
        "environment": environment,
        "can_author": can_author,
        "can_edit": can_author and environment.is_editable,
        "can_review": membership.has_role(Role.REVIEWER),
        "validation_state": _validation_state(environment),
        **extra,
    }


def _validation_state(environment: Environment) -> str:
    """ "never" (not validated), "outdated" (edited since), "running" (a validation is under
    way: no banner asks for one), or "" (the verdict is current)."""
    if environment.status != EnvironmentStatus.DRAFT:
        return ""
    report = environment.latest_validation
    if report is None:
        state = "never" if environment.revision == 1 else "outdated"
    else:
        state = "outdated" if report.revision != environment.revision else ""
    if state and environment_active_validation_job(environment=environment) is not None:
        return "running"
    return state


def _editable(user, environment_or_pk) -> Environment:
    """The environment, for an author, if it may be edited (archived ones are read-only)."""
    if isinstance(environment_or_pk, Environment):
        environment = environment_or_pk
        check_project_role(user, environment.project, Role.AUTHOR)
    else:
        environment = environment_get_for_user(user, environment_or_pk, min_role=Role.AUTHOR)
    if not environment.is_editable:
        raise PermissionDenied("This environment is archived: restore it before editing.")
    return environment


def _saved_message(environment: Environment, what: str) -> str:
    environment.refresh_from_db(fields=["revision", "status"])
    return f"{what} Edited: revision {environment.revision}, needs validation."


def _render_form(request, template: str, context: dict, *, status: int = 200):
    return render_page(request, template, context, partial="form", status=status)


def _apply(form, action):
    """Run a service; turn its ApplicationError into a form error. Returns (result, problems)."""
    try:
        return action(), []
    except ApplicationError as exc:
        form.add_error(None, exc.message)
        return None, exc.extra.get("problems", [])


def _place_problems(form, problems: list[dict], prefixes: dict[str, str]) -> list[dict]:
    """Show the spec problems of a part editor at their lines: each JSON textarea gets its
    problems in ``data-problems`` (the editor draws them in its gutter), and each problem
    in the list says which field and line it is on, for the page without JavaScript."""
    fields = {}
    for name, prefix in prefixes.items():
        if name in form.fields:
            bound = form[name]
            fields[name] = (prefix, bound.field.prepare_value(bound.value()) or "")
    placed = locate_in_fields(problems, fields)
    where = {}
    for name, located in placed.items():
        form.fields[name].widget.attrs["data-problems"] = json.dumps(
            [{k: p[k] for k in ("line", "severity", "message")} for p in located]
        )
        for p in located:
            where[p["pointer"]] = f"{form[name].label}, line {p['line']}"
    return [{**p, "where": where.get(p.get("pointer", ""), "")} for p in problems]


def _position(queryset, obj) -> int:
    """The 0-based index of ``obj`` in the spec array it belongs to (the end when new)."""
    ids = list(queryset.order_by("position", "id").values_list("pk", flat=True))
    return ids.index(obj.pk) if obj is not None else len(ids)


# --- the detail page ------------------------------------------------------------------------


@login_required
@require_GET
def environment_detail(request, pk, tab: str = "overview"):
    if tab not in TABS:
        raise Http404("No such tab.")
    environment = environment_get_for_user(request.user, pk)
    context = _page_context(request, environment, tab=tab, tabs=TABS)
    context.update(TAB_CONTEXT[tab](request, environment))
    context["tab_template"] = f"environments/detail_{tab}.html"
    return render_page(request, DETAIL, context, partial="tabs")


def _overview(request, environment: Environment) -> dict:
    report = environment.latest_validation
    return {
        "counts": environment_part_counts(environment=environment),
        "report": report,
        "job": environment_active_validation_job(environment=environment),
        "duplicated_from": (
            Environment.objects.filter(
                pk=environment.duplicated_from_id, project_id=environment.project_id
            ).first()
            if environment.duplicated_from_id
            else None
        ),
        "duplicates": list(
            environment.duplicates.filter(project_id=environment.project_id).only("pk", "name")[:20]
        ),
        "synthesis": (environment.metadata or {}).get("synthesis"),
    }


class _KnownCount:
    """A queryset whose length is already known (saves the paginator a COUNT query)."""

    def __init__(self, queryset, count: int):
        self.queryset, self._count = queryset, count

    def count(self) -> int:
        return self._count

    def __getitem__(self, item):
        return self.queryset[item]


def _table(records, *, offset: int, anchor) -> dict:
    columns: list[str] = ["id"]
    for record in records:
        columns.extend(k for k in record.data if k not in columns)
    rows = [
        {
            "record": record,
            "index": offset + i,
            "anchor": anchor(offset + i),
            "cells": [record.data.get(column) for column in columns],
        }
        for i, record in enumerate(records)
    ]
    return {"columns": columns, "rows": rows}


def _services(request, environment: Environment) -> dict:
    collections = []
    for info in environment_collections(environment=environment):
        service, collection = info["service"], info["collection"]
        param = page_param(service, collection)
        records = collection_records(
            environment=environment, service=service, collection=collection
        )
        page = Paginator(_KnownCount(records, info["count"]), RECORDS_PER_PAGE).get_page(
            request.GET.get(param)
        )
        offset = (page.number - 1) * RECORDS_PER_PAGE

        def anchor(i, s=service, c=collection):
            return record_anchor(s, c, i)

        collections.append(
            {
                **info,
                "anchor": collection_anchor(service, collection),
                "page": page,
                "page_param": param,
                **_table(list(page.object_list), offset=offset, anchor=anchor),
            }
        )

    task_groups: dict = {}
    for record in environment_task_records(environment=environment):
        task = record.task
        group = task_groups.setdefault(task.pk, {"task": task, "collections": {}})
        group["collections"].setdefault((record.service, record.collection), []).append(record)
    tasks = []
    positions = dict(environment.tasks.values_list("pk", "position"))
    ordered = sorted(positions, key=lambda pk: (positions[pk], pk))
    task_index = {pk: i for i, pk in enumerate(ordered)}
    for pk, group in task_groups.items():
        i = task_index[pk]
        tables = []
        for (service, collection), records in group["collections"].items():

            def anchor(n, s=service, c=collection, t=i):
                return record_anchor(s, c, n, t)

            tables.append(
                {
                    "service": service,
                    "collection": collection,
                    "count": len(records),
                    "anchor": collection_anchor(service, collection, i),
                    "hidden": max(0, len(records) - TASK_RECORDS_SHOWN),
                    **_table(records[:TASK_RECORDS_SHOWN], offset=0, anchor=anchor),
                }
            )
        tasks.append({"task": group["task"], "index": i, "tables": tables})
    tasks.sort(key=lambda t: t["index"])
    return {"collections": collections, "task_records": tasks}


def _tools(request, environment: Environment) -> dict:
    return {"tools": list(environment.tools.order_by("position", "id"))}


def _tasks(request, environment: Environment) -> dict:
    return {"tasks": list(environment_tasks(environment=environment))}


def _validation(request, environment: Environment) -> dict:
    reports = list(environment_validation_reports(environment=environment)[:50])
    chosen = request.GET.get("report")
    report = None
    if chosen and is_id(chosen):
        report = ValidationReport.objects.filter(environment=environment, pk=chosen).first()
    if report is None:
        report = environment.latest_validation
    return {
        "reports": reports,
        "report": report,
        "report_problems": report.problems if report else [],
        "job": environment_active_validation_job(environment=environment),
    }


def _spec(request, environment: Environment) -> dict:
    try:
        document, problems = environment_spec(environment), []
    except SpecError as exc:
        document, problems = None, [p.to_dict() for p in exc.problems]
    return {
        "spec_text": json.dumps(document, indent=2, ensure_ascii=False) if document else "",
        "spec_problems": problems,
    }


TAB_CONTEXT = {
    "overview": _overview,
    "services": _services,
    "tools": _tools,
    "tasks": _tasks,
    "validation": _validation,
    # the runs app reads the runs (environments may not import it): the tab loads its fragment
    "runs": lambda request, environment: {},
    "spec": _spec,
}


@login_required
@require_GET
def validation_status(request, pk):
    """The live validation fragment of the overview: polls while a job runs, then the result."""
    environment = environment_get_for_user(request.user, pk)
    context = _page_context(
        request,
        environment,
        job=environment_active_validation_job(environment=environment),
        report=environment.latest_validation,
    )
    return render_page(request, "environments/detail_overview.html", context, partial="live")


@login_required
@require_GET
def validation_report_live(request, pk):
    """The live report of the validation tab: polls while a validation job runs, then shows
    the new report with its problems (so Validate leads straight to them)."""
    environment = environment_get_for_user(request.user, pk)
    context = _page_context(request, environment, **_validation(request, environment))
    return render_page(request, "environments/detail_validation.html", context, partial="report")


@login_required
@require_GET
def collection_json(request, pk, service, collection):
    """A whole collection as pretty JSON (the environment's, or one task's with ?task=)."""
    environment = environment_get_for_user(request.user, pk)
    if collection not in environment.collections.get(service, []):
        raise Http404("No such collection.")
    task = None
    if request.GET.get("task"):
        task = (
            environment.tasks.filter(pk=request.GET["task"]).first()
            if is_id(request.GET["task"])
            else None
        )
        if task is None:
            raise Http404("No such task.")
    records = collection_records(
        environment=environment, service=service, collection=collection, task=task
    )
    data = [record.data for record in records]
    context = _page_context(
        request,
        environment,
        service=service,
        collection=collection,
        task=task,
        count=len(data),
        text=json.dumps(data, indent=2, ensure_ascii=False),
    )
    return render_page(request, "environments/collection_json.html", context)


@login_required
@require_GET
def record_detail(request, pk):
    record = record_get_for_user(request.user, pk)
    environment = record.environment
    return render_page(
        request,
        "environments/record_detail.html",
        _page_context(request, environment, record=record, back=_record_back(record)),
    )


def _record_back(record) -> str:
    """The services tab, at the record's collection (its index may shift as records change)."""
    task_index = None
    if record.task_id:
        task_index = list(
            record.environment.tasks.order_by("position", "id").values_list("pk", flat=True)
        ).index(record.task_id)
    return tab_url(
        record.environment,
        "services",
        collection_anchor(record.service, record.collection, task_index),
    )


# --- environment ----------------------------------------------------------------------------


@login_required
@require_http_methods(["GET", "POST"])
def environment_edit(request, pk):
    environment = _editable(request.user, pk)
    form = EnvironmentEditForm(
        request.POST or None,
        initial={
            "name": environment.name,
            "domain": environment.domain,
            "description": environment.description,
        },
    )
    problems = []
    if request.method == "POST" and form.is_valid():
        saved, problems = _apply(
            form, lambda: environment_update(environment=environment, **form.cleaned_data)
        )
        if saved:
            return redirect_after_post(
                request, tab_url(saved, "overview"), _saved_message(saved, "Saved.")
            )
    context = _page_context(
        request,
        environment,
        form=form,
        problems=problems,
        heading="Edit environment",
        action=reverse("environments:edit", args=[environment.pk]),
        cancel=tab_url(environment, "overview"),
    )
    return _render_form(request, "environments/part_form.html", context)


# --- tasks ----------------------------------------------------------------------------------


def _task_anchor(task) -> str:
    position = list(
        task.environment.tasks.order_by("position", "id").values_list("pk", flat=True)
    ).index(task.pk)
    return f"task-{position}"


@login_required
@require_http_methods(["GET", "POST"])
def task_create_view(request, pk):
    environment = _editable(request.user, pk)
    form = TaskForm(request.POST or None, project=environment.project, initial=NEW_TASK_INITIAL)
    problems = []
    if request.method == "POST" and form.is_valid():
        task, problems = _apply(
            form,
            lambda: task_create_with_graders(
                environment=environment,
                data=form.service_data(),
                graders=form.cleaned_data["graders"],
            ),
        )
        if task:
            return redirect_after_post(
                request,
                tab_url(environment, "tasks", _task_anchor(task)),
                _saved_message(environment, f"Task “{task.key}” added."),
            )
    return _task_form(request, environment, form, problems, None)


@login_required
@require_http_methods(["GET", "POST"])
def task_edit_view(request, pk):
    task = task_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    environment = _editable(request.user, task.environment)
    form = TaskForm(request.POST or None, project=environment.project, task=task)
    problems = []
    if request.method == "POST" and form.is_valid():
        saved, problems = _apply(form, lambda: task_update(task=task, data=form.service_data()))
        if saved:
            return redirect_after_post(
                request,
                tab_url(environment, "tasks", _task_anchor(saved)),
                _saved_message(environment, f"Task “{saved.key}” saved."),
            )
    return _task_form(request, environment, form, problems, task)


def _task_form(request, environment, form, problems, task):
    base = f"/tasks/{_position(environment.tasks, task)}"
    fields = ("turns", "reference_solution", "scoring", "graders")
    problems = _place_problems(form, problems, {name: f"{base}/{name}" for name in fields})
    context = _page_context(
        request,
        environment,
        form=form,
        problems=problems,
        heading=f"Edit task “{task.key}”" if task else "New task",
        action=(
            reverse("environments:task_edit", args=[task.pk])
            if task
            else reverse("environments:task_create", args=[environment.pk])
        ),
        cancel=tab_url(environment, "tasks", _task_anchor(task) if task else ""),
        delete_url=reverse("environments:task_delete", args=[task.pk]) if task else None,
        delete_label="Delete task",
    )
    return _render_form(request, "environments/part_form.html", context)


@login_required
@require_POST
def task_delete_view(request, pk):
    task = task_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    environment = _editable(request.user, task.environment)
    try:
        task_delete(task=task)
    except ApplicationError as exc:
        messages.error(request, exc.message)
        return redirect_after_post(request, tab_url(environment, "tasks", _task_anchor(task)))
    return redirect_after_post(
        request,
        tab_url(environment, "tasks"),
        _saved_message(environment, f"Task “{task.key}” deleted."),
    )


# --- graders --------------------------------------------------------------------------------


def _grader_anchor(grader) -> str:
    position = list(grader.task.graders.order_by("position", "id").values_list("pk", flat=True))
    return f"{_task_anchor(grader.task)}-grader-{position.index(grader.pk)}"


def _grader_data(form) -> dict:
    return dict(form.cleaned_data)


@login_required
@require_http_methods(["GET", "POST"])
def grader_create_view(request, pk):
    task = task_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    environment = _editable(request.user, task.environment)
    form = GraderForm(
        request.POST or None,
        initial={
            "category": "completion",
            "weight": 1.0,
            "check_spec": {"kind": "state", "query": "", "op": ">=", "value": 1},
        },
    )
    problems = []
    if request.method == "POST" and form.is_valid():
        grader, problems = _apply(form, lambda: grader_create(task=task, data=_grader_data(form)))
        if grader:
            return redirect_after_post(
                request,
                tab_url(environment, "tasks", _grader_anchor(grader)),
                _saved_message(environment, f"Grader “{grader.key}” added."),
            )
    return _grader_form(request, environment, task, form, problems, None)


@login_required
@require_http_methods(["GET", "POST"])
def grader_edit_view(request, pk):
    grader = grader_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    task = grader.task
    environment = _editable(request.user, task.environment)
    form = GraderForm(request.POST or None, initial=GraderForm.initial_for(grader))
    problems = []
    if request.method == "POST" and form.is_valid():
        saved, problems = _apply(
            form, lambda: grader_update(grader=grader, data=_grader_data(form))
        )
        if saved:
            return redirect_after_post(
                request,
                tab_url(environment, "tasks", _grader_anchor(saved)),
                _saved_message(environment, f"Grader “{saved.key}” saved."),
            )
    return _grader_form(request, environment, task, form, problems, grader)


def _grader_form(request, environment, task, form, problems, grader):
    base = f"/tasks/{_position(environment.tasks, task)}/graders/{_position(task.graders, grader)}"
    problems = _place_problems(form, problems, {"check_spec": f"{base}/check"})
    context = _page_context(
        request,
        environment,
        form=form,
        problems=problems,
        heading=(
            f"Edit grader “{grader.key}” of task “{task.key}”"
            if grader
            else f"New grader for task “{task.key}”"
        ),
        action=(
            reverse("environments:grader_edit", args=[grader.pk])
            if grader
            else reverse("environments:grader_create", args=[task.pk])
        ),
        cancel=tab_url(
            environment, "tasks", _grader_anchor(grader) if grader else _task_anchor(task)
        ),
        delete_url=reverse("environments:grader_delete", args=[grader.pk]) if grader else None,
        delete_label="Delete grader",
        check_help=True,
    )
    return _render_form(request, "environments/part_form.html", context)


@login_required
@require_POST
def grader_delete_view(request, pk):
    grader = grader_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    environment = _editable(request.user, grader.task.environment)
    anchor = _task_anchor(grader.task)
    try:
        grader_delete(grader=grader)
    except ApplicationError as exc:
        messages.error(request, exc.message)
        return redirect_after_post(request, tab_url(environment, "tasks", anchor))
    return redirect_after_post(
        request,
        tab_url(environment, "tasks", anchor),
        _saved_message(environment, f"Grader “{grader.key}” deleted."),
    )


# --- tools ----------------------------------------------------------------------------------


def _tool_anchor(tool) -> str:
    position = list(
        tool.environment.tools.order_by("position", "id").values_list("pk", flat=True)
    ).index(tool.pk)
    return f"tool-{position}"


@login_required
@require_http_methods(["GET", "POST"])
def tool_create_view(request, pk):
    environment = _editable(request.user, pk)
    form = ToolForm(
        request.POST or None,
        initial={"parameters": {"type": "object", "properties": {}, "required": []}},
    )
    problems = []
    if request.method == "POST" and form.is_valid():
        tool, problems = _apply(
            form, lambda: tool_create(environment=environment, data=form.cleaned_data)
        )
        if tool:
            return redirect_after_post(
                request,
                tab_url(environment, "tools", _tool_anchor(tool)),
                _saved_message(environment, f"Tool “{tool.name}” added."),
            )
    return _tool_form(request, environment, form, problems, None)


@login_required
@require_http_methods(["GET", "POST"])
def tool_edit_view(request, pk):
    tool = tool_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    environment = _editable(request.user, tool.environment)
    form = ToolForm(request.POST or None, initial=ToolForm.initial_for(tool))
    problems = []
    if request.method == "POST" and form.is_valid():
        saved, problems = _apply(form, lambda: tool_update(tool=tool, data=form.cleaned_data))
        if saved:
            return redirect_after_post(
                request,
                tab_url(environment, "tools", _tool_anchor(saved)),
                _saved_message(environment, f"Tool “{saved.name}” saved."),
            )
    return _tool_form(request, environment, form, problems, tool)


def _tool_form(request, environment, form, problems, tool):
    base = f"/tools/{_position(environment.tools, tool)}"
    fields = ("parameters", "binding", "faults")
    problems = _place_problems(form, problems, {name: f"{base}/{name}" for name in fields})
    context = _page_context(
        request,
        environment,
        form=form,
        problems=problems,
        heading=f"Edit tool “{tool.name}”" if tool else "New tool",
        action=(
            reverse("environments:tool_edit", args=[tool.pk])
            if tool
            else reverse("environments:tool_create", args=[environment.pk])
        ),
        cancel=tab_url(environment, "tools", _tool_anchor(tool) if tool else ""),
        delete_url=reverse("environments:tool_delete", args=[tool.pk]) if tool else None,
        delete_label="Delete tool",
    )
    return _render_form(request, "environments/part_form.html", context)


@login_required
@require_POST
def tool_delete_view(request, pk):
    tool = tool_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    environment = _editable(request.user, tool.environment)
    try:
        tool_delete(tool=tool)
    except ApplicationError as exc:
        messages.error(request, exc.message)
        return redirect_after_post(request, tab_url(environment, "tools", _tool_anchor(tool)))
    return redirect_after_post(
        request,
        tab_url(environment, "tools"),
        _saved_message(environment, f"Tool “{tool.name}” deleted."),
    )


# --- records --------------------------------------------------------------------------------


@login_required
@require_http_methods(["GET", "POST"])
def record_create_view(request, pk):
    environment = _editable(request.user, pk)
    tasks = list(environment.tasks.order_by("position", "id"))
    preset = request.GET.get("target", "")
    form = RecordForm(
        request.POST or None,
        environment=environment,
        tasks=tasks,
        initial={"target": preset, "data": {"id": ""}},
    )
    problems = []
    if request.method == "POST" and form.is_valid():
        target = form.cleaned_data["target"]
        record, problems = _apply(
            form,
            lambda: record_create(
                environment=environment, data=form.cleaned_data["data"], **target
            ),
        )
        if record:
            return redirect_after_post(
                request,
                _record_back(record),
                _saved_message(environment, f"Record “{record.record_id}” added."),
            )
    context = _page_context(
        request,
        environment,
        form=form,
        problems=problems,
        heading="New record",
        action=reverse("environments:record_create", args=[environment.pk]),
        cancel=tab_url(environment, "services"),
    )
    return _render_form(request, "environments/part_form.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def record_edit_view(request, pk):
    record = record_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    environment = _editable(request.user, record.environment)
    form = RecordForm(request.POST or None, initial={"data": record.data})
    problems = []
    if request.method == "POST" and form.is_valid():
        saved, problems = _apply(
            form, lambda: record_update(record=record, data=form.cleaned_data["data"])
        )
        if saved:
            return redirect_after_post(
                request,
                _record_back(saved),
                _saved_message(environment, f"Record “{saved.record_id}” saved."),
            )
    where = f"{record.service}.{record.collection}"
    if record.task_id:
        where += f" (task {record.task.key})"
    context = _page_context(
        request,
        environment,
        form=form,
        problems=problems,
        heading=f"Edit record “{record.record_id}” in {where}",
        action=reverse("environments:record_edit", args=[record.pk]),
        cancel=reverse("environments:record_detail", args=[record.pk]),
        delete_url=reverse("environments:record_delete", args=[record.pk]),
        delete_label="Delete record",
    )
    return _render_form(request, "environments/part_form.html", context)


@login_required
@require_POST
def record_delete_view(request, pk):
    record = record_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    environment = _editable(request.user, record.environment)
    back = _record_back(record)
    try:
        record_delete(record=record)
    except ApplicationError as exc:
        messages.error(request, exc.message)
        return redirect_after_post(request, back)
    return redirect_after_post(
        request, back, _saved_message(environment, f"Record “{record.record_id}” deleted.")
    )


# --- the whole-spec editor ------------------------------------------------------------------


def _located(problems: list[dict], text: str) -> list[dict]:
    """Each problem with the line of the text where its pointer's value starts, and an
    excerpt of the lines around it."""
    lines = value_lines(text)
    source = text.splitlines()
    located = []
    for problem in problems:
        line = nearest_line(lines, problem.get("pointer", ""))
        excerpt = []
        if line:
            for number in range(max(1, line - 2), min(len(source), line + 2) + 1):
                excerpt.append(
                    {"number": number, "text": source[number - 1], "here": number == line}
                )
        located.append({**problem, "line": line, "excerpt": excerpt})
    located.sort(key=lambda p: (p["line"] or 0, p["severity"] != "error"))
    return located


def _static_problems(document) -> list[dict]:
    return [p.to_dict() for p in validate_spec(document, dynamic=False).problems]


@login_required
@require_http_methods(["GET", "POST"])
def spec_edit(request, pk):
    """Edit the canonical document as text. A schema-valid document is saved even when the
    static checks still find problems: the environment stays a draft (it cannot be approved
    until it validates), and the problems are listed beside their lines to fix next."""
    environment = _editable(request.user, pk)
    syntax = None
    refused = False
    if request.method == "POST":
        form = SpecEditForm(request.POST)
        text = request.POST.get("spec", "")
        problems = []
        if form.is_valid():
            try:
                document = parse_json_text(text)
            except JSONTextError as exc:
                syntax = exc
            else:
                try:
                    spec_canonical(document)
                except ApplicationError as exc:
                    refused, problems = True, exc.extra.get("problems", [])
                    form.add_error(None, exc.message + " Nothing was saved.")
                else:
                    saved, problems = _apply(
                        form,
                        lambda: environment_replace_spec(environment=environment, spec=document),
                    )
                    refused = saved is None
                    if saved:
                        static = _static_problems(document)
                        message = _saved_message(saved, "Spec saved.")
                        if static:
                            found = count_of(len(static), "problem")
                            message += f" The static checks found {found} below."
                            url = reverse("environments:edit_spec", args=[saved.pk])
                        else:
                            url = tab_url(saved, "overview")
                        return redirect_after_post(request, url, message)
    else:
        document = environment_spec(environment)
        text = json.dumps(document, indent=2, ensure_ascii=False)
        form = SpecEditForm(initial={"spec": text})
        problems = _static_problems(document)
    located = _located(problems, text) if not syntax else []
    marks = [{k: p[k] for k in ("line", "severity", "message")} for p in located if p["line"]]
    if syntax:
        marks = [
            {
                "line": syntax.line,
                "column": syntax.column,
                "severity": "error",
                "message": syntax.message,
            }
        ]
    form.fields["spec"].widget.attrs["data-problems"] = json.dumps(marks)
    context = _page_context(
        request,
        environment,
        form=form,
        syntax=syntax,
        refused=refused,
        problems=located,
    )
    return _render_form(request, "environments/spec_edit.html", context)
