"""Reads for model endpoints and the LLM call log."""

from decimal import Decimal

from django.db.models import Avg, Count, Q, QuerySet, Sum
from django.db.models.functions import Coalesce

from apps.core.models import Job
from apps.llm.models import JudgeVerdict, LLMCall, LLMCallStatus, ModelEndpoint, ProjectJudge

_ZERO_COST = Decimal("0")


def endpoint_list(*, project) -> QuerySet[ModelEndpoint]:
    """The project's endpoints, each with its call totals (one query)."""
    return (
        ModelEndpoint.objects.filter(project=project)
        .select_related("created_by")
        .annotate(
            call_count=Count("calls"),
            tokens_in_total=Coalesce(Sum("calls__tokens_in"), 0),
            tokens_out_total=Coalesce(Sum("calls__tokens_out"), 0),
            cost_total=Coalesce(Sum("calls__cost"), _ZERO_COST),
        )
        .order_by("name", "id")
    )


def endpoint_last_test(*, endpoint) -> Job | None:
    """The endpoint's latest "Test connection" job, if any."""
    from apps.llm.services import ENDPOINT_TEST_KIND

    return (
        Job.objects.filter(
            project_id=endpoint.project_id,
            kind=ENDPOINT_TEST_KIND,
            params__endpoint_id=endpoint.pk,
        )
        .order_by("-created_at", "-id")
        .first()
    )


def llm_call_list(*, endpoint=None, job=None, status: str = "") -> QuerySet[LLMCall]:
    calls = LLMCall.objects.select_related("endpoint", "job")
    if endpoint is not None:
        calls = calls.filter(endpoint=endpoint)
    if job is not None:
        calls = calls.filter(job=job)
    if status in LLMCallStatus.values:
        calls = calls.filter(status=status)
    return calls.order_by("-created_at", "-id")


def llm_call_totals(*, endpoint=None, job=None) -> dict:
    """Calls, outcomes, tokens, cost and mean latency of successful calls."""
    calls = LLMCall.objects.all()
    if endpoint is not None:
        calls = calls.filter(endpoint=endpoint)
    if job is not None:
        calls = calls.filter(job=job)
    totals = calls.aggregate(
        calls=Count("id"),
        ok=Count("id", filter=Q(status=LLMCallStatus.OK)),
        retried=Count("id", filter=Q(status=LLMCallStatus.RETRYING)),
        errors=Count("id", filter=Q(status=LLMCallStatus.ERROR)),
        tokens_in=Coalesce(Sum("tokens_in"), 0),
        tokens_out=Coalesce(Sum("tokens_out"), 0),
        cost=Coalesce(Sum("cost"), _ZERO_COST),
        latency_ms_avg=Avg("latency_ms", filter=Q(status=LLMCallStatus.OK)),
    )
    if totals["latency_ms_avg"] is not None:
        totals["latency_ms_avg"] = round(totals["latency_ms_avg"])
    return totals


def project_judge_get(*, project) -> ProjectJudge | None:
    return (
        ProjectJudge.objects.select_related("endpoint", "updated_by")
        .filter(project=project)
        .first()
    )


def judge_verdict_totals(*, project) -> dict:
    """Cached judge verdicts of the project and how many gradings they answered."""
    return JudgeVerdict.objects.filter(project=project).aggregate(
        verdicts=Count("id"), hits=Coalesce(Sum("hits"), 0)
    )
