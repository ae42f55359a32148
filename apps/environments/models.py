"""Environments stored normalized, so they can be browsed, edited and queried.

The portable document (``coworkenv.environment/v1``) is rebuilt from these rows by
``specs.environment_spec``: an import followed by an export gives the same canonical document.
"""

from django.conf import settings
from django.db import models
from django.db.models import Q


class EnvironmentStatus(models.TextChoices):
    DRAFT = "draft", "Draft"
    VALID = "valid", "Valid"
    INVALID = "invalid", "Invalid"
    APPROVED = "approved", "Approved"
    ARCHIVED = "archived", "Archived"


class EnvironmentSource(models.TextChoices):
    MANUAL = "manual", "Manual"
    IMPORTED = "imported", "Imported"
    SYNTHESIZED = "synthesized", "Synthesized"


class Split(models.TextChoices):
    TRAIN = "train", "Train"
    EVAL = "eval", "Eval"


class GraderCategory(models.TextChoices):
    COMPLETION = "completion", "Completion"
    SAFETY = "safety", "Safety"
    ROBUSTNESS = "robustness", "Robustness"
    COMMUNICATION = "communication", "Communication"


class Environment(models.Model):
    project = models.ForeignKey(
        "accounts.Project", on_delete=models.CASCADE, related_name="environments"
    )
    name = models.CharField(max_length=200)
    domain = models.CharField(max_length=100, blank=True, db_index=True)
    description = models.TextField(blank=True)
    status = models.CharField(
        max_length=16, choices=EnvironmentStatus.choices, default=EnvironmentStatus.DRAFT
    )
    source = models.CharField(
        max_length=16, choices=EnvironmentSource.choices, default=EnvironmentSource.MANUAL
    )
    revision = models.PositiveIntegerField(default=1)
    spec_hash = models.CharField(max_length=64, blank=True, db_index=True)
    # Service -> ordered collection names, so empty collections survive a round trip.
    collections = models.JSONField(default=dict, blank=True)
    clock = models.JSONField(default=dict, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    # The document's /attachments: [{sha256, media_type, size, name}]; the bytes are in the
    # "attachments" storage under their hash (apps.environments.attachments).
    attachments = models.JSONField(default=list, blank=True)
    latest_validation = models.ForeignKey(
        "ValidationReport", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    duplicated_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="duplicates"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at", "-id"]
        indexes = [
            models.Index(fields=["project", "status"]),
            models.Index(fields=["project", "-updated_at"]),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def is_editable(self) -> bool:
        return self.status != EnvironmentStatus.ARCHIVED


class Task(models.Model):
    environment = models.ForeignKey(Environment, on_delete=models.CASCADE, related_name="tasks")
    position = models.PositiveIntegerField(default=0)
    key = models.CharField(max_length=100)
    title = models.CharField(max_length=300, blank=True)
    split = models.CharField(max_length=8, choices=Split.choices, default=Split.TRAIN)
    system = models.TextField(blank=True)
    constraints = models.JSONField(default=list, blank=True)
    user = models.JSONField(default=dict, blank=True)
    turns = models.JSONField(default=list, blank=True)
    reference_solution = models.JSONField(default=list, blank=True)
    scoring = models.JSONField(null=True, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    capabilities = models.ManyToManyField(
        "capabilities.Capability", through="TaskCapability", related_name="tasks", blank=True
    )

    class Meta:
        ordering = ["environment_id", "position", "id"]
        constraints = [
            models.UniqueConstraint(fields=["environment", "key"], name="task_unique_key"),
        ]

    def __str__(self) -> str:
        return self.title or self.key


class TaskCapability(models.Model):
    """The ordered link between a task and the capabilities it exercises."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="capability_links")
    capability = models.ForeignKey(
        "capabilities.Capability", on_delete=models.CASCADE, related_name="task_links"
    )
    position = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["task_id", "position", "id"]
        constraints = [
            models.UniqueConstraint(fields=["task", "capability"], name="task_capability_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.task_id} exercises {self.capability_id}"


class Grader(models.Model):
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="graders")
    position = models.PositiveIntegerField(default=0)
    key = models.CharField(max_length=100)
    description = models.TextField(blank=True)
    category = models.CharField(
        max_length=16, choices=GraderCategory.choices, default=GraderCategory.COMPLETION
    )
    weight = models.FloatField(default=1.0)
    at_turn = models.PositiveIntegerField(null=True, blank=True)
    # The task capability this grader tests (its capability-defining grader); "" = none.
    capability = models.CharField(max_length=100, blank=True, default="")
    # "check" in the spec; the name would shadow Model.check().
    check_spec = models.JSONField(default=dict)

    class Meta:
        ordering = ["task_id", "position", "id"]
        constraints = [
            models.UniqueConstraint(fields=["task", "key"], name="grader_unique_key"),
        ]

    def __str__(self) -> str:
        return self.key


class ToolSchema(models.Model):
    environment = models.ForeignKey(Environment, on_delete=models.CASCADE, related_name="tools")
    position = models.PositiveIntegerField(default=0)
    name = models.CharField(max_length=64)
    description = models.TextField(blank=True)
    parameters = models.JSONField(default=dict)
    binding = models.JSONField(default=dict)
    faults = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["environment_id", "position", "id"]
        constraints = [
            models.UniqueConstraint(fields=["environment", "name"], name="tool_unique_name"),
        ]

    def __str__(self) -> str:
        return self.name


class ServiceRecord(models.Model):
    """One JSON record of a service collection: the environment's, or a task's own."""

    environment = models.ForeignKey(Environment, on_delete=models.CASCADE, related_name="records")
    task = models.ForeignKey(
        Task, null=True, blank=True, on_delete=models.CASCADE, related_name="records"
    )
    service = models.CharField(max_length=64)
    collection = models.CharField(max_length=64)
    record_id = models.CharField(max_length=200)
    position = models.PositiveIntegerField(default=0)
    data = models.JSONField(default=dict)

    class Meta:
        ordering = ["environment_id", "service", "collection", "position", "id"]
        indexes = [models.Index(fields=["environment", "service", "collection"])]
        constraints = [
            models.UniqueConstraint(
                fields=["environment", "service", "collection", "record_id"],
                condition=Q(task__isnull=True),
                name="record_unique_in_environment",
            ),
            models.UniqueConstraint(
                fields=["task", "service", "collection", "record_id"],
                condition=Q(task__isnull=False),
                name="record_unique_in_task",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.service}.{self.collection}/{self.record_id}"


class ValidationReport(models.Model):
    environment = models.ForeignKey(
        Environment, on_delete=models.CASCADE, related_name="validation_reports"
    )
    job = models.ForeignKey(
        "core.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    revision = models.PositiveIntegerField()
    spec_hash = models.CharField(max_length=64, blank=True)
    valid = models.BooleanField()
    problems = models.JSONField(default=list)
    tasks = models.JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["environment", "-created_at"])]

    def __str__(self) -> str:
        return f"r{self.revision}: {'valid' if self.valid else 'invalid'}"

    @property
    def error_count(self) -> int:
        return sum(1 for p in self.problems if p.get("severity") == "error")

    @property
    def warning_count(self) -> int:
        return sum(1 for p in self.problems if p.get("severity") == "warning")
