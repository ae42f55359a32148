"""Demonstrations: teacher runs offered for review, their versions and the reviews.

The original run transcript is version 1 and is never modified; a reviewer's correction
(an edited assistant message, a turn excluded from training, a dropped tail) is a new
``DemonstrationVersion``, re-graded against the environment. A demonstration's decision
comes from its reviews: with ``reviews_required`` = N, N reviewers decide blind to each
other in the current round; unanimous decisions apply, disagreements wait for an admin's
adjudication.

This module is the contract the datasets app reads (through
``apps.curation.selectors.demonstrations_for_dataset``): keep these names stable.
"""

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

MAX_REVIEWS_REQUIRED = 5
CLAIM_MINUTES = 15


class DemonstrationStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    APPROVED = "approved", "Approved"
    REJECTED = "rejected", "Rejected"
    NEEDS_CHANGES = "needs_changes", "Needs changes"


class Decision(models.TextChoices):
    APPROVED = "approved", "Approve"
    REJECTED = "rejected", "Reject"
    NEEDS_CHANGES = "needs_changes", "Needs changes"


class CurationSettings(models.Model):
    """Per-project rules: which teacher runs become demonstrations, how many reviews each
    needs. Created with defaults on first use (``curation_settings_get``)."""

    project = models.OneToOneField(
        "accounts.Project", on_delete=models.CASCADE, related_name="curation_settings"
    )
    pass_threshold = models.FloatField(
        default=0.75,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="A teacher run that passed with at least this score becomes a demonstration.",
    )
    strict_only = models.BooleanField(
        default=False, help_text="Only runs where every grader passed become demonstrations."
    )
    reviews_required = models.PositiveSmallIntegerField(
        default=1,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_REVIEWS_REQUIRED)],
        help_text="Reviewers who decide each demonstration, blind to each other.",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "curation settings"
        constraints = [
            models.CheckConstraint(
                condition=Q(pass_threshold__gte=0) & Q(pass_threshold__lte=1),
                name="curation_settings_threshold_range",
            ),
            models.CheckConstraint(
                condition=Q(reviews_required__gte=1)
                & Q(reviews_required__lte=MAX_REVIEWS_REQUIRED),
                name="curation_settings_reviews_range",
            ),
        ]

    def __str__(self) -> str:
        return f"Curation settings of {self.project_id}"


class ReviewReasonTag(models.Model):
    """A reason a reviewer can give ("wrong tool", "hallucinated fact", …); editable per
    project. Reviews copy the tag names, so renaming or archiving a tag keeps old reviews."""

    project = models.ForeignKey(
        "accounts.Project", on_delete=models.CASCADE, related_name="review_reason_tags"
    )
    name = models.CharField(max_length=60)
    description = models.CharField(max_length=300, blank=True)
    position = models.PositiveIntegerField(default=0)
    archived_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project_id", "position", "id"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="reason_tag_unique_name"),
        ]

    def __str__(self) -> str:
        return self.name


class Demonstration(models.Model):
    project = models.ForeignKey(
        "accounts.Project", on_delete=models.CASCADE, related_name="demonstrations"
    )
    # Runs go when their batch is deleted; the demonstration keeps its copies and versions.
    run = models.OneToOneField(
        "runs.Run",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="demonstration",
    )
    run_ref = models.PositiveIntegerField(help_text="The run's id when it was promoted.")
    task = models.ForeignKey(
        "environments.Task",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="demonstrations",
    )
    environment = models.ForeignKey(
        "environments.Environment",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="demonstrations",
    )
    task_key = models.CharField(max_length=100)
    task_title = models.CharField(max_length=300, blank=True)
    environment_name = models.CharField(max_length=200, blank=True)
    split = models.CharField(max_length=8, default="train", db_index=True)
    capability_slugs = models.JSONField(default=list, blank=True)
    capabilities = models.ManyToManyField(
        "capabilities.Capability", related_name="demonstrations", blank=True
    )
    model_name = models.CharField(max_length=200, blank=True, db_index=True)
    policy = models.CharField(max_length=200, blank=True)
    score = models.FloatField(null=True, blank=True, help_text="The current version's score.")
    status = models.CharField(
        max_length=16,
        choices=DemonstrationStatus.choices,
        default=DemonstrationStatus.PENDING,
        db_index=True,
    )
    current_version = models.ForeignKey(
        "curation.DemonstrationVersion",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    reviews_required = models.PositiveSmallIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(MAX_REVIEWS_REQUIRED)]
    )
    review_round = models.PositiveIntegerField(
        default=1, help_text="Bumped when a correction re-opens the demonstration."
    )
    disputed = models.BooleanField(
        default=False,
        help_text="The round's reviewers disagree: an admin adjudicates.",
    )
    agreement = models.FloatField(
        null=True,
        blank=True,
        help_text="Pairwise agreement of the last complete round with two or more reviewers.",
    )
    claimed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    claim_expires_at = models.DateTimeField(null=True, blank=True)
    regrade_flag = models.CharField(
        max_length=40,
        blank=True,
        db_index=True,
        help_text='"passed→failed" (or the reverse) when a re-grade flipped the outcome.',
    )
    regraded_at = models.DateTimeField(null=True, blank=True)
    promoted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    # The rule that approved it when no person did ("policy:approve-strict-passes"); blank
    # for a person's decision (their Review says who) and while pending.
    approved_by_policy = models.CharField(max_length=80, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [
            models.Index(fields=["project", "status", "created_at"]),
            models.Index(fields=["project", "environment"]),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=[choice.value for choice in DemonstrationStatus]),
                name="demonstration_status_valid",
            ),
            models.CheckConstraint(
                condition=Q(reviews_required__gte=1), name="demonstration_reviews_positive"
            ),
            models.CheckConstraint(
                condition=Q(claimed_by__isnull=True) | Q(claim_expires_at__isnull=False),
                name="demonstration_claim_expires",
            ),
            models.CheckConstraint(
                condition=Q(approved_by_policy="")
                | (Q(approved_by_policy__startswith="policy:") & Q(status="approved")),
                name="demonstration_policy_approves",
            ),
        ]

    def __str__(self) -> str:
        return f"Demonstration {self.pk} ({self.task_key}, {self.status})"


class DemonstrationVersion(models.Model):
    """One transcript of a demonstration. Version 1 is the run's transcript as recorded;
    every correction adds the next number. ``grading`` is the engine's grading of this
    transcript replayed against the environment (score, passed, strict, verdicts, …)."""

    demonstration = models.ForeignKey(
        Demonstration, on_delete=models.CASCADE, related_name="versions"
    )
    number = models.PositiveIntegerField()
    transcript = models.JSONField(
        default=list,
        help_text='OpenAI chat messages; assistant messages may carry "weight": 0 or 1.',
    )
    tools = models.JSONField(default=list, blank=True, help_text="OpenAI function tools.")
    # What happened when this transcript was (re)played: the timeline shows results, errors
    # and record diffs from these.
    audit_log = models.JSONField(default=list, blank=True)
    exogenous_log = models.JSONField(default=list, blank=True)
    grading = models.JSONField(default=dict, blank=True)
    score = models.FloatField(null=True, blank=True)
    passed = models.BooleanField(null=True, blank=True)
    strict = models.BooleanField(null=True, blank=True)
    environment_revision = models.PositiveIntegerField(null=True, blank=True)
    spec_hash = models.CharField(max_length=64, blank=True)
    changes = models.JSONField(
        default=list, blank=True, help_text="The edits that made this version from the last."
    )
    flag = models.CharField(
        max_length=40, blank=True, help_text='"passed→failed" when this correction broke the task.'
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    note = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["demonstration_id", "number"]
        constraints = [
            models.UniqueConstraint(
                fields=["demonstration", "number"], name="demonstration_version_unique_number"
            ),
            models.CheckConstraint(
                condition=Q(number__gte=1), name="demonstration_version_positive"
            ),
        ]

    def __str__(self) -> str:
        return f"v{self.number} of demonstration {self.demonstration_id}"


class Review(models.Model):
    """One reviewer's decision in one round. Unique per (demonstration, round, reviewer): a
    reviewer decides once per round; a correction opens a new round. An adjudication is the
    admin's final word on a disputed round."""

    demonstration = models.ForeignKey(
        Demonstration, on_delete=models.CASCADE, related_name="reviews"
    )
    version = models.ForeignKey(
        DemonstrationVersion, on_delete=models.CASCADE, related_name="reviews"
    )
    round = models.PositiveIntegerField(default=1)
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reviewer_name = models.CharField(max_length=150, blank=True)
    decision = models.CharField(max_length=16, choices=Decision.choices)
    reason_tags = models.JSONField(default=list, blank=True)
    comment = models.TextField(blank=True)
    adjudication = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["demonstration_id", "round", "created_at", "id"]
        indexes = [models.Index(fields=["reviewer", "created_at"])]
        constraints = [
            models.UniqueConstraint(
                fields=["demonstration", "round", "reviewer"],
                condition=Q(adjudication=False),
                name="review_unique_per_round",
            ),
            models.CheckConstraint(
                condition=Q(decision__in=[choice.value for choice in Decision]),
                name="review_decision_valid",
            ),
        ]

    def __str__(self) -> str:
        who = self.reviewer_name or "someone"
        return f"{who} {self.decision} demonstration {self.demonstration_id}"
