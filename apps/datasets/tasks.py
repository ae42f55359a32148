from apps.core.tasks import durable_task
from apps.datasets.services import dataset_version_build_job, dataset_version_verify_job


@durable_task
def build_dataset_version_task(job_id: int) -> None:
    """Build a dataset version. Safe to redeliver: the job row is claimed once, a ready
    version is not rebuilt, and a build taken over after a crash starts from a clean slate."""
    dataset_version_build_job(job_id)


@durable_task
def verify_dataset_version_task(job_id: int) -> None:
    """Recompute a version's checksum from its stored rows (read-only; safe to redeliver)."""
    dataset_version_verify_job(job_id)
