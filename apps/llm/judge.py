"""The LLM judge: scores a ``judge`` grader's rubric against a run's conversation and the
server-side evidence (the audit log of tool calls with the state changes they made), which
the agent cannot fake by what it says.

``LLMJudge`` is the engine's ``Judge`` callable (``(rubric, context) -> {score, reasoning}``),
asking the engine's question (``coworkenv_engine.judging``: the prompt and the verdict's shape)
of a model endpoint through the one LLM client (retries, concurrency slots, call log).
Answers are cached in ``JudgeVerdict`` by (rubric, evidence hash, judge model) per project,
so re-grading the same evidence makes no call. An ``LLMError`` (the endpoint stayed down
after the client's retries, or answered no usable verdict) is kept in ``outage`` and
re-raised; the engine records the check as failed with that error, and callers must look at
``outage`` and treat the whole grading as errored — never as the agent's failure.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F

from apps.llm.client import LLMResult, llm_json
from apps.llm.exceptions import LLMError, LLMOutputError
from apps.llm.models import JudgeVerdict, ModelEndpoint
from apps.llm.selectors import project_judge_get
from coworkenv_engine.judging import (
    REASONING_MAX,
    VERDICT_SCHEMA,
    canonical,
    judge_evidence,
    judge_messages,
)

JUDGE_PURPOSE = "judge.grade"


def evidence_hash(evidence: dict[str, Any]) -> str:
    return hashlib.sha256(canonical(evidence).encode()).hexdigest()


def cache_key(rubric: str, evidence_digest: str, model: str) -> str:
    return hashlib.sha256(canonical([rubric, evidence_digest, model]).encode()).hexdigest()


class LLMJudge:
    """The engine's judge for one project, backed by ``endpoint``. Counts its LLM calls and
    cache hits; ``on_result`` (e.g. a run's usage meter) sees every model answer."""

    def __init__(
        self,
        *,
        endpoint: ModelEndpoint,
        project_id: int,
        job=None,
        on_result: Callable[[LLMResult], None] | None = None,
        before_call: Callable[[], None] | None = None,
    ):
        self.endpoint = endpoint
        self.project_id = project_id
        self.job = job
        self.on_result = on_result
        self.before_call = before_call
        self.calls = 0
        self.cache_hits = 0
        self.outage: LLMError | None = None
        # what ``before_call`` raised (the engine contains a judge's exceptions, so callers
        # must re-raise this themselves)
        self.interrupted: Exception | None = None

    @property
    def model(self) -> str:
        return self.endpoint.model

    def __call__(self, rubric: str, context: dict[str, Any]) -> dict[str, Any]:
        evidence = judge_evidence(context)
        digest = evidence_hash(evidence)
        key = cache_key(rubric, digest, self.model)
        cached = JudgeVerdict.objects.filter(project_id=self.project_id, key=key).first()
        if cached is not None:
            JudgeVerdict.objects.filter(pk=cached.pk).update(hits=F("hits") + 1)
            self.cache_hits += 1
            return self._answer(cached, cached=True)
        if self.outage is not None:  # one outage is enough: do not wait on retries again
            raise self.outage
        if self.interrupted is not None:
            raise self.interrupted
        try:
            score, reasoning, result = self._ask(rubric, evidence)
        except LLMError as exc:
            self.outage = exc
            raise
        row = JudgeVerdict(
            project_id=self.project_id,
            key=key,
            rubric=rubric,
            evidence_hash=digest,
            model=self.model,
            score=score,
            reasoning=reasoning,
            llm_call_id=result.call_id,
        )
        row.full_clean(exclude=["project", "llm_call"])
        try:
            with transaction.atomic():
                row.save()
        except IntegrityError:  # another worker judged the same evidence meanwhile
            row = JudgeVerdict.objects.get(project_id=self.project_id, key=key)
        return self._answer(row, cached=False)

    def _ask(self, rubric: str, evidence: dict[str, Any]) -> tuple[float, str, LLMResult]:
        if self.before_call is not None:
            try:
                self.before_call()
            except Exception as exc:  # e.g. the run was cancelled: the caller re-raises it
                self.interrupted = exc
                raise
        self.calls += 1
        out = llm_json(
            endpoint=self.endpoint,
            messages=judge_messages(rubric, evidence),
            purpose=JUDGE_PURPOSE,
            schema=VERDICT_SCHEMA,
            schema_name="verdict",
            job=self.job,
            temperature=0,
            reask=1,
        )
        if self.on_result is not None:
            for result in out.results:
                self.on_result(result)
        score = out.data.get("score")
        reasoning = out.data.get("reasoning")
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not 0 <= score <= 1:
            raise LLMOutputError(
                f"Unusable verdict (LLM call #{out.result.call_id}): the score must be a number "
                f"from 0 to 1, not {canonical(score)[:40]}.",
                detail="score out of range",
                result=out.result,
                call_id=out.result.call_id,
            )
        if not isinstance(reasoning, str):
            reasoning = "" if reasoning is None else canonical(reasoning)
        return float(score), reasoning[:REASONING_MAX], out.result

    def _answer(self, row: JudgeVerdict, *, cached: bool) -> dict[str, Any]:
        return {
            "score": row.score,
            "reasoning": row.reasoning,
            "cached": cached,
            "model": row.model,
            "verdict_id": row.pk,
        }


def project_judge_endpoint(*, project) -> ModelEndpoint | None:
    setting = project_judge_get(project=project)
    return setting.endpoint if setting is not None else None


def judge_for_project(*, project, job=None, endpoint: ModelEndpoint | None = None):
    """An ``LLMJudge`` on ``endpoint`` (default: the project's judge), or None without one."""
    endpoint = endpoint or project_judge_endpoint(project=project)
    if endpoint is None:
        return None
    return LLMJudge(endpoint=endpoint, project_id=project.pk, job=job)
