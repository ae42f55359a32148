"""The environment server page: where a project's OpenEnv-protocol server is reached, how a
trainer connects, and — when this process serves it — how many sessions it holds."""

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.views.decorators.http import require_GET

from apps.accounts.access import check_project_role, project_get_for_user
from apps.core.http import render_page
from apps.environments.models import EnvironmentStatus
from apps.environments.selectors import environment_status_counts
from apps.environments.serving import PREFIX, envserver_status

TOKEN = "<token>"
COMMAND_PORT = 8001


@login_required
@require_GET
def envserver_view(request, slug):
    """Any member may read it. The htmx variant is the status panel (polled while live)."""
    project = project_get_for_user(request.user, slug)
    membership = check_project_role(request.user, project)
    base = request.build_absolute_uri(PREFIX + project.slug)
    ws_base = "ws" + base.removeprefix("http")  # http -> ws, https -> wss
    counts = environment_status_counts(project=project)
    command_base = f"http://127.0.0.1:{COMMAND_PORT}"
    context = {
        "project": project,
        "membership": membership,
        "status": envserver_status(project=project),
        "served_count": counts[EnvironmentStatus.VALID] + counts[EnvironmentStatus.APPROVED],
        "http_url": f"{base}/t/{TOKEN}",
        "ws_url": f"{ws_base}/t/{TOKEN}/ws",
        "tasks_url": f"{base}/tasks",
        "command": f"python manage.py envserver --project {project.slug} --port {COMMAND_PORT}",
        "command_http_url": f"{command_base}/t/{TOKEN}",
        "command_ws_url": f"ws://127.0.0.1:{COMMAND_PORT}/t/{TOKEN}/ws",
        "limits": {
            "max_sessions": settings.ENVSERVER_MAX_SESSIONS,
            "idle_timeout": settings.ENVSERVER_IDLE_TIMEOUT_S,
            "max_lifetime": settings.ENVSERVER_MAX_LIFETIME_S,
            "refresh": settings.ENVSERVER_REFRESH_S,
        },
    }
    return render_page(request, "environments/server.html", context, partial="status")
