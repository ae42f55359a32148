"""Run batches and runs: executions of tasks by a policy, stored whole and graded.

A batch fans out into slots, one per (task, trial). Each slot has one ``Run`` row per attempt:
a trial that errors (the model endpoint failed after its retries) is re-run as a new attempt,
up to the batch's ``max_attempts``, so errors never count as agent failures. The unique key
(batch, task, trial, attempt) makes a redelivered Celery message find its row instead of
creating a second one.
"""

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

MAX_TRIALS = 20
MAX_CONCURRENCY = 64
MAX_ATTEMPTS = 10
MAX_GROUP_SIZE = 64
MAX_TEMPERATURE = 2.0


class PolicyKind(models.TextChoices):
    ORACLE = "oracle", "Oracle (reference solution)"
    ENDPOINT = "endpoint", "Model endpoint"


class RunRole(models.TextChoices):
    TEACHER = "teacher", "Teacher"
    STUDENT = "student", "Student"
    EVAL = "eval", "Evaluation"


class UserSide(models.TextChoices):
    SCRIPTED = "scripted", "Scripted turns"
    SIMULATOR = "simulator", "LLM user simulator"


class Executor(models.TextChoices):
    CELERY = "celery", "Celery workers"
    INLINE = "inline", "In process"


class RunBatch(models.Model):
    project = models.ForeignKey(
        "accounts.Project", on_delete=models.CASCADE, related_name="run_batches"
    )
    job = models.OneToOneField("core.Job", on_delete=models.PROTECT, related_name="run_batch")
    name = models.CharField(max_length=200)
    policy_kind = models.CharField(max_length=16, choices=PolicyKind.choices)
    endpoint = models.ForeignKey(
        "llm.ModelEndpoint",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="run_batches",
    )
    # Copies, kept if the endpoint is later edited or deleted: what the batch really used.
    endpoint_name = models.CharField(max_length=80, blank=True)
    model = models.CharField(max_length=200, blank=True)
    role = models.CharField(max_length=16, choices=RunRole.choices, default=RunRole.EVAL)
    task_ids = models.JSONField(default=list, help_text="The resolved tasks, in run order.")
    selection = models.JSONField(default=dict, blank=True, help_text="The filter that chose them.")
    task_set_key = models.CharField(
        max_length=64,
        db_index=True,
        help_text="sha256 of the (task, environment revision) pairs: batches with the same key "
        "ran the same task set and are comparable on the leaderboard.",
    )
    # Runs per task: k trials, or a rollout group's G samples (then trials = group_size,
    # which may go up to MAX_GROUP_SIZE; forms and the API keep plain trials ≤ MAX_TRIALS).
    trials = models.PositiveSmallIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(MAX_GROUP_SIZE)]
    )
    group_size = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_GROUP_SIZE)],
        help_text="G: a student batch's samples per task, scored as one rollout group per task. "
        "None: no groups.",
    )
    temperature = models.FloatField(
        null=True,
        blank=True,
        validators=[MinValueValidator(0.0), MaxValueValidator(MAX_TEMPERATURE)],
        help_text="The agent's sampling temperature T; None: the endpoint's.",
    )
    discount = models.FloatField(
        default=1.0,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="The discount gamma of the groups' reward-to-go (per-turn and per-call credit).",
    )
    concurrency = models.PositiveSmallIntegerField(
        default=4, validators=[MinValueValidator(1), MaxValueValidator(MAX_CONCURRENCY)]
    )
    max_tool_calls = models.PositiveIntegerField(
        default=50, validators=[MinValueValidator(1), MaxValueValidator(1000)]
    )
    max_rounds_per_turn = models.PositiveIntegerField(
        default=20, validators=[MinValueValidator(1), MaxValueValidator(200)]
    )
    faults = models.BooleanField(default=True, help_text="Inject the tools' declared faults.")
    user_side = models.CharField(max_length=16, choices=UserSide.choices, default=UserSide.SCRIPTED)
    simulator_endpoint = models.ForeignKey(
        "llm.ModelEndpoint",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="simulated_batches",
    )
    judge_endpoint = models.ForeignKey(
        "llm.ModelEndpoint",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="judged_batches",
        help_text="Scores the tasks' judge graders: the batch's choice, else the project's judge "
        "when the batch was made. None: judge graders are skipped.",
    )
    judge_model = models.CharField(max_length=200, blank=True, help_text="A copy, kept.")
    seed = models.IntegerField(default=0)
    max_attempts = models.PositiveSmallIntegerField(
        default=3,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_ATTEMPTS)],
        help_text="Attempts per trial: an errored trial is re-run until this many.",
    )
    executor = models.CharField(max_length=16, choices=Executor.choices, default=Executor.CELERY)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["project", "-created_at"])]
        constraints = [
            models.CheckConstraint(
                condition=Q(policy_kind=PolicyKind.ORACLE) | ~Q(endpoint_name=""),
                name="run_batch_endpoint_named",
            ),
            models.CheckConstraint(condition=Q(trials__gte=1), name="run_batch_trials_positive"),
            models.CheckConstraint(
                condition=Q(concurrency__gte=1), name="run_batch_concurrency_positive"
            ),
            models.CheckConstraint(
                condition=Q(max_attempts__gte=1), name="run_batch_attempts_positive"
            ),
            models.CheckConstraint(
                condition=Q(group_size__isnull=True)
                | Q(role=RunRole.STUDENT, group_size__gte=1, group_size__lte=MAX_GROUP_SIZE),
                name="run_batch_groups_of_students",
            ),
            models.CheckConstraint(
                condition=Q(discount__gte=0) & Q(discount__lte=1), name="run_batch_discount_range"
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def policy_label(self) -> str:
        """What ran: ``oracle`` or the endpoint's model (the leaderboard's row name)."""
        return "oracle" if self.policy_kind == PolicyKind.ORACLE else self.model

    @property
    def slot_count(self) -> int:
        return len(self.task_ids) * self.trials


class RunStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    ERRORED = "errored", "Errored"
    CANCELLED = "cancelled", "Cancelled"


class Run(models.Model):
    """One attempt at one trial of one task. ``succeeded`` means it ran to the end and was
    graded (``passed`` says whether the agent did the task); ``errored`` means the run itself
    broke (an LLM outage), which is never held against the agent."""

    batch = models.ForeignKey(RunBatch, on_delete=models.CASCADE, related_name="runs")
    project = models.ForeignKey("accounts.Project", on_delete=models.CASCADE, related_name="+")
    # The task may be deleted or replaced (the whole-spec editor recreates task rows); the
    # run keeps its id, key and environment so it stays readable and its slot unique.
    task = models.ForeignKey(
        "environments.Task", null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )
    task_ref = models.PositiveIntegerField(help_text="The task's id when the batch was made.")
    task_key = models.CharField(max_length=100)
    task_title = models.CharField(max_length=300, blank=True)
    environment = models.ForeignKey(
        "environments.Environment",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="runs",
    )
    environment_name = models.CharField(max_length=200, blank=True)
    split = models.CharField(max_length=8, blank=True)
    capabilities = models.JSONField(default=list, blank=True, help_text="Capability slugs.")
    trial = models.PositiveSmallIntegerField()
    attempt = models.PositiveSmallIntegerField(default=1)
    status = models.CharField(
        max_length=16, choices=RunStatus.choices, default=RunStatus.PENDING, db_index=True
    )
    enqueued_at = models.DateTimeField(null=True, blank=True)
    # The current claim: its fence token, how many times the run was claimed (a takeover
    # after its worker died counts again), and the worker (host:pid) holding it.
    claim_token = models.CharField(max_length=64, blank=True)
    claims = models.PositiveSmallIntegerField(default=0)
    worker = models.CharField(max_length=200, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    policy_name = models.CharField(max_length=200, blank=True)
    endpoint_name = models.CharField(max_length=80, blank=True)
    model = models.CharField(max_length=200, blank=True)
    environment_revision = models.PositiveIntegerField(null=True, blank=True)
    spec_hash = models.CharField(max_length=64, blank=True)
    seed = models.IntegerField(default=0)

    transcript = models.JSONField(default=list, blank=True)
    tools = models.JSONField(default=list, blank=True)
    audit_log = models.JSONField(default=list, blank=True)
    exogenous_log = models.JSONField(default=list, blank=True)
    context_events = models.JSONField(
        default=list,
        blank=True,
        help_text="Each time the agent's request was shortened to fit the model's context "
        "(apps.runs.context); the transcript itself is always whole.",
    )
    final_state_hash = models.CharField(max_length=64, blank=True)
    verdicts = models.JSONField(default=list, blank=True)
    scoring = models.JSONField(
        default=dict, blank=True, help_text="The grading's weights and pass threshold."
    )
    completion = models.FloatField(null=True, blank=True)
    safety = models.FloatField(null=True, blank=True)
    robustness = models.FloatField(null=True, blank=True)
    score = models.FloatField(null=True, blank=True)
    passed = models.BooleanField(null=True, blank=True)
    strict = models.BooleanField(null=True, blank=True)
    stop_reason = models.CharField(max_length=32, blank=True)
    tool_calls = models.PositiveIntegerField(default=0)
    tool_errors = models.PositiveIntegerField(default=0)
    tokens_in = models.PositiveIntegerField(default=0)
    tokens_out = models.PositiveIntegerField(default=0)
    llm_calls = models.PositiveIntegerField(default=0)
    cost = models.DecimalField(max_digits=14, decimal_places=6, default=0)
    latency_ms = models.PositiveIntegerField(default=0, help_text="Wall time of the episode.")
    error = models.TextField(blank=True)
    retryable = models.BooleanField(default=False, help_text="An errored run worth re-running.")

    class Meta:
        ordering = ["batch_id", "id"]
        indexes = [
            models.Index(fields=["batch", "status"]),
            models.Index(fields=["project", "task_key"]),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["batch", "task_ref", "trial", "attempt"], name="run_unique_slot_attempt"
            ),
            models.CheckConstraint(
                condition=Q(status__in=[choice.value for choice in RunStatus]),
                name="run_status_valid",
            ),
            models.CheckConstraint(condition=Q(attempt__gte=1), name="run_attempt_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.task_key} #{self.trial} (attempt {self.attempt}, {self.status})"


class RolloutGroup(models.Model):
    """The G runs of one task in one student batch, scored together once all are final.

    A model of its own (not a grouping computed on each read) because its reward processing
    is computed once, when the last of its runs closes, and then read many times — by the
    groups page with its variant selector, the API and the scored-rollout export — and
    because it is what RL consumers address (``group id``, task, G). ``variants`` holds the
    engine's ``rewards.group_table`` verbatim: every reward variant (``score`` = the
    safety-gated score, ``raw`` = without the gate, ``passed``, ``strict``), the advantages
    of each under ``grpo``/``dr_grpo``/``rloo``, and per-turn and per-call credit. Members
    are the trials' final attempts in trial order (``run_ids``); an errored or cancelled
    member is unscorable (reward None, advantage 0)."""

    batch = models.ForeignKey(RunBatch, on_delete=models.CASCADE, related_name="groups")
    project = models.ForeignKey("accounts.Project", on_delete=models.CASCADE, related_name="+")
    task_ref = models.PositiveIntegerField()
    task_key = models.CharField(max_length=100)
    task_title = models.CharField(max_length=300, blank=True)
    environment_name = models.CharField(max_length=200, blank=True)
    size = models.PositiveSmallIntegerField()
    run_ids = models.JSONField(default=list, help_text="The members' run ids, by trial.")
    scorable = models.PositiveSmallIntegerField(default=0, help_text="Members with a grading.")
    mean_score = models.FloatField(null=True, blank=True)
    score_std = models.FloatField(null=True, blank=True, help_text="Bessel-corrected.")
    pass_rate = models.FloatField(null=True, blank=True)
    variants = models.JSONField(default=dict, help_text="engine rewards.group_table(...).")
    scored_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["batch_id", "id"]
        constraints = [
            models.UniqueConstraint(fields=["batch", "task_ref"], name="rollout_group_unique"),
            models.CheckConstraint(condition=Q(size__gte=1), name="rollout_group_size_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.task_key} (G={self.size})"
