from django.db.models import Count

from apps.accounts.models import ApiToken, Membership, Project


def project_list_for_user(*, user):
    return (
        Project.objects.filter(memberships__user=user)
        .annotate(member_count=Count("memberships", distinct=True))
        .order_by("name", "id")
    )


def membership_list(*, project: Project):
    return (
        Membership.objects.filter(project=project).select_related("user").order_by("user__username")
    )


def api_token_list(*, user):
    return ApiToken.objects.filter(user=user).order_by("-created_at", "-id")


def project_counts(*, project: Project) -> dict[str, int]:
    """The figures on a project's dashboard; each part of the pipeline adds its own line."""
    from apps.capabilities.models import Capability
    from apps.core.models import ACTIVE_JOB_STATUSES, Job
    from apps.curation.selectors import pending_count
    from apps.datasets.models import Dataset
    from apps.environments.selectors import project_environment_counts
    from apps.runs.models import Run

    return {
        "capabilities": Capability.objects.filter(
            project=project, archived_at__isnull=True
        ).count(),
        **project_environment_counts(project=project),
        "runs": Run.objects.filter(project=project).count(),
        "demonstrations_pending": pending_count(project=project),
        "datasets": Dataset.objects.filter(project=project).count(),
        "active_jobs": Job.objects.filter(project=project, status__in=ACTIVE_JOB_STATUSES).count(),
        "members": Membership.objects.filter(project=project).count(),
    }
