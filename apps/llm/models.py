"""Model endpoints (OpenAI-compatible servers), their concurrency slots, and the call log."""

import re
import uuid
from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from apps.llm.network import base_url_refusal
from apps.llm.origins import origin_of

ENV_VAR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Only variables named like an API key may be sent to an endpoint: the base URL is chosen by
# any author, so naming SECRET_KEY or DATABASE_URL would hand the server's own secrets to it.
API_KEY_ENV_SUFFIX = "API_KEY"


def api_key_env_allowed(name: str) -> bool:
    return bool(ENV_VAR_NAME.match(name)) and name.upper().endswith(API_KEY_ENV_SUFFIX)


def api_key_host_refusal(name: str, base_url: str) -> str | None:
    """Why the key in ``name`` may not be sent to ``base_url``, or None if it may.

    On a shared server the operator lists, in ``LLM_KEY_HOSTS``, the origins (scheme + host
    + port) each key variable may reach (e.g. ``OPENAI_API_KEY=https://api.openai.com``);
    without that any author could point an endpoint at their own server and receive the
    team's key, so a server (DEBUG=false) with no ``LLM_KEY_HOSTS`` sends no key at all. A
    bare host in the setting means https on port 443. ``None`` (the local mode's default, or
    ``LLM_KEY_HOSTS=any``) allows every origin.
    """
    key_hosts: dict[str, list[str]] | None = getattr(settings, "LLM_KEY_HOSTS", None)
    if not name or key_hosts is None:
        return None
    if not key_hosts:
        return (
            f"This server sends no API key to model endpoints until its operator lists, in "
            f"LLM_KEY_HOSTS, where each may go (e.g. {name}=https://api.example.com)."
        )
    allowed = key_hosts.get(name)
    if allowed is None:
        return f"{name} is not listed in the server's LLM_KEY_HOSTS."
    allowed_origins = [origin_of(entry) for entry in allowed]
    try:
        origin = origin_of(base_url)
    except ValueError:
        origin = None
    if origin not in allowed_origins:
        return (
            f"{name} may only be sent to {', '.join(allowed_origins)}, "
            f"not to {origin or 'this address'}."
        )
    return None


MAX_CONCURRENCY_LIMIT = 256


def validate_base_url(value: str) -> None:
    """An http(s) URL with a host, no query string or fragment, that may be reached from the
    server (see ``apps.llm.network``). Hosts without a dot (``vllm``) are fine."""
    refusal = base_url_refusal(value)
    if refusal:
        raise ValidationError(refusal)


def validate_env_var_name(value: str) -> None:
    if value and not ENV_VAR_NAME.match(value):
        raise ValidationError(
            "Enter the NAME of an environment variable (letters, digits and underscores, "
            "e.g. OPENAI_API_KEY), never the key itself."
        )
    if value and not api_key_env_allowed(value):
        raise ValidationError(
            f"The variable's name must end in {API_KEY_ENV_SUFFIX} (e.g. OPENAI_API_KEY): "
            "only API keys are ever sent to an endpoint, never the server's other settings."
        )


class ContextStrategy(models.TextChoices):
    """What a run does when its conversation would outgrow the model's context
    (``apps.runs.context``)."""

    DROP_TOOL_RESULTS = "drop_tool_results", "Drop old tool results, then old turns"
    SUMMARIZE = "summarize", "Summarize earlier turns with the model"


class ModelEndpoint(models.Model):
    """A named OpenAI-compatible endpoint: where to send chat requests and what they cost.

    The API key is never stored: ``api_key_env`` names the environment variable of the web
    and worker processes that holds it (blank for keyless local servers).
    """

    project = models.ForeignKey(
        "accounts.Project", on_delete=models.CASCADE, related_name="model_endpoints"
    )
    name = models.CharField(max_length=80)
    base_url = models.CharField(
        max_length=500,
        validators=[validate_base_url],
        help_text="The OpenAI-compatible base URL, usually ending in /v1.",
    )
    model = models.CharField(max_length=200, help_text="The model name sent with each request.")
    api_key_env = models.CharField(
        "API key environment variable",
        max_length=100,
        blank=True,
        validators=[validate_env_var_name],
        help_text="The NAME of the server's environment variable holding the key, e.g. "
        "OPENAI_API_KEY. Leave blank for a local server that needs no key.",
    )
    temperature = models.FloatField(
        default=0.7, validators=[MinValueValidator(0.0), MaxValueValidator(2.0)]
    )
    max_tokens = models.PositiveIntegerField(
        default=4096, validators=[MinValueValidator(1), MaxValueValidator(1_000_000)]
    )
    request_timeout_s = models.FloatField(
        "request timeout (seconds)",
        default=120.0,
        validators=[MinValueValidator(0.1), MaxValueValidator(3600.0)],
    )
    max_concurrency = models.PositiveIntegerField(
        "max concurrent requests",
        default=4,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_CONCURRENCY_LIMIT)],
        help_text="Shared by every worker on every machine.",
    )
    price_input_per_million = models.DecimalField(
        "price per million input tokens",
        max_digits=12,
        decimal_places=4,
        default=Decimal("0"),
        validators=[MinValueValidator(Decimal("0"))],
    )
    price_output_per_million = models.DecimalField(
        "price per million output tokens",
        max_digits=12,
        decimal_places=4,
        default=Decimal("0"),
        validators=[MinValueValidator(Decimal("0"))],
    )
    context_tokens = models.PositiveIntegerField(
        "context length (tokens)",
        default=0,
        validators=[MaxValueValidator(10_000_000)],
        help_text="The model's context window. 0 = unknown: requests are sent whole. When set, "
        "a run's requests are shortened to fit it, leaving max tokens for the answer.",
    )
    context_strategy = models.CharField(
        "when the context is full",
        max_length=24,
        choices=ContextStrategy.choices,
        default=ContextStrategy.DROP_TOOL_RESULTS,
    )
    keep_tool_results = models.PositiveSmallIntegerField(
        "tool results kept whole",
        default=4,
        validators=[MaxValueValidator(1000)],
        help_text="When the context is full, the last this many tool results are sent whole.",
    )
    served_address = models.CharField(
        max_length=64,
        blank=True,
        editable=False,
        help_text="The ip:port of the model server the app started for this endpoint "
        "(apps.serving), which it may reach though the address is not public. Set by the "
        "serving app only, never by a form or the API.",
    )
    supports_json_schema = models.BooleanField(
        "supports JSON Schema output",
        default=False,
        help_text='Send response_format={"type": "json_schema", …} for structured output. '
        "Otherwise JSON is requested in the prompt and extracted from the text.",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "id"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="model_endpoint_unique_name"),
            models.CheckConstraint(
                condition=Q(max_concurrency__gte=1), name="model_endpoint_concurrency_positive"
            ),
            models.CheckConstraint(
                condition=Q(request_timeout_s__gt=0), name="model_endpoint_timeout_positive"
            ),
            models.CheckConstraint(
                condition=Q(price_input_per_million__gte=0, price_output_per_million__gte=0),
                name="model_endpoint_prices_non_negative",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def clean_fields(self, exclude=None) -> None:
        """The base URL of a served endpoint is checked with its served address allowed."""
        if self.served_address:
            exclude = {*(exclude or ()), "base_url"}
            refusal = base_url_refusal(self.base_url, served=self.served_address)
            if refusal:
                raise ValidationError({"base_url": refusal})
        super().clean_fields(exclude=exclude)

    def clean(self) -> None:
        refusal = api_key_host_refusal(self.api_key_env, self.base_url)
        if refusal:
            raise ValidationError({"api_key_env": refusal})
        if self.context_tokens and self.max_tokens and self.context_tokens <= self.max_tokens:
            raise ValidationError(
                {
                    "context_tokens": f"The context length must exceed max tokens "
                    f"({self.max_tokens:,}): the answer needs room in it."
                }
            )

    def cost_of(self, tokens_in: int, tokens_out: int) -> Decimal:
        """The price of one request, from this endpoint's prices per million tokens."""
        cost = (
            Decimal(tokens_in) * self.price_input_per_million
            + Decimal(tokens_out) * self.price_output_per_million
        ) / Decimal(1_000_000)
        return cost.quantize(Decimal("0.000001"))


class EndpointSlot(models.Model):
    """One of an endpoint's ``max_concurrency`` request slots, leased by one request at a time.

    Held while a request is in flight; a lease that outlives its request (a killed worker)
    expires and the slot can be claimed again.
    """

    endpoint = models.ForeignKey(ModelEndpoint, on_delete=models.CASCADE, related_name="slots")
    index = models.PositiveIntegerField()
    holder = models.CharField(max_length=64, blank=True, db_index=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    acquired_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["endpoint_id", "index"]
        constraints = [
            models.UniqueConstraint(fields=["endpoint", "index"], name="endpoint_slot_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.endpoint_id}#{self.index} ({self.holder or 'free'})"


class LLMCallStatus(models.TextChoices):
    OK = "ok", "OK"
    RETRYING = "retrying", "Failed, retried"
    ERROR = "error", "Error"


class LLMCall(models.Model):
    """One request attempt to a model endpoint, written whether it succeeded or not."""

    project = models.ForeignKey("accounts.Project", on_delete=models.CASCADE, related_name="+")
    endpoint = models.ForeignKey(
        ModelEndpoint, null=True, blank=True, on_delete=models.SET_NULL, related_name="calls"
    )
    endpoint_name = models.CharField(max_length=80, help_text="Kept if the endpoint is deleted.")
    model = models.CharField(max_length=200)
    job = models.ForeignKey(
        "core.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="llm_calls"
    )
    purpose = models.CharField(max_length=64, db_index=True)
    group = models.UUIDField(default=uuid.uuid4, help_text="Shared by the attempts of one request.")
    attempt = models.PositiveSmallIntegerField(default=1)
    status = models.CharField(max_length=16, choices=LLMCallStatus.choices)
    request_messages = models.JSONField(default=list)
    request_params = models.JSONField(default=dict)
    response = models.JSONField(default=dict, blank=True)
    http_status = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    tokens_in = models.PositiveIntegerField(default=0)
    tokens_out = models.PositiveIntegerField(default=0)
    latency_ms = models.PositiveIntegerField(default=0)
    cost = models.DecimalField(max_digits=14, decimal_places=6, default=Decimal("0"))
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "LLM call"
        indexes = [
            models.Index(fields=["job", "created_at"], name="llm_call_job"),
            models.Index(fields=["endpoint", "-created_at"], name="llm_call_endpoint"),
            models.Index(fields=["project", "-created_at"], name="llm_call_project"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=[choice.value for choice in LLMCallStatus]),
                name="llm_call_status_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.purpose} #{self.attempt} ({self.status})"


class ProjectJudge(models.Model):
    """The project's LLM judge: the model endpoint that scores ``judge`` graders in its runs,
    re-grades and validations (a run batch may name another). No row: judge graders are
    skipped."""

    project = models.OneToOneField(
        "accounts.Project", on_delete=models.CASCADE, related_name="judge_setting"
    )
    endpoint = models.ForeignKey(
        ModelEndpoint, on_delete=models.CASCADE, related_name="judge_for_projects"
    )
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"judge of {self.project_id}: {self.endpoint_id}"


class JudgeVerdict(models.Model):
    """A judge's answer, cached by (rubric, evidence hash, judge model) within a project, so
    re-grading the same evidence (curation re-grades, replays, validation) costs no call."""

    project = models.ForeignKey("accounts.Project", on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=64, help_text="sha256 of rubric, evidence hash and model.")
    rubric = models.TextField()
    evidence_hash = models.CharField(max_length=64)
    model = models.CharField(max_length=200)
    score = models.FloatField(validators=[MinValueValidator(0.0), MaxValueValidator(1.0)])
    reasoning = models.TextField(blank=True)
    llm_call = models.ForeignKey(
        "llm.LLMCall", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    hits = models.PositiveIntegerField(default=0, help_text="Gradings answered from this row.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "key"], name="judge_verdict_unique_key"),
            models.CheckConstraint(
                condition=Q(score__gte=0.0) & Q(score__lte=1.0), name="judge_verdict_score_range"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.model}: {self.score:g}"
