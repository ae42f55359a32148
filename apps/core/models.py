from django.conf import settings
from django.db import models
from django.db.models import F, Q


class JobStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


ACTIVE_JOB_STATUSES = (JobStatus.PENDING, JobStatus.RUNNING)


class JobBase(models.Model):
    """The way every piece of background work reports progress, fails and is cancelled.

    State lives in this row (never in a Celery result backend). A worker claims the row with
    a conditional UPDATE, so a second delivery of the same message does nothing while the
    first is alive, and takes over only once the first has stopped heartbeating.
    """

    status = models.CharField(
        max_length=16, choices=JobStatus.choices, default=JobStatus.PENDING, db_index=True
    )
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    message = models.TextField(blank=True)
    cancel_requested = models.BooleanField(default=False)
    attempts = models.PositiveIntegerField(default=0)
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True

    @property
    def is_active(self) -> bool:
        return self.status in ACTIVE_JOB_STATUSES

    @property
    def percent(self) -> int:
        if not self.progress_total:
            return 100 if self.status == JobStatus.SUCCEEDED else 0
        return min(100, round(100 * self.progress_done / self.progress_total))


class Job(JobBase):
    """One row per job of any kind, so pages, the API and the status partial share one id."""

    project = models.ForeignKey("accounts.Project", on_delete=models.CASCADE, related_name="jobs")
    kind = models.CharField(max_length=64, db_index=True)
    title = models.CharField(max_length=200)
    params = models.JSONField(default=dict, blank=True)
    result = models.JSONField(default=dict, blank=True)
    # The Celery task that works this job (by name), so the sweeper can send it again; blank
    # for jobs whose work is claimed in smaller units (run batches, synthesis slots).
    task_name = models.CharField(max_length=200, blank=True)
    enqueued_at = models.DateTimeField(null=True, blank=True)
    # The current claim: its fence token and the worker (host:pid) that holds it.
    claim_token = models.CharField(max_length=64, blank=True)
    worker = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["project", "-created_at"])]
        constraints = [
            models.CheckConstraint(
                condition=Q(progress_done__lte=F("progress_total")) | Q(progress_total=0),
                name="job_progress_within_total",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.title} ({self.status})"

    # What each kind of job is called on pages; a kind not listed reads as its words.
    KIND_LABELS = {
        "environment_validation": "Environment validation",
        "synthesis": "Synthesis",
        "run_batch": "Run batch",
        "curation.regrade": "Re-grading demonstrations",
        "dataset_build": "Dataset build",
        "dataset_verify": "Dataset check",
        "worker_check": "Worker check",
    }

    @property
    def kind_label(self) -> str:
        """The job's kind for people ("Environment validation", not environment_validation)."""
        known = self.KIND_LABELS.get(self.kind)
        if known:
            return known
        words = self.kind.replace(".", " ").replace("_", " ").strip()
        return words[:1].upper() + words[1:]
