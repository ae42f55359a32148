"""Where drafts come from: the offline template generator, or an LLM (draft and repair).

Drafting is single-shot: one request asks for the whole document, and validation problems
drive repair requests; long tasks (5+ turns) are drafted in stages instead
(``services/staged.py``). See ``apps/synthesis/README.md`` for why and the measurements.
"""

import json
from dataclasses import dataclass, field
from decimal import Decimal

from apps.capabilities.models import Capability
from apps.environments.attachments import attachment_save
from apps.llm.client import llm_chat, parse_json_answer
from apps.llm.exceptions import LLMError, LLMOutputError
from apps.synthesis.generators import RECEIPTS_FAMILY, generate_environment
from apps.synthesis.generators.receipts import generate_receipts_environment
from apps.synthesis.models import SynthesisAttempt, SynthesisJob, SynthesisSlot
from apps.synthesis.services.prompts import render_draft, render_repair, render_system
from coworkenv_engine.spec import spec_json_schema
from coworkenv_engine.spec_model import EnvironmentSpec

MAX_AVOID_NAMES = 20
MAX_RAW_ANSWER_CHARS = 200_000
MAX_PREVIOUS_TEXT_CHARS = 60_000


@dataclass
class Answer:
    """One answer (or failure) to be stored as a SynthesisAttempt."""

    document: dict | None = None
    raw_text: str = ""
    error: str = ""
    truncated: bool = False
    report: dict | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    latency_ms: int = 0
    validation_ms: int = 0
    cost: Decimal = Decimal("0")
    call_ids: list[int] = field(default_factory=list)
    model: str = ""
    spec: EnvironmentSpec | None = None  # built by validation when the schema passed

    @classmethod
    def from_output_error(cls, exc: LLMOutputError) -> "Answer":
        result = exc.result
        return cls(
            raw_text=((result.content if result else "") or "")[:MAX_RAW_ANSWER_CHARS],
            error=exc.message,
            truncated=exc.truncated,
            tokens_in=result.tokens_in if result else 0,
            tokens_out=result.tokens_out if result else 0,
            latency_ms=result.latency_ms if result else 0,
            cost=result.cost if result else Decimal("0"),
            call_ids=[exc.call_id] if exc.call_id else [],
            model=result.model if result else "",
        )

    @classmethod
    def failure(cls, exc: LLMError) -> "Answer":
        return cls(error=exc.message, call_ids=[exc.call_id] if exc.call_id else [])


def draft_with_template(*, synthesis: SynthesisJob, slot: SynthesisSlot) -> Answer:
    """The seeded template generator: seed = job seed + slot index, no LLM.

    A family with files (``receipts``) stores them by hash here, before validation checks
    the document against the stored files: the same seed draws the same bytes, so a slot
    drafted twice stores nothing new, and the environment the slot imports lists only files
    that are there."""
    if synthesis.family == RECEIPTS_FAMILY:
        document, files = generate_receipts_environment(
            seed=slot.seed, tasks=synthesis.tasks_per_environment
        )
        for sha256, data in files.items():
            attachment_save(sha256, data)
        return Answer(document=document, model="template")
    document = generate_environment(
        family=synthesis.family or None,
        seed=slot.seed,
        capabilities=list(synthesis.capability_slugs),
        services=list(synthesis.services) or None,
        tasks_per_environment=synthesis.tasks_per_environment,
        turns=(synthesis.turns_min, synthesis.turns_max),
        difficulty=synthesis.difficulty,
        horizon=synthesis.horizon,
    )
    return Answer(document=document, model="template")


def capability_context(synthesis: SynthesisJob) -> list[dict]:
    by_slug = {
        capability.slug: capability
        for capability in Capability.objects.filter(
            project_id=synthesis.project_id, slug__in=synthesis.capability_slugs
        )
    }
    context = []
    for slug in synthesis.capability_slugs:
        capability = by_slug.get(slug)
        if capability is None:
            context.append({"slug": slug, "name": slug, "description": "", "guidance": ""})
            continue
        context.append(
            {
                "slug": slug,
                "name": capability.name,
                "description": capability.description,
                "guidance": capability.guidance,
                "examples": [str(example) for example in capability.examples or []],
            }
        )
    return context


def _avoid_names(synthesis: SynthesisJob, slot: SynthesisSlot) -> list[str]:
    names = (
        SynthesisSlot.objects.filter(synthesis=synthesis, environment__isnull=False)
        .exclude(pk=slot.pk)
        .order_by("index")
        .values_list("environment__name", flat=True)[:MAX_AVOID_NAMES]
    )
    return list(names)


def draft_messages(
    *, synthesis: SynthesisJob, slot: SynthesisSlot, previous: SynthesisAttempt | None
) -> list[dict]:
    """The conversation for the next round: system + draft request, and for a repair the
    previous answer and what was wrong with it."""
    version = synthesis.prompt_version
    messages = [
        {"role": "system", "content": render_system(version)},
        {
            "role": "user",
            "content": render_draft(
                version,
                capabilities=capability_context(synthesis),
                services=list(synthesis.services),
                tasks_per_environment=synthesis.tasks_per_environment,
                turns=(synthesis.turns_min, synthesis.turns_max),
                difficulty=synthesis.difficulty,
                domain_hint=synthesis.domain_hint,
                scenario_hint=synthesis.scenario_hint,
                index=slot.index,
                count=synthesis.count,
                seed=slot.seed,
                avoid_names=_avoid_names(synthesis, slot),
            ),
        },
    ]
    if previous is None:
        return messages
    if previous.document is not None:
        previous_text = json.dumps(previous.document, separators=(",", ":"), ensure_ascii=False)
        repair = render_repair(
            version,
            round=previous.round + 1,
            max_rounds=synthesis.max_repair_rounds,
            report=previous.report,
        )
    else:
        previous_text = previous.raw_text
        repair = render_repair(
            version,
            round=previous.round + 1,
            max_rounds=synthesis.max_repair_rounds,
            parse_error=previous.error or "it is not a JSON object.",
            truncated="truncated" in previous.error or "cut off" in previous.error,
        )
    messages.append({"role": "assistant", "content": previous_text[:MAX_PREVIOUS_TEXT_CHARS]})
    messages.append({"role": "user", "content": repair})
    return messages


def draft_with_llm(
    *, synthesis: SynthesisJob, slot: SynthesisSlot, previous: SynthesisAttempt | None
) -> Answer:
    """One request: a draft (no previous attempt) or a repair of ``previous``.

    Raises LLMOutputError (the answer is no JSON object) or another LLMError (the endpoint
    failed after the client's retries).
    """
    if synthesis.endpoint is None:
        raise LLMError(
            "The job's model endpoint was deleted; start a new job with another endpoint."
        )
    result = llm_chat(
        endpoint=synthesis.endpoint,
        messages=draft_messages(synthesis=synthesis, slot=slot, previous=previous),
        purpose="synthesis.draft" if previous is None else "synthesis.repair",
        job=synthesis.job,
        response_schema=spec_json_schema(),
        schema_name="coworkenv_environment",
        describe_schema=False,  # the draft prompt already carries the schema
    )
    document = parse_json_answer(result)
    return Answer(
        document=document,
        tokens_in=result.tokens_in,
        tokens_out=result.tokens_out,
        latency_ms=result.latency_ms,
        cost=result.cost,
        call_ids=[result.call_id],
        model=result.model,
    )
