"""Writes for model endpoints: create, update, delete, and the "Test connection" job."""

from dataclasses import asdict, dataclass
from decimal import Decimal

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import ProtectedError, RestrictedError

from apps.core.exceptions import ApplicationError
from apps.core.models import Job
from apps.core.services import JobContext, job_create
from apps.llm.client import RetryPolicy, llm_chat
from apps.llm.concurrency import slots_sync
from apps.llm.exceptions import LLMError
from apps.llm.models import ModelEndpoint, ProjectJudge

EDITABLE_FIELDS = (
    "name",
    "base_url",
    "model",
    "api_key_env",
    "temperature",
    "max_tokens",
    "request_timeout_s",
    "max_concurrency",
    "price_input_per_million",
    "price_output_per_million",
    "supports_json_schema",
    "context_tokens",
    "context_strategy",
    "keep_tool_results",
)

TEST_PROMPT = "This is a connection test. Reply with the single word: pong"
# A connection test is a job on the llm queue; it waits at most this long for a free slot and
# for the answer, whatever the endpoint's own request timeout (which may be up to an hour).
TEST_TIMEOUT_CAP_S = 10.0
TEST_SLOT_WAIT_S = 10.0
ENDPOINT_TEST_KIND = "endpoint_test"


def _check_fields(fields: dict) -> None:
    unknown = set(fields) - set(EDITABLE_FIELDS)
    if unknown:
        raise TypeError(f"Not editable endpoint fields: {', '.join(sorted(unknown))}")


def _save(endpoint: ModelEndpoint) -> None:
    duplicate = ModelEndpoint.objects.filter(project_id=endpoint.project_id, name=endpoint.name)
    if endpoint.pk:
        duplicate = duplicate.exclude(pk=endpoint.pk)
    if duplicate.exists():
        raise ApplicationError(
            f"An endpoint called “{endpoint.name}” already exists in this project.",
            {"fields": {"name": ["An endpoint with this name already exists in this project."]}},
        )
    try:
        endpoint.full_clean()
    except ValidationError as exc:
        raise ApplicationError(
            "The endpoint settings are not valid.", {"fields": exc.message_dict}
        ) from None
    endpoint.save()
    slots_sync(endpoint=endpoint)


@transaction.atomic
def endpoint_create(
    *, project, created_by=None, served_address: str = "", **fields
) -> ModelEndpoint:
    """A new endpoint with its concurrency slots. ``fields``: any of ``EDITABLE_FIELDS``
    (``name``, ``base_url`` and ``model`` are required). ``served_address``: the ``ip:port``
    of a model server the app itself started (``apps.serving``), the one non-public address
    this endpoint may then reach; never taken from a form or the API."""
    _check_fields(fields)
    endpoint = ModelEndpoint(
        project=project, created_by=created_by, served_address=served_address, **fields
    )
    _save(endpoint)
    return endpoint


@transaction.atomic
def endpoint_update(*, endpoint: ModelEndpoint, **fields) -> ModelEndpoint:
    """Change some settings; changing ``max_concurrency`` adds or drops slots (a slot held
    above a lowered limit is dropped once its request ends)."""
    _check_fields(fields)
    endpoint = ModelEndpoint.objects.select_for_update().get(pk=endpoint.pk)
    for name, value in fields.items():
        setattr(endpoint, name, value)
    _save(endpoint)
    return endpoint


@transaction.atomic
def endpoint_delete(*, endpoint: ModelEndpoint) -> None:
    """Delete an endpoint. Its call log is kept (calls remember the endpoint's name)."""
    try:
        endpoint.delete()
        return
    except ProtectedError as exc:
        blockers = exc.protected_objects
    except RestrictedError as exc:
        blockers = exc.restricted_objects
    kinds = ", ".join(sorted({str(obj._meta.verbose_name_plural) for obj in blockers}))
    raise ApplicationError(f"“{endpoint.name}” is still used by {kinds}; it cannot be deleted.")


@dataclass(frozen=True)
class EndpointTestResult:
    ok: bool
    content: str | None = None
    model: str = ""
    latency_ms: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost: Decimal = Decimal("0")
    error: str = ""
    status_code: int | None = None
    call_id: int | None = None


def endpoint_test(*, endpoint: ModelEndpoint, job: Job | None = None) -> EndpointTestResult:
    """One tiny request, not retried and capped at ``TEST_TIMEOUT_CAP_S``, so the answer or
    the exact error shows quickly. Called by the "Test connection" job, never by a view."""
    try:
        result = llm_chat(
            endpoint=endpoint,
            messages=[{"role": "user", "content": TEST_PROMPT}],
            purpose="endpoint.test",
            job=job,
            max_tokens=min(endpoint.max_tokens, 16),
            retry=RetryPolicy.from_settings(max_attempts=1, slot_wait_s=TEST_SLOT_WAIT_S),
            timeout_s=min(float(endpoint.request_timeout_s), TEST_TIMEOUT_CAP_S),
        )
    except LLMError as exc:
        return EndpointTestResult(
            ok=False, error=exc.detail, status_code=exc.status, call_id=exc.call_id
        )
    return EndpointTestResult(
        ok=True,
        content=result.content,
        model=result.model,
        latency_ms=result.latency_ms,
        tokens_in=result.tokens_in,
        tokens_out=result.tokens_out,
        cost=result.cost,
        call_id=result.call_id,
    )


def endpoint_test_start(*, endpoint: ModelEndpoint, started_by) -> Job:
    """Queue a connection test as a job (the web request only creates the row)."""
    from apps.llm.tasks import check_endpoint_task

    return job_create(
        project=endpoint.project,
        kind=ENDPOINT_TEST_KIND,
        title=f"Test connection to “{endpoint.name}”",
        started_by=started_by,
        params={"endpoint_id": endpoint.pk},
        task=check_endpoint_task,
    )


def endpoint_test_run(context: JobContext) -> str:
    """The job's work: one test request; the outcome goes to ``job.result`` and the message.

    A failure of the endpoint fails the job with the exact error (it is the answer the
    person asked for, not a fault of the job).
    """
    job = context.job
    endpoint = ModelEndpoint.objects.filter(pk=job.params.get("endpoint_id")).first()
    if endpoint is None:
        raise ApplicationError("The endpoint was deleted before the test ran.")
    outcome = endpoint_test(endpoint=endpoint, job=job)
    result = {**asdict(outcome), "cost": str(outcome.cost)}
    Job.objects.filter(pk=job.pk).update(result=result)
    job.result = result
    call = f" (call #{outcome.call_id})" if outcome.call_id else ""
    if not outcome.ok:
        raise ApplicationError(f"It failed: {outcome.error}{call}")
    return (
        f"Connected. It answered “{outcome.content or ''}” · model {outcome.model} · "
        f"{outcome.latency_ms} ms · {outcome.tokens_in} tokens in, {outcome.tokens_out} out · "
        f"${outcome.cost:.6f}{call}."
    )


@transaction.atomic
def project_judge_set(*, project, endpoint: ModelEndpoint | None, user=None):
    """Choose the project's judge endpoint (None: no judge; judge graders are skipped).

    Returns the ``ProjectJudge`` row, or None once cleared. Batches made earlier keep the
    judge they were made with.
    """
    if endpoint is None:
        ProjectJudge.objects.filter(project=project).delete()
        return None
    if endpoint.project_id != project.pk:
        raise ApplicationError(
            "The judge's endpoint belongs to another project.",
            {"fields": {"endpoint": ["Choose an endpoint of this project."]}},
        )
    setting, _ = ProjectJudge.objects.select_for_update().get_or_create(
        project=project, defaults={"endpoint": endpoint, "updated_by": user}
    )
    setting.endpoint = endpoint
    setting.updated_by = user
    setting.full_clean()
    setting.save()
    return setting
