from apps.core.models import Job


def job_list(*, project, kind: str | None = None, limit: int | None = None):
    jobs = Job.objects.filter(project=project).select_related("started_by")
    if kind:
        jobs = jobs.filter(kind=kind)
    return jobs[:limit] if limit else jobs
