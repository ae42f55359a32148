"""Pages: the project's model servers (start one from a path), a server's status, log and
Stop, and the Serve button of a trained model's page (a POST to ``start``)."""

from django.contrib.auth.decorators import login_required
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from apps.accounts.access import check_project_role, project_get_for_user
from apps.accounts.models import Role
from apps.core.exceptions import ApplicationError
from apps.core.http import (
    form_add_service_error,
    redirect_after_post,
    refresh_when_ended,
    render_page,
)
from apps.serving.access import model_server_get_for_user
from apps.serving.forms import StartForm
from apps.serving.selectors import model_server_list
from apps.serving.services import model_server_start, model_server_stop
from apps.training.models import TrainedModel


def _list_context(request, project, form=None) -> dict:
    return {
        "project": project,
        "membership": check_project_role(request.user, project),
        "servers": model_server_list(project=project)[:100],
        "form": form or StartForm(),
    }


@login_required
@require_GET
def server_list_view(request, slug):
    project = project_get_for_user(request.user, slug)
    return render_page(request, "serving/list.html", _list_context(request, project))


@login_required
@require_POST
def server_start_view(request, slug):
    project = project_get_for_user(request.user, slug, min_role=Role.AUTHOR)
    form = StartForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        trained = None
        if data["trained_model"] is not None:
            trained = TrainedModel.objects.filter(pk=data["trained_model"], project=project)
            trained = trained.first()
            if trained is None:
                form.add_error(None, "No such trained model in this project.")
        if not form.errors:
            try:
                server = model_server_start(
                    project=project,
                    user=request.user,
                    trained_model=trained,
                    model_path="" if trained else data["model_path"],
                    idle_timeout_s=data["idle_timeout_s"],
                )
            except ApplicationError as exc:
                form_add_service_error(form, exc)
            else:
                url = reverse("serving:detail", args=[server.pk])
                return redirect_after_post(request, url, "Queued the model server.")
    context = _list_context(request, project, form)
    return render_page(request, "serving/list.html", context, partial="start")


@login_required
@require_GET
def server_detail_view(request, pk):
    server = model_server_get_for_user(request.user, pk)
    context = {
        "project": server.project,
        "membership": check_project_role(request.user, server.project),
        "server": server,
        "job": server.job,
    }
    response = render_page(request, "serving/detail.html", context, partial="live")
    return refresh_when_ended(request, response, server.job, "server-live")


@login_required
@require_POST
def server_stop_view(request, pk):
    server = model_server_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    url = reverse("serving:detail", args=[server.pk])
    try:
        model_server_stop(server=server)
    except ApplicationError as exc:
        return redirect_after_post(request, url, exc.message)
    return redirect_after_post(request, url, "Stop requested.")
