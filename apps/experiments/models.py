"""An experiment: its recipe (``recipe.py``, stored as parsed) and one record per stage of
the loop, each pointing at the job and the objects it produced (``outputs``: ids by kind),
so that advancing again after a kill looks at what a stage made instead of redoing it."""

from django.conf import settings
from django.db import models
from django.db.models import Q


class Stage(models.TextChoices):
    SYNTHESIS = "synthesis", "Synthesis (train and held-out environments)"
    TEACHER = "teacher", "Teacher batch"
    CURATION = "curation", "Curation"
    DATASET = "dataset", "Dataset version"
    SFT = "sft", "SFT"
    SERVE_SFT = "serve_sft", "Serve the SFT model"
    EVAL_BASE = "eval_base", "Student batch: base"
    EVAL_SFT = "eval_sft", "Student batch: after SFT"
    GRPO = "grpo", "GRPO from the SFT checkpoint"
    SERVE_GRPO = "serve_grpo", "Serve the GRPO model"
    EVAL_GRPO = "eval_grpo", "Student batch: after GRPO"


STAGE_ORDER = tuple(Stage.values)


class StageStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    WAITING = "waiting", "Waiting for people"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"


class ExperimentStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    WAITING = "waiting", "Waiting for people"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"


ACTIVE_EXPERIMENT_STATUSES = (ExperimentStatus.PENDING, ExperimentStatus.RUNNING)


class Experiment(models.Model):
    project = models.ForeignKey(
        "accounts.Project", on_delete=models.CASCADE, related_name="experiments"
    )
    name = models.CharField(max_length=200)
    recipe = models.JSONField(help_text="The parsed recipe (coworkenv.experiment/v1).")
    status = models.CharField(
        max_length=16,
        choices=ExperimentStatus.choices,
        default=ExperimentStatus.PENDING,
        db_index=True,
    )
    message = models.TextField(blank=True)
    # A targeted second round names the experiment whose weaknesses it synthesizes for.
    previous = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="next_rounds"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["project", "-created_at"])]

    def __str__(self) -> str:
        return self.name

    @property
    def is_active(self) -> bool:
        return self.status in ACTIVE_EXPERIMENT_STATUSES


class ExperimentStage(models.Model):
    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="stages")
    stage = models.CharField(max_length=16, choices=Stage.choices)
    position = models.PositiveSmallIntegerField()
    status = models.CharField(
        max_length=16, choices=StageStatus.choices, default=StageStatus.PENDING
    )
    # The jobs this stage started (core Job ids; synthesis starts one per split) and what
    # they made, by kind: {"synthesis": [..], "batch": id, "dataset_version": id, ...}.
    job_ids = models.JSONField(default=list, blank=True)
    outputs = models.JSONField(default=dict, blank=True)
    message = models.TextField(blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["experiment_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["experiment", "stage"], name="experiment_stage_once"),
            models.CheckConstraint(
                condition=Q(stage__in=STAGE_ORDER), name="experiment_stage_known"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.experiment_id}: {self.stage} ({self.status})"
