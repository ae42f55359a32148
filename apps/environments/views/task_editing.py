"""A task's and its graders' create, edit and delete forms (the environment's Tasks tab)."""

from django.contrib.auth.decorators import login_required
from django.views.decorators.http import require_http_methods, require_POST

from apps.accounts.models import Role
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
from apps.environments.views.detail import tab_url
from apps.environments.views.part_forms import (
    delete_and_go_back,
    editable,
    part_form_links,
    part_position,
    place_problems,
    render_part_form,
    save_or_rerender,
)


def _task_anchor(task) -> str:
    return f"task-{part_position(task.environment.tasks, task)}"


@login_required
@require_http_methods(["GET", "POST"])
def task_create_view(request, pk):
    environment = editable(request.user, pk)
    form = TaskForm(request.POST or None, project=environment.project, initial=NEW_TASK_INITIAL)
    return save_or_rerender(
        request,
        environment,
        form,
        lambda: task_create_with_graders(
            environment=environment,
            data=form.service_data(),
            graders=form.cleaned_data["graders"],
        ),
        back=lambda task: tab_url(environment, "tasks", _task_anchor(task)),
        message=lambda task: f"Task “{task.key}” added.",
        rerender=lambda problems: _task_form(request, environment, form, problems, None),
    )


@login_required
@require_http_methods(["GET", "POST"])
def task_edit_view(request, pk):
    task = task_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    environment = editable(request.user, task.environment)
    form = TaskForm(request.POST or None, project=environment.project, task=task)
    return save_or_rerender(
        request,
        environment,
        form,
        lambda: task_update(task=task, data=form.service_data()),
        back=lambda saved: tab_url(environment, "tasks", _task_anchor(saved)),
        message=lambda saved: f"Task “{saved.key}” saved.",
        rerender=lambda problems: _task_form(request, environment, form, problems, task),
    )


def _task_form(request, environment, form, problems, task):
    base = f"/tasks/{part_position(environment.tasks, task)}"
    fields = ("turns", "reference_solution", "scoring", "graders")
    return render_part_form(
        request,
        environment,
        form,
        place_problems(form, problems, {name: f"{base}/{name}" for name in fields}),
        heading=f"Edit task “{task.key}”" if task else "New task",
        cancel=tab_url(environment, "tasks", _task_anchor(task) if task else ""),
        **part_form_links("task", task, parent=environment),
    )


@login_required
@require_POST
def task_delete_view(request, pk):
    task = task_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    environment = editable(request.user, task.environment)
    return delete_and_go_back(
        request,
        environment,
        lambda: task_delete(task=task),
        back=tab_url(environment, "tasks"),
        message=f"Task “{task.key}” deleted.",
        back_if_refused=tab_url(environment, "tasks", _task_anchor(task)),
    )


def _grader_anchor(grader) -> str:
    return f"{_task_anchor(grader.task)}-grader-{part_position(grader.task.graders, grader)}"


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
    return save_or_rerender(
        request,
        environment,
        form,
        lambda: grader_create(task=task, data=_grader_data(form)),
        back=lambda grader: tab_url(environment, "tasks", _grader_anchor(grader)),
        message=lambda grader: f"Grader “{grader.key}” added.",
        rerender=lambda problems: _grader_form(request, environment, task, form, problems, None),
    )


@login_required
@require_http_methods(["GET", "POST"])
def grader_edit_view(request, pk):
    grader = grader_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    task = grader.task
    environment = editable(request.user, task.environment)
    form = GraderForm(request.POST or None, initial=GraderForm.initial_for(grader))
    return save_or_rerender(
        request,
        environment,
        form,
        lambda: grader_update(grader=grader, data=_grader_data(form)),
        back=lambda saved: tab_url(environment, "tasks", _grader_anchor(saved)),
        message=lambda saved: f"Grader “{saved.key}” saved.",
        rerender=lambda problems: _grader_form(request, environment, task, form, problems, grader),
    )


def _grader_form(request, environment, task, form, problems, grader):
    task_at = part_position(environment.tasks, task)
    base = f"/tasks/{task_at}/graders/{part_position(task.graders, grader)}"
    return render_part_form(
        request,
        environment,
        form,
        place_problems(form, problems, {"check_spec": f"{base}/check"}),
        heading=(
            f"Edit grader “{grader.key}” of task “{task.key}”"
            if grader
            else f"New grader for task “{task.key}”"
        ),
        cancel=tab_url(
            environment, "tasks", _grader_anchor(grader) if grader else _task_anchor(task)
        ),
        **part_form_links("grader", grader, parent=task),
        check_help=True,
    )


@login_required
@require_POST
def grader_delete_view(request, pk):
    grader = grader_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    environment = editable(request.user, grader.task.environment)
    back = tab_url(environment, "tasks", _task_anchor(grader.task))
    return delete_and_go_back(
        request,
        environment,
        lambda: grader_delete(grader=grader),
        back=back,
        message=f"Grader “{grader.key}” deleted.",
    )
