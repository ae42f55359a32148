"""Reads that span the pipeline's apps: the figures on a project's dashboard."""

from apps.accounts.models import Membership, Project
from apps.capabilities.models import Capability
from apps.core.models import ACTIVE_JOB_STATUSES, Job
from apps.curation.selectors import pending_count
from apps.datasets.models import Dataset
from apps.environments.selectors import project_environment_counts
from apps.runs.models import Run


def project_counts(*, project: Project) -> dict[str, int]:
    """The figures on a project's dashboard; each part of the pipeline adds its own line."""
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
