"""The edits of an environment's parts: its settings, tools, records and whole spec (a
task's and its graders' forms are in ``task_editing.py``, the page itself in ``detail.py``).

Each view: resolve access (404 other projects, 403 too-low roles), bind a form, call a
service, then redirect back to the tab and anchor of what changed, or re-render the form
(status 200, only its partial for htmx) with the errors and the spec problems.
"""

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from apps.accounts.access import check_project_role
from apps.accounts.models import Role
from apps.core.exceptions import ApplicationError
from apps.core.http import redirect_after_post, render_page
from apps.core.text import count_of
from apps.environments.access import (
    environment_get_for_user,
    record_get_for_user,
    tool_get_for_user,
)
from apps.environments.forms import (
    EnvironmentEditForm,
    RecordForm,
    SpecEditForm,
    ToolForm,
)
from apps.environments.jsontext import (
    JSONTextError,
    locate_in_fields,
    nearest_line,
    parse_json_text,
    value_lines,
)
from apps.environments.models import Environment
from apps.environments.services import (
    environment_replace_spec,
    environment_update,
    record_create,
    record_delete,
    record_update,
    spec_canonical,
    tool_create,
    tool_delete,
    tool_update,
)
from apps.environments.specs import environment_spec
from apps.environments.views.detail import page_context, record_back, tab_url
from coworkenv_engine.validation import validate_spec

# --- helpers --------------------------------------------------------------------------------


def editable(user, environment_or_pk) -> Environment:
    """The environment, for an author, if it may be edited (archived ones are read-only)."""
    if isinstance(environment_or_pk, Environment):
        environment = environment_or_pk
        check_project_role(user, environment.project, Role.AUTHOR)
    else:
        environment = environment_get_for_user(user, environment_or_pk, min_role=Role.AUTHOR)
    if not environment.is_editable:
        raise PermissionDenied("This environment is archived: restore it before editing.")
    return environment


def saved_message(environment: Environment, what: str) -> str:
    environment.refresh_from_db(fields=["revision", "status"])
    return f"{what} Edited: revision {environment.revision}, needs validation."


def render_form(request, template: str, context: dict, *, status: int = 200):
    return render_page(request, template, context, partial="form", status=status)


def apply_form(form, action):
    """Run a service; turn its ApplicationError into a form error. Returns (result, problems)."""
    try:
        return action(), []
    except ApplicationError as exc:
        form.add_error(None, exc.message)
        return None, exc.extra.get("problems", [])


def place_problems(form, problems: list[dict], prefixes: dict[str, str]) -> list[dict]:
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


# --- the detail page ------------------------------------------------------------------------


# --- environment ----------------------------------------------------------------------------


def part_position(queryset, obj) -> int:
    """The 0-based index of ``obj`` in the spec array it belongs to (the end when new)."""
    ids = list(queryset.order_by("position", "id").values_list("pk", flat=True))
    return ids.index(obj.pk) if obj is not None else len(ids)


@login_required
@require_http_methods(["GET", "POST"])
def environment_edit(request, pk):
    environment = editable(request.user, pk)
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
        saved, problems = apply_form(
            form, lambda: environment_update(environment=environment, **form.cleaned_data)
        )
        if saved:
            return redirect_after_post(
                request, tab_url(saved, "overview"), saved_message(saved, "Saved.")
            )
    context = page_context(
        request,
        environment,
        form=form,
        problems=problems,
        heading="Edit environment",
        action=reverse("environments:edit", args=[environment.pk]),
        cancel=tab_url(environment, "overview"),
    )
    return render_form(request, "environments/part_form.html", context)


# --- tasks ----------------------------------------------------------------------------------


# --- graders --------------------------------------------------------------------------------


# --- tools ----------------------------------------------------------------------------------


def _tool_anchor(tool) -> str:
    position = list(
        tool.environment.tools.order_by("position", "id").values_list("pk", flat=True)
    ).index(tool.pk)
    return f"tool-{position}"


@login_required
@require_http_methods(["GET", "POST"])
def tool_create_view(request, pk):
    environment = editable(request.user, pk)
    form = ToolForm(
        request.POST or None,
        initial={"parameters": {"type": "object", "properties": {}, "required": []}},
    )
    problems = []
    if request.method == "POST" and form.is_valid():
        tool, problems = apply_form(
            form, lambda: tool_create(environment=environment, data=form.cleaned_data)
        )
        if tool:
            return redirect_after_post(
                request,
                tab_url(environment, "tools", _tool_anchor(tool)),
                saved_message(environment, f"Tool “{tool.name}” added."),
            )
    return _tool_form(request, environment, form, problems, None)


@login_required
@require_http_methods(["GET", "POST"])
def tool_edit_view(request, pk):
    tool = tool_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    environment = editable(request.user, tool.environment)
    form = ToolForm(request.POST or None, initial=ToolForm.initial_for(tool))
    problems = []
    if request.method == "POST" and form.is_valid():
        saved, problems = apply_form(form, lambda: tool_update(tool=tool, data=form.cleaned_data))
        if saved:
            return redirect_after_post(
                request,
                tab_url(environment, "tools", _tool_anchor(saved)),
                saved_message(environment, f"Tool “{saved.name}” saved."),
            )
    return _tool_form(request, environment, form, problems, tool)


def _tool_form(request, environment, form, problems, tool):
    base = f"/tools/{part_position(environment.tools, tool)}"
    fields = ("parameters", "binding", "faults")
    problems = place_problems(form, problems, {name: f"{base}/{name}" for name in fields})
    context = page_context(
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
    return render_form(request, "environments/part_form.html", context)


@login_required
@require_POST
def tool_delete_view(request, pk):
    tool = tool_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    environment = editable(request.user, tool.environment)
    try:
        tool_delete(tool=tool)
    except ApplicationError as exc:
        messages.error(request, exc.message)
        return redirect_after_post(request, tab_url(environment, "tools", _tool_anchor(tool)))
    return redirect_after_post(
        request,
        tab_url(environment, "tools"),
        saved_message(environment, f"Tool “{tool.name}” deleted."),
    )


# --- records --------------------------------------------------------------------------------


@login_required
@require_http_methods(["GET", "POST"])
def record_create_view(request, pk):
    environment = editable(request.user, pk)
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
        record, problems = apply_form(
            form,
            lambda: record_create(
                environment=environment, data=form.cleaned_data["data"], **target
            ),
        )
        if record:
            return redirect_after_post(
                request,
                record_back(record),
                saved_message(environment, f"Record “{record.record_id}” added."),
            )
    context = page_context(
        request,
        environment,
        form=form,
        problems=problems,
        heading="New record",
        action=reverse("environments:record_create", args=[environment.pk]),
        cancel=tab_url(environment, "services"),
    )
    return render_form(request, "environments/part_form.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def record_edit_view(request, pk):
    record = record_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    environment = editable(request.user, record.environment)
    form = RecordForm(request.POST or None, initial={"data": record.data})
    problems = []
    if request.method == "POST" and form.is_valid():
        saved, problems = apply_form(
            form, lambda: record_update(record=record, data=form.cleaned_data["data"])
        )
        if saved:
            return redirect_after_post(
                request,
                record_back(saved),
                saved_message(environment, f"Record “{saved.record_id}” saved."),
            )
    where = f"{record.service}.{record.collection}"
    if record.task_id:
        where += f" (task {record.task.key})"
    context = page_context(
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
    return render_form(request, "environments/part_form.html", context)


@login_required
@require_POST
def record_delete_view(request, pk):
    record = record_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    environment = editable(request.user, record.environment)
    back = record_back(record)
    try:
        record_delete(record=record)
    except ApplicationError as exc:
        messages.error(request, exc.message)
        return redirect_after_post(request, back)
    return redirect_after_post(
        request, back, saved_message(environment, f"Record “{record.record_id}” deleted.")
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
    environment = editable(request.user, pk)
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
                    saved, problems = apply_form(
                        form,
                        lambda: environment_replace_spec(environment=environment, spec=document),
                    )
                    refused = saved is None
                    if saved:
                        static = _static_problems(document)
                        message = saved_message(saved, "Spec saved.")
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
    context = page_context(
        request,
        environment,
        form=form,
        syntax=syntax,
        refused=refused,
        problems=located,
    )
    return render_form(request, "environments/spec_edit.html", context)
