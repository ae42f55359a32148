"""Reading a job as a member of its project (404 for anyone else)."""

from django.http import Http404

from apps.accounts.access import check_project_role
from apps.accounts.models import Role
from apps.core.models import Job


def job_get_for_user(user, pk, min_role: str = Role.VIEWER) -> Job:
    job = Job.objects.select_related("project", "started_by").filter(pk=pk).first()
    if job is None:
        raise Http404("No such job.")
    check_project_role(user, job.project, min_role, missing="No such job.")
    return job
