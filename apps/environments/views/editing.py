"""The edits of an environment's parts: its settings, tools, records and whole spec (a
task's and its graders' forms are in ``task_editing.py``, the page itself in ``detail.py``,
the flow all part forms share in ``part_forms.py``)."""

import json

from django.contrib.auth.decorators import login_required
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from apps.accounts.models import Role
from apps.core.exceptions import ApplicationError
from apps.core.http import redirect_after_post
from apps.core.text import count_of
from apps.environments.access import record_get_for_user, tool_get_for_user
from apps.environments.forms import (
    EnvironmentEditForm,
    RecordForm,
    SpecEditForm,
    ToolForm,
)
from apps.environments.jsontext import (
    JSONTextError,
    nearest_line,
    parse_json_text,
    value_lines,
)
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
from apps.environments.views.part_forms import (
    apply_form,
    delete_and_go_back,
    editable,
    part_form_links,
    part_position,
    place_problems,
    render_form,
    render_part_form,
    save_or_rerender,
    saved_message,
)
from coworkenv_engine.validation import validate_spec

# --- environment ----------------------------------------------------------------------------


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
    return save_or_rerender(
        request,
        environment,
        form,
        lambda: environment_update(environment=environment, **form.cleaned_data),
        back=lambda saved: tab_url(saved, "overview"),
        message=lambda saved: "Saved.",
        rerender=lambda problems: render_part_form(
            request,
            environment,
            form,
            problems,
            heading="Edit environment",
            action=reverse("environments:edit", args=[environment.pk]),
            cancel=tab_url(environment, "overview"),
        ),
    )


# --- tools ----------------------------------------------------------------------------------


def _tool_anchor(tool) -> str:
    return f"tool-{part_position(tool.environment.tools, tool)}"


@login_required
@require_http_methods(["GET", "POST"])
def tool_create_view(request, pk):
    environment = editable(request.user, pk)
    form = ToolForm(
        request.POST or None,
        initial={"parameters": {"type": "object", "properties": {}, "required": []}},
    )
    return save_or_rerender(
        request,
        environment,
        form,
        lambda: tool_create(environment=environment, data=form.cleaned_data),
        back=lambda tool: tab_url(environment, "tools", _tool_anchor(tool)),
        message=lambda tool: f"Tool “{tool.name}” added.",
        rerender=lambda problems: _tool_form(request, environment, form, problems, None),
    )


@login_required
@require_http_methods(["GET", "POST"])
def tool_edit_view(request, pk):
    tool = tool_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    environment = editable(request.user, tool.environment)
    form = ToolForm(request.POST or None, initial=ToolForm.initial_for(tool))
    return save_or_rerender(
        request,
        environment,
        form,
        lambda: tool_update(tool=tool, data=form.cleaned_data),
        back=lambda saved: tab_url(environment, "tools", _tool_anchor(saved)),
        message=lambda saved: f"Tool “{saved.name}” saved.",
        rerender=lambda problems: _tool_form(request, environment, form, problems, tool),
    )


def _tool_form(request, environment, form, problems, tool):
    base = f"/tools/{part_position(environment.tools, tool)}"
    fields = ("parameters", "binding", "faults")
    return render_part_form(
        request,
        environment,
        form,
        place_problems(form, problems, {name: f"{base}/{name}" for name in fields}),
        heading=f"Edit tool “{tool.name}”" if tool else "New tool",
        cancel=tab_url(environment, "tools", _tool_anchor(tool) if tool else ""),
        **part_form_links("tool", tool, parent=environment),
    )


@login_required
@require_POST
def tool_delete_view(request, pk):
    tool = tool_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    environment = editable(request.user, tool.environment)
    return delete_and_go_back(
        request,
        environment,
        lambda: tool_delete(tool=tool),
        back=tab_url(environment, "tools"),
        message=f"Tool “{tool.name}” deleted.",
        back_if_refused=tab_url(environment, "tools", _tool_anchor(tool)),
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
    return save_or_rerender(
        request,
        environment,
        form,
        lambda: record_create(
            environment=environment,
            data=form.cleaned_data["data"],
            **form.cleaned_data["target"],
        ),
        back=record_back,
        message=lambda record: f"Record “{record.record_id}” added.",
        rerender=lambda problems: render_part_form(
            request,
            environment,
            form,
            problems,
            heading="New record",
            action=reverse("environments:record_create", args=[environment.pk]),
            cancel=tab_url(environment, "services"),
        ),
    )


@login_required
@require_http_methods(["GET", "POST"])
def record_edit_view(request, pk):
    record = record_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    environment = editable(request.user, record.environment)
    form = RecordForm(request.POST or None, initial={"data": record.data})
    return save_or_rerender(
        request,
        environment,
        form,
        lambda: record_update(record=record, data=form.cleaned_data["data"]),
        back=record_back,
        message=lambda saved: f"Record “{saved.record_id}” saved.",
        rerender=lambda problems: _record_edit_form(request, environment, form, problems, record),
    )


def _record_edit_form(request, environment, form, problems, record):
    where = f"{record.service}.{record.collection}"
    if record.task_id:
        where += f" (task {record.task.key})"
    return render_part_form(
        request,
        environment,
        form,
        problems,
        heading=f"Edit record “{record.record_id}” in {where}",
        action=reverse("environments:record_edit", args=[record.pk]),
        cancel=reverse("environments:record_detail", args=[record.pk]),
        delete_url=reverse("environments:record_delete", args=[record.pk]),
        delete_label="Delete record",
    )


@login_required
@require_POST
def record_delete_view(request, pk):
    record = record_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    environment = editable(request.user, record.environment)
    return delete_and_go_back(
        request,
        environment,
        lambda: record_delete(record=record),
        back=record_back(record),
        message=f"Record “{record.record_id}” deleted.",
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
