"""Synthesis jobs: what was asked for, one slot per requested environment, every attempt.

A ``SynthesisJob`` holds the inputs and points at the core ``Job`` that carries status,
progress and cancel. Each requested environment is a ``SynthesisSlot`` with a unique
``(synthesis, index)`` key: a worker claims it with a conditional UPDATE, keeps its lease
alive with a heartbeat, and marks it finished in the same transaction that creates its
environment — so a redelivered or resumed task never makes a second one. Every draft and
repair is a ``SynthesisAttempt``. ``EnvironmentSignature`` keeps a small MinHash sketch of
each environment's text, for near-duplicate detection without re-reading specs.
"""

from decimal import Decimal

from django.conf import settings
from django.core.validators import MaxLengthValidator
from django.db import models
from django.db.models import F, Q

MAX_ENVIRONMENTS_PER_JOB = 500
MAX_TASKS_PER_ENVIRONMENT = 20
MAX_TURNS = 20
MAX_REPAIR_ROUNDS = 10


class Generator(models.TextChoices):
    LLM = "llm", "LLM"
    TEMPLATE = "template", "Template (offline)"


class Difficulty(models.TextChoices):
    EASY = "easy", "Easy"
    MEDIUM = "medium", "Medium"
    HARD = "hard", "Hard"


class Horizon(models.TextChoices):
    """The mix of task lengths (apps.synthesis.generators.long_horizon)."""

    SHORT = "short", "Short (1-3 turns, one day)"
    MEDIUM = "medium", "Medium (half the tasks are projects over a few days)"
    LONG = "long", "Long (every task a project: 5-12 turns, 20-60 calls, days apart)"


class SlotStatus(models.TextChoices):
    REQUESTED = "requested", "Requested"
    DRAFTING = "drafting", "Drafting"
    REPAIRING = "repairing", "Repairing"
    VALID = "valid", "Valid"
    INVALID = "invalid", "Invalid"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


RUNNING_SLOT_STATUSES = (SlotStatus.DRAFTING, SlotStatus.REPAIRING)
FINISHED_SLOT_STATUSES = (
    SlotStatus.VALID,
    SlotStatus.INVALID,
    SlotStatus.FAILED,
    SlotStatus.CANCELLED,
)


class AttemptKind(models.TextChoices):
    DRAFT = "draft", "Draft"
    REPAIR = "repair", "Repair"


SCENARIO_HINT_MAX_LENGTH = 2000  # a sentence or a paragraph about the workplace to imagine


class SynthesisJob(models.Model):
    project = models.ForeignKey(
        "accounts.Project", on_delete=models.CASCADE, related_name="synthesis_jobs"
    )
    job = models.OneToOneField("core.Job", on_delete=models.CASCADE, related_name="synthesis")
    capabilities = models.ManyToManyField(
        "capabilities.Capability", related_name="synthesis_jobs", blank=True
    )
    # The slugs in the order they were given: task i of an environment exercises slug i mod n.
    capability_slugs = models.JSONField(default=list)
    domain_hint = models.CharField(max_length=200, blank=True)
    scenario_hint = models.TextField(
        blank=True,
        max_length=SCENARIO_HINT_MAX_LENGTH,
        validators=[MaxLengthValidator(SCENARIO_HINT_MAX_LENGTH)],
    )
    services = models.JSONField(default=list, blank=True)
    count = models.PositiveIntegerField()
    tasks_per_environment = models.PositiveIntegerField(default=3)
    turns_min = models.PositiveIntegerField(default=1)
    turns_max = models.PositiveIntegerField(default=3)
    difficulty = models.CharField(
        max_length=8, choices=Difficulty.choices, default=Difficulty.MEDIUM
    )
    horizon = models.CharField(max_length=8, choices=Horizon.choices, default=Horizon.SHORT)
    # The template generator's scenario family (generators.TEMPLATE_FAMILY_CHOICES); blank:
    # chosen by the seed among the standard-service families.
    family = models.CharField(max_length=40, blank=True, default="")
    generator = models.CharField(max_length=16, choices=Generator.choices)
    endpoint = models.ForeignKey(
        "llm.ModelEndpoint",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="synthesis_jobs",
    )
    # Kept when the endpoint is renamed or deleted.
    endpoint_name = models.CharField(max_length=80, blank=True)
    model = models.CharField(max_length=200, blank=True)
    max_repair_rounds = models.PositiveIntegerField(default=3)
    seed = models.BigIntegerField(default=0)
    prompt_version = models.CharField(max_length=32)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["project", "-created_at"], name="synthesis_job_project")]
        constraints = [
            models.CheckConstraint(
                condition=Q(count__gte=1, count__lte=MAX_ENVIRONMENTS_PER_JOB),
                name="synthesis_job_count_range",
            ),
            models.CheckConstraint(
                condition=Q(turns_min__gte=1, turns_min__lte=F("turns_max")),
                name="synthesis_job_turn_range",
            ),
            models.CheckConstraint(
                condition=Q(max_repair_rounds__lte=MAX_REPAIR_ROUNDS),
                name="synthesis_job_repair_rounds",
            ),
            models.CheckConstraint(
                condition=Q(horizon__in=[choice.value for choice in Horizon]),
                name="synthesis_job_horizon_valid",
            ),
            models.CheckConstraint(
                condition=Q(generator__in=[choice.value for choice in Generator]),
                name="synthesis_job_generator_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"Synthesis #{self.pk} ({self.generator}, {self.count})"


class SynthesisSlot(models.Model):
    """One requested environment. At most one environment per slot, ever."""

    synthesis = models.ForeignKey(SynthesisJob, on_delete=models.CASCADE, related_name="slots")
    index = models.PositiveIntegerField()
    seed = models.BigIntegerField()
    status = models.CharField(
        max_length=16, choices=SlotStatus.choices, default=SlotStatus.REQUESTED, db_index=True
    )
    environment = models.OneToOneField(
        "environments.Environment",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="synthesis_slot",
    )
    attempts_count = models.PositiveIntegerField(default=0)
    repair_rounds = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    # When the slot was last sent to the workers (the sweeper sends it again if nobody took
    # it); blank for slots worked in process (``--sync``).
    enqueued_at = models.DateTimeField(null=True, blank=True)
    # The lease: who holds the slot, since when, and when it last proved to be alive.
    claim_token = models.CharField(max_length=64, blank=True)
    claims = models.PositiveIntegerField(default=0)
    worker = models.CharField(max_length=200, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Lineage of the result.
    endpoint_name = models.CharField(max_length=80, blank=True)
    model = models.CharField(max_length=200, blank=True)
    prompt_version = models.CharField(max_length=32, blank=True)
    tokens_in = models.PositiveIntegerField(default=0)
    tokens_out = models.PositiveIntegerField(default=0)
    cost = models.DecimalField(max_digits=14, decimal_places=6, default=Decimal("0"))
    # Near-duplicate detection.
    duplicate_of = models.ForeignKey(
        "environments.Environment",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    similarity = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["synthesis_id", "index"]
        constraints = [
            models.UniqueConstraint(fields=["synthesis", "index"], name="synthesis_slot_unique"),
            models.CheckConstraint(
                condition=Q(status__in=[choice.value for choice in SlotStatus]),
                name="synthesis_slot_status_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"Synthesis #{self.synthesis_id} slot {self.index} ({self.status})"


class SynthesisAttempt(models.Model):
    """One draft or repair answer: what came back, and what validation said about it."""

    slot = models.ForeignKey(SynthesisSlot, on_delete=models.CASCADE, related_name="attempts")
    round = models.PositiveIntegerField(help_text="0 is the draft, 1… the repair rounds.")
    kind = models.CharField(max_length=8, choices=AttemptKind.choices)
    document = models.JSONField(null=True, blank=True, help_text="The parsed draft, if any.")
    raw_text = models.TextField(blank=True, help_text="The answer, when it was not JSON.")
    report = models.JSONField(null=True, blank=True, help_text="validate_spec(...).to_dict()")
    valid = models.BooleanField(null=True)
    error_count = models.PositiveIntegerField(default=0)
    warning_count = models.PositiveIntegerField(default=0)
    tokens_in = models.PositiveIntegerField(default=0)
    tokens_out = models.PositiveIntegerField(default=0)
    latency_ms = models.PositiveIntegerField(default=0)
    validation_ms = models.PositiveIntegerField(default=0)
    cost = models.DecimalField(max_digits=14, decimal_places=6, default=Decimal("0"))
    llm_call_ids = models.JSONField(default=list, blank=True)
    model = models.CharField(max_length=200, blank=True)
    prompt_version = models.CharField(max_length=32, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slot_id", "round"]
        constraints = [
            models.UniqueConstraint(fields=["slot", "round"], name="synthesis_attempt_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} round {self.round} of slot {self.slot_id}"


class EnvironmentSignature(models.Model):
    """A bottom-k MinHash sketch of an environment's requests and record text."""

    environment = models.OneToOneField(
        "environments.Environment", on_delete=models.CASCADE, related_name="text_signature"
    )
    project = models.ForeignKey("accounts.Project", on_delete=models.CASCADE, related_name="+")
    spec_hash = models.CharField(max_length=64, help_text="The spec the sketch was made from.")
    sketch = models.JSONField(default=list)
    shingles = models.PositiveIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["project"], name="env_signature_project")]

    def __str__(self) -> str:
        return f"signature of environment {self.environment_id}"
