"""Model servers: an OpenAI-compatible server for one model, run as a job on a ``gpu``
worker and registered as a model endpoint of the project while it answers.

Its status, heartbeat, worker and cancel flag live in the shared ``core.Job`` row (kind
``model_server``); this row says what is served, by which engine, where, and since when.
"""

from django.db import models
from django.db.models import Q

LOG_TAIL_CHARS = 16_000
MODEL_SERVER_KIND = "model_server"


class Engine(models.TextChoices):
    VLLM = "vllm", "vLLM"
    TRANSFORMERS = "transformers", "transformers serve"


class ModelServer(models.Model):
    project = models.ForeignKey(
        "accounts.Project", on_delete=models.CASCADE, related_name="model_servers"
    )
    job = models.OneToOneField("core.Job", on_delete=models.PROTECT, related_name="model_server")
    trained_model = models.ForeignKey(
        "training.TrainedModel",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="servers",
    )
    model_path = models.CharField(
        max_length=500, help_text="A Hugging Face id or a local folder: the model served."
    )
    adapter_path = models.CharField(
        max_length=500, blank=True, help_text="A LoRA adapter served on top of the model."
    )
    tool_call_parser = models.CharField(max_length=32, default="hermes")
    idle_timeout_s = models.PositiveIntegerField(
        default=1800, help_text="Stopped after this long without a request (0: never)."
    )
    engine = models.CharField(max_length=16, choices=Engine.choices, blank=True)
    host = models.CharField(max_length=100, blank=True)
    port = models.PositiveIntegerField(null=True, blank=True)
    served_model = models.CharField(
        max_length=500,
        blank=True,
        help_text="The model name requests carry (set when the worker starts it).",
    )
    command = models.TextField(blank=True)
    endpoint = models.ForeignKey(
        "llm.ModelEndpoint", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    ready_at = models.DateTimeField(null=True, blank=True)
    log_tail = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["project", "-created_at"])]
        constraints = [
            models.CheckConstraint(
                condition=Q(engine__in=["", *Engine.values]), name="model_server_engine_valid"
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def name(self) -> str:
        return self.adapter_path or self.model_path

    @property
    def base_url(self) -> str:
        if not self.port:
            return ""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"
