"""Training jobs on dataset versions, their metrics and the models they produce (a
``command`` job names one of the operator's templates, ``apps.training.command_templates``).

A ``TrainingJob`` is one fine-tuning run of a base model on a ``DatasetVersion`` (lineage:
the version is PROTECTed while a job refers to it). Its status, progress (optimizer steps)
and cancel flag live in the shared ``core.Job`` row. Metrics are rows (one per step, train
and eval values merged), the log tail is bounded, and ``artifacts`` records where the
checkpoints and the final model are, the exact ``job.json`` and the data files' sha256.
A job that succeeds registers a ``TrainedModel``, which can become a model endpoint and be
evaluated against its base model on the same tasks.
"""

from django.conf import settings
from django.db import models
from django.db.models import Q

LOG_TAIL_CHARS = 16_000


class TrainingMethod(models.TextChoices):
    SFT = "sft", "Supervised fine-tuning (SFT)"
    GRPO = "grpo", "Reinforcement learning on environment tasks (GRPO)"


class Backend(models.TextChoices):
    LOCAL = "local", "Local GPU worker (TRL, accelerate launch)"
    OPENAI = "openai", "OpenAI-compatible fine-tuning API"
    COMMAND = "command", "Cluster command (Slurm, SkyPilot, Kubernetes)"


class TrainingJob(models.Model):
    project = models.ForeignKey(
        "accounts.Project", on_delete=models.CASCADE, related_name="training_jobs"
    )
    job = models.OneToOneField("core.Job", on_delete=models.PROTECT, related_name="training_job")
    name = models.CharField(max_length=200)
    dataset_version = models.ForeignKey(
        "datasets.DatasetVersion",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="training_jobs",
        help_text="sft: the version trained on.",
    )
    environments = models.ManyToManyField(
        "environments.Environment",
        blank=True,
        related_name="training_jobs",
        help_text="grpo: the environments whose tasks are rolled out.",
    )
    task_split = models.CharField(
        max_length=8, blank=True, help_text="grpo: “train”, “eval”, or blank for every task."
    )
    eval_split = models.CharField(
        max_length=16, blank=True, help_text="“validation” for an eval loss, or blank."
    )
    method = models.CharField(
        max_length=16, choices=TrainingMethod.choices, default=TrainingMethod.SFT
    )
    backend = models.CharField(max_length=16, choices=Backend.choices)
    base_model = models.CharField(
        max_length=300, help_text="A Hugging Face id, a local path, or preset:tiny-qwen2."
    )
    preset = models.CharField(max_length=40, blank=True)
    hyperparameters = models.JSONField(default=dict)
    endpoint = models.ForeignKey(
        "llm.ModelEndpoint",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="training_jobs",
        help_text="openai backend: the fine-tuning API (its base URL and key variable).",
    )
    command_template = models.CharField(
        max_length=64,
        blank=True,
        help_text="command backend: the name of the operator's template "
        "(apps.training.command_templates).",
    )
    command_parameters = models.JSONField(
        default=dict, blank=True, help_text="command backend: the template's parameters, checked."
    )
    command = models.TextField(blank=True, help_text="The launched command, secret redacted.")
    callback_secret_sha256 = models.CharField(max_length=64, blank=True)
    external_id = models.CharField(
        max_length=200, blank=True, help_text="The provider's or scheduler's id of the job."
    )
    output_dir = models.CharField(max_length=500, blank=True)
    current_step = models.PositiveIntegerField(default=0)
    total_steps = models.PositiveIntegerField(default=0)
    last_loss = models.FloatField(null=True, blank=True)
    last_reward = models.FloatField(null=True, blank=True)
    log_tail = models.TextField(blank=True)
    artifacts = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["project", "-created_at"])]
        constraints = [
            models.CheckConstraint(
                condition=Q(method__in=TrainingMethod.values), name="training_job_method_valid"
            ),
            models.CheckConstraint(
                condition=Q(backend__in=Backend.values), name="training_job_backend_valid"
            ),
            models.CheckConstraint(
                condition=Q(eval_split__in=["", "validation"]),
                name="training_job_eval_split_valid",
            ),
            models.CheckConstraint(
                condition=Q(task_split__in=["", "train", "eval"]),
                name="training_job_task_split_valid",
            ),
            models.CheckConstraint(
                condition=Q(method=TrainingMethod.SFT, dataset_version__isnull=False)
                | Q(method=TrainingMethod.GRPO, backend=Backend.LOCAL),
                name="training_job_method_inputs",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def rl_label(self) -> str:
        """A GRPO job's configuration in a few characters, for chart legends:
        ``#12 passed/dr_grpo G4 T1 trajectory``, ``#13 score/grpo G4 T1 turn`` gamma ``0.9``."""
        hp = self.hyperparameters or {}
        credit = hp.get("credit", "trajectory")  # jobs from before the choice: trajectory
        return (
            f"#{self.pk} {hp.get('reward', '?')}/{hp.get('advantage', '?')} "
            f"G{hp.get('group_size', '?')} T{hp.get('temperature', 0):g} {credit}"
            + (
                ""
                if credit == "trajectory"
                else f" \N{GREEK SMALL LETTER GAMMA}{hp.get('gamma', 1.0):g}"
            )
        )


class TrainingMetric(models.Model):
    """One optimizer step's figures (train and eval values of the same step share a row);
    a GRPO job's rows also carry its reward, pass rate, KL and completion length."""

    training_job = models.ForeignKey(TrainingJob, on_delete=models.CASCADE, related_name="metrics")
    step = models.PositiveIntegerField()
    epoch = models.FloatField(null=True, blank=True)
    loss = models.FloatField(null=True, blank=True)
    eval_loss = models.FloatField(null=True, blank=True)
    learning_rate = models.FloatField(null=True, blank=True)
    grad_norm = models.FloatField(null=True, blank=True)
    tokens_per_second = models.FloatField(null=True, blank=True)
    # GRPO (apps.training.grpo.RL_METRICS)
    reward = models.FloatField(null=True, blank=True, help_text="Mean of the chosen reward.")
    reward_std = models.FloatField(null=True, blank=True, help_text="Std over the batch.")
    group_reward_std = models.FloatField(
        null=True, blank=True, help_text="Mean std within groups of G (0: no signal)."
    )
    pass_rate = models.FloatField(null=True, blank=True)
    strict_rate = models.FloatField(null=True, blank=True)
    score = models.FloatField(null=True, blank=True, help_text="Mean engine score.")
    kl = models.FloatField(null=True, blank=True)
    completion_length = models.FloatField(null=True, blank=True)
    recorded_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["training_job_id", "step"]
        constraints = [
            models.UniqueConstraint(
                fields=["training_job", "step"], name="training_metric_unique_step"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.training_job_id}@{self.step}"


class ModelKind(models.TextChoices):
    FULL = "full", "Full model weights"
    ADAPTER = "adapter", "LoRA adapter"
    REMOTE = "remote", "Hosted by the fine-tuning provider"


class TrainedModel(models.Model):
    project = models.ForeignKey(
        "accounts.Project", on_delete=models.CASCADE, related_name="trained_models"
    )
    training_job = models.OneToOneField(
        TrainingJob, on_delete=models.CASCADE, related_name="trained_model"
    )
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=ModelKind.choices)
    path = models.CharField(
        max_length=500, blank=True, help_text="Local weights (full model or adapter)."
    )
    remote_model = models.CharField(
        max_length=300, blank=True, help_text="The provider's model id (openai backend)."
    )
    base_model = models.CharField(max_length=300)
    endpoint = models.ForeignKey(
        "llm.ModelEndpoint", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    base_endpoint = models.ForeignKey(
        "llm.ModelEndpoint", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    eval_batch = models.ForeignKey(
        "runs.RunBatch", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    base_batch = models.ForeignKey(
        "runs.RunBatch", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.name

    @property
    def served_name(self) -> str:
        """The model name a vLLM server started with ``serve_command`` answers to."""
        return self.remote_model or f"coworkenv-{self.training_job_id}"
