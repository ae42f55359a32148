"""A task's and its graders' create, edit and delete forms (the environment's Tasks tab)."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from apps.accounts.models import Role
from apps.core.exceptions import ApplicationError
from apps.core.http import redirect_after_post
from apps.environments.access import (
    grader_get_for_user,
    task_get_for_user,
)
from apps.environments.forms import (
    NEW_TASK_INITIAL,
    GraderForm,
    TaskForm,
)
from apps.environments.services import (
    grader_create,
    grader_delete,
    grader_update,
    task_create_with_graders,
    task_delete,
    task_update,
)
from apps.environments.views.detail import page_context, tab_url
from apps.environments.views.editing import (
    apply_form,
    editable,
    part_position,
    place_problems,
    render_form,
    saved_message,
)


def _task_anchor(task) -> str:
    position = list(
        task.environment.tasks.order_by("position", "id").values_list("pk", flat=True)
    ).index(task.pk)
    return f"task-{position}"


@login_required
@require_http_methods(["GET", "POST"])
def task_create_view(request, pk):
    environment = editable(request.user, pk)
    form = TaskForm(request.POST or None, project=environment.project, initial=NEW_TASK_INITIAL)
    problems = []
    if request.method == "POST" and form.is_valid():
        task, problems = apply_form(
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
                saved_message(environment, f"Task “{task.key}” added."),
            )
    return _task_form(request, environment, form, problems, None)


@login_required
@require_http_methods(["GET", "POST"])
def task_edit_view(request, pk):
    task = task_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    environment = editable(request.user, task.environment)
    form = TaskForm(request.POST or None, project=environment.project, task=task)
    problems = []
    if request.method == "POST" and form.is_valid():
        saved, problems = apply_form(form, lambda: task_update(task=task, data=form.service_data()))
        if saved:
            return redirect_after_post(
                request,
                tab_url(environment, "tasks", _task_anchor(saved)),
                saved_message(environment, f"Task “{saved.key}” saved."),
            )
    return _task_form(request, environment, form, problems, task)


def _task_form(request, environment, form, problems, task):
    base = f"/tasks/{part_position(environment.tasks, task)}"
    fields = ("turns", "reference_solution", "scoring", "graders")
    problems = place_problems(form, problems, {name: f"{base}/{name}" for name in fields})
    context = page_context(
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
    return render_form(request, "environments/part_form.html", context)


@login_required
@require_POST
def task_delete_view(request, pk):
    task = task_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    environment = editable(request.user, task.environment)
    try:
        task_delete(task=task)
    except ApplicationError as exc:
        messages.error(request, exc.message)
        return redirect_after_post(request, tab_url(environment, "tasks", _task_anchor(task)))
    return redirect_after_post(
        request,
        tab_url(environment, "tasks"),
        saved_message(environment, f"Task “{task.key}” deleted."),
    )


def _grader_anchor(grader) -> str:
    position = list(grader.task.graders.order_by("position", "id").values_list("pk", flat=True))
    return f"{_task_anchor(grader.task)}-grader-{position.index(grader.pk)}"


def _grader_data(form) -> dict:
    return dict(form.cleaned_data)


@login_required
@require_http_methods(["GET", "POST"])
def grader_create_view(request, pk):
    task = task_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    environment = editable(request.user, task.environment)
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
        grader, problems = apply_form(
            form, lambda: grader_create(task=task, data=_grader_data(form))
        )
        if grader:
            return redirect_after_post(
                request,
                tab_url(environment, "tasks", _grader_anchor(grader)),
                saved_message(environment, f"Grader “{grader.key}” added."),
            )
    return _grader_form(request, environment, task, form, problems, None)


@login_required
@require_http_methods(["GET", "POST"])
def grader_edit_view(request, pk):
    grader = grader_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    task = grader.task
    environment = editable(request.user, task.environment)
    form = GraderForm(request.POST or None, initial=GraderForm.initial_for(grader))
    problems = []
    if request.method == "POST" and form.is_valid():
        saved, problems = apply_form(
            form, lambda: grader_update(grader=grader, data=_grader_data(form))
        )
        if saved:
            return redirect_after_post(
                request,
                tab_url(environment, "tasks", _grader_anchor(saved)),
                saved_message(environment, f"Grader “{saved.key}” saved."),
            )
    return _grader_form(request, environment, task, form, problems, grader)


def _grader_form(request, environment, task, form, problems, grader):
    task_at = part_position(environment.tasks, task)
    base = f"/tasks/{task_at}/graders/{part_position(task.graders, grader)}"
    problems = place_problems(form, problems, {"check_spec": f"{base}/check"})
    context = page_context(
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
    return render_form(request, "environments/part_form.html", context)


@login_required
@require_POST
def grader_delete_view(request, pk):
    grader = grader_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    environment = editable(request.user, grader.task.environment)
    anchor = _task_anchor(grader.task)
    try:
        grader_delete(grader=grader)
    except ApplicationError as exc:
        messages.error(request, exc.message)
        return redirect_after_post(request, tab_url(environment, "tasks", anchor))
    return redirect_after_post(
        request,
        tab_url(environment, "tasks", anchor),
        saved_message(environment, f"Grader “{grader.key}” deleted."),
    )
