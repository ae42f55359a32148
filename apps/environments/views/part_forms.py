"""The flow every editor of an environment's parts shares (settings, tools, records in
``editing.py``, tasks and graders in ``task_editing.py``).

Each view: resolve access (404 other projects, 403 too-low roles), bind a form, call a
service, then redirect back to the tab and anchor of what changed, or re-render the form
(status 200, only its partial for htmx) with the errors and the spec problems.
"""

import json

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.urls import reverse

from apps.accounts.access import check_project_role
from apps.accounts.models import Role
from apps.core.exceptions import ApplicationError
from apps.core.http import redirect_after_post, render_page
from apps.environments.access import environment_get_for_user
from apps.environments.jsontext import locate_in_fields
from apps.environments.models import Environment
from apps.environments.views.detail import page_context


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


def part_position(queryset, obj) -> int:
    """The 0-based index of ``obj`` in the spec array it belongs to (the end when new)."""
    ids = list(queryset.order_by("position", "id").values_list("pk", flat=True))
    return ids.index(obj.pk) if obj is not None else len(ids)


def save_or_rerender(request, environment, form, save, *, back, message, rerender):
    """A part form's GET and POST. A valid POST runs ``save`` (the service call) and, when
    it saves, redirects to ``back(saved)`` with ``message(saved)`` and the new revision;
    anything else (a GET, an invalid form, a refused save) is ``rerender(problems)``."""
    problems = []
    if request.method == "POST" and form.is_valid():
        saved, problems = apply_form(form, save)
        if saved:
            return redirect_after_post(
                request, back(saved), saved_message(environment, message(saved))
            )
    return rerender(problems)


def delete_and_go_back(request, environment, delete, *, back, message, back_if_refused=None):
    """A part's delete (POST only): run ``delete`` (the service call) and go back to
    ``back`` with ``message`` and the new revision; if the service refuses, show why and go
    back to ``back_if_refused`` (where the part still is), or else to ``back``."""
    try:
        delete()
    except ApplicationError as exc:
        messages.error(request, exc.message)
        return redirect_after_post(request, back_if_refused or back)
    return redirect_after_post(request, back, saved_message(environment, message))


def render_part_form(request, environment, form, problems, **context):
    """The editor page of one part (``part_form.html``) with the form, its problems and
    ``context`` (heading, action, cancel, and a delete button where there is one)."""
    context = page_context(request, environment, form=form, problems=problems, **context)
    return render_form(request, "environments/part_form.html", context)


def part_form_links(kind: str, part, *, parent) -> dict:
    """A task's, grader's or tool's form action and delete button: the part's
    ``environments:<kind>_edit`` and ``_delete`` urls, or, for a new one, ``_create`` under
    ``parent`` and no delete button."""
    if part is None:
        action, delete_url = reverse(f"environments:{kind}_create", args=[parent.pk]), None
    else:
        action = reverse(f"environments:{kind}_edit", args=[part.pk])
        delete_url = reverse(f"environments:{kind}_delete", args=[part.pk])
    return {"action": action, "delete_url": delete_url, "delete_label": f"Delete {kind}"}
