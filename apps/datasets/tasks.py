from celery import shared_task

from apps.datasets.services import dataset_version_build_job, dataset_version_verify_job


@shared_task(acks_late=True)
def build_dataset_version_task(job_id: int) -> None:
    """Build a dataset version. Safe to redeliver: the job row is claimed once, a ready
    version is not rebuilt, and a build taken over after a crash starts from a clean slate."""
    dataset_version_build_job(job_id)


@shared_task(acks_late=True)
def verify_dataset_version_task(job_id: int) -> None:
    """Recompute a version's checksum from its stored rows (read-only; safe to redeliver)."""
    dataset_version_verify_job(job_id)
