"""One slot = one requested environment: claim it, draft, validate, repair, save.

At-least-once delivery is assumed. A worker *claims* a slot with a conditional UPDATE that
writes a fresh token; only the holder of that token may store attempts or finish the slot,
and every such write is itself conditional on the token (a fence). A background thread
renews the lease (``heartbeat_at``) while the slot is worked on, so a claim whose worker
died expires after ``JOB_STALE_AFTER_S`` and the slot can be taken over; the new holder
resumes from the attempts already stored. The environment is created in the same
transaction that marks the slot finished, and ``SynthesisSlot.environment`` is one-to-one:
no retry, redelivery or takeover can make a second environment for a slot. A slot whose
worker died is sent again by the sweeper (``synthesis_sweep``); one whose worker died
``JOB_MAX_CLAIMS`` times is failed rather than tried forever.
"""

import logging
import time
from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Case, F, Value, When
from django.utils import timezone

from apps.accounts.models import Project
from apps.core.claims import Claim
from apps.core.leases import TRANSIENT_DB_ERRORS, max_claims, worker_name
from apps.core.models import ACTIVE_JOB_STATUSES, Job
from apps.environments.attachments import attachment_bytes
from apps.environments.models import EnvironmentSource
from apps.environments.services import environment_import, environment_validation_record
from apps.llm.exceptions import LLMError, LLMOutputError
from apps.synthesis.models import (
    FINISHED_SLOT_STATUSES,
    AttemptKind,
    Generator,
    SlotStatus,
    SynthesisAttempt,
    SynthesisJob,
    SynthesisSlot,
)
from apps.synthesis.services import staged
from apps.synthesis.services.drafting import Answer, draft_with_llm, draft_with_template
from apps.synthesis.services.duplicates import duplicate_find, signature_store, signatures_refresh
from apps.synthesis.services.jobs import SLOTS, synthesis_mark_running, synthesis_refresh
from apps.synthesis.services.staged import drafts_in_stages
from apps.synthesis.similarity import DUPLICATE_THRESHOLD, document_sketch
from coworkenv_engine import spec as engine_spec
from coworkenv_engine.problems import SpecError
from coworkenv_engine.validation import validate_spec

logger = logging.getLogger(__name__)


class SlotLost(Exception):
    """Another worker took the slot over (this one was presumed dead)."""


class SlotCancelled(Exception):
    """The job was cancelled; stop at this checkpoint."""


class SlotKilled(Exception):
    """The slot's workers died too many times while holding it."""


def slot_claim(*, slot_id: int, worker: str = "") -> tuple[SynthesisSlot, Claim] | None:
    """Claim a slot that is not started, or whose holder's lease expired; None otherwise."""
    drafting = Case(
        When(status=SlotStatus.REQUESTED, then=Value(SlotStatus.DRAFTING)), default=F("status")
    )
    claim = SLOTS.claim(slot_id, worker=worker, status=drafting)
    if claim is None:
        return None
    slot = SynthesisSlot.objects.select_related(
        "synthesis__job", "synthesis__endpoint", "synthesis__project", "synthesis__created_by"
    ).get(pk=slot_id)
    return slot, claim


class SlotLease:
    """The slot's claim, checkpoints that fence every write, and its heartbeat."""

    def __init__(self, slot: SynthesisSlot, claim: Claim):
        self.slot = slot
        self.claim = claim
        self.lost = False
        self._heartbeat = claim.heartbeat(f"synthesis slot {slot.pk}")

    def checkpoint(self) -> None:
        """Renew the lease; raise SlotLost if it was taken over, SlotCancelled on cancel."""
        self.lost = self.lost or self._heartbeat.lost
        if self.lost or not self.claim.renew():
            self.lost = True
            raise SlotLost
        job = Job.objects.filter(pk=self.slot.synthesis.job_id).values("status", "cancel_requested")
        job = job.first()
        if job is None or job["cancel_requested"] or job["status"] not in ACTIVE_JOB_STATUSES:
            raise SlotCancelled

    def set_status(self, status: str) -> None:
        if not self.claim.renew(status=status):
            self.lost = True
            raise SlotLost
        self.slot.status = status

    def __enter__(self) -> "SlotLease":
        self._heartbeat.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._heartbeat.__exit__(*exc)


@dataclass
class Final:
    """What a slot ends with."""

    status: str
    attempt: SynthesisAttempt | None = None
    error: str = ""


def synthesis_slot_run(*, slot_id: int, worker: str | None = None) -> str:
    """Claim and work one slot to its end. Returns what happened (for logs and the CLI)."""
    claimed = slot_claim(slot_id=slot_id, worker=worker or worker_name())
    if claimed is None:
        finished = SynthesisSlot.objects.filter(pk=slot_id, status__in=FINISHED_SLOT_STATUSES)
        synthesis = SynthesisJob.objects.filter(slots__in=finished).first()
        if synthesis is not None:
            # A redelivered message of a finished slot: make sure its job counted it (the
            # first delivery may have died between finishing the slot and the refresh).
            synthesis_refresh(synthesis=synthesis)
        return "skipped"
    slot, claim = claimed
    synthesis = slot.synthesis
    lease = SlotLease(slot, claim)
    outcome = "lost"
    try:
        with lease:
            if slot.claims > max_claims():
                raise SlotKilled(slot.claims - 1)
            lease.checkpoint()
            synthesis_mark_running(synthesis=synthesis)
            final = _produce(slot, lease)
            outcome = _finish(slot, lease, final)
    except TRANSIENT_DB_ERRORS:
        # the slot is claimable at once and resumes from its stored attempts
        claim.give_back()
        raise
    except SlotKilled as exc:
        outcome = _finish(
            slot,
            lease,
            Final(
                SlotStatus.FAILED,
                error=f"Its worker stopped {exc.args[0]} times while working on it (killed, "
                "perhaps for lack of memory); it was not started again.",
            ),
            fenced_only=True,
        )
    except SlotLost:
        logger.warning("Synthesis slot %s was taken over by another worker.", slot_id)
    except SlotCancelled:
        outcome = _finish(
            slot,
            lease,
            Final(SlotStatus.CANCELLED, error="Cancelled; the attempts so far are kept."),
            fenced_only=True,
        )
    except Exception:
        logger.exception("Synthesis slot %s failed", slot_id)
        outcome = _finish(
            slot,
            lease,
            Final(SlotStatus.FAILED, error="An unexpected error stopped this slot; see the log."),
            fenced_only=True,
        )
    synthesis_refresh(synthesis=synthesis)
    return outcome


def _produce(slot: SynthesisSlot, lease: SlotLease) -> Final:
    """Draft and repair until valid or out of rounds, resuming from stored attempts."""
    synthesis = slot.synthesis
    if drafts_in_stages(synthesis):
        return _produce_staged(slot, lease)
    attempts = list(slot.attempts.order_by("round"))
    max_round = synthesis.max_repair_rounds if synthesis.generator == Generator.LLM else 0
    while True:
        last = attempts[-1] if attempts else None
        if last is not None and (last.valid or last.round >= max_round):
            return _final_from(attempts)
        next_round = 0 if last is None else last.round + 1
        if next_round > 0 and slot.status != SlotStatus.REPAIRING:
            lease.set_status(SlotStatus.REPAIRING)
        lease.checkpoint()
        try:
            if synthesis.generator == Generator.TEMPLATE:
                answer = draft_with_template(synthesis=synthesis, slot=slot)
            else:
                answer = draft_with_llm(synthesis=synthesis, slot=slot, previous=last)
        except LLMOutputError as exc:
            answer = Answer.from_output_error(exc)
        except LLMError as exc:
            _store_attempt(slot, lease, next_round, Answer.failure(exc))
            return Final(SlotStatus.FAILED, error=exc.message)
        except ValueError as exc:  # the template generator refused the arguments
            return Final(SlotStatus.FAILED, error=f"The template generator refused: {exc}")
        lease.checkpoint()
        if answer.document is not None:
            started = time.monotonic()
            # Listed attachments are checked against the stored files (hash, size, type).
            report = validate_spec(
                answer.document,
                attachments=attachment_bytes,
                time_budget=settings.VALIDATION_TIME_BUDGET_S,
            )
            answer.report = report.to_dict()
            answer.spec = report.spec
            answer.validation_ms = round((time.monotonic() - started) * 1000)
        attempts.append(_store_attempt(slot, lease, next_round, answer))


def _produce_staged(slot: SynthesisSlot, lease: SlotLease) -> Final:
    """Long tasks: outline, each turn, graders, then the whole (``services/staged.py``);
    each step repaired on its own, resuming at the step the stored attempts reached."""
    synthesis = slot.synthesis
    attempts = list(slot.attempts.order_by("round"))
    while True:
        next_ = staged.plan(attempts, synthesis.max_repair_rounds)
        if next_ is None:
            return _final_from(attempts)
        next_round = len(attempts)
        if next_.repair and slot.status != SlotStatus.REPAIRING:
            lease.set_status(SlotStatus.REPAIRING)
        lease.checkpoint()
        if next_.step == staged.FINAL:
            answer = staged.final_check(next_.document)
        else:
            try:
                answer = staged.run_step(synthesis, slot, next_)
            except LLMError as exc:
                _store_attempt(slot, lease, next_round, Answer.failure(exc))
                return Final(SlotStatus.FAILED, error=exc.message)
        lease.checkpoint()
        attempts.append(_store_attempt(slot, lease, next_round, answer))


def _final_from(attempts: list[SynthesisAttempt]) -> Final:
    last = attempts[-1]
    if last.valid:
        return Final(SlotStatus.VALID, last)
    # Keep the latest draft that can be stored (schema-valid) for inspection.
    for attempt in reversed(attempts):
        if attempt.document is not None and _storable(attempt):
            rounds = len(attempts)
            return Final(
                SlotStatus.INVALID,
                attempt,
                error=f"Still invalid after {rounds} attempt{'s' if rounds != 1 else ''}: "
                f"{attempt.error_count} error{'s' if attempt.error_count != 1 else ''} "
                f"in round {attempt.round}.",
            )
    return Final(
        SlotStatus.FAILED,
        error=f"No usable draft in {len(attempts)} attempt{'s' if len(attempts) != 1 else ''}: "
        + (last.error or "the answers do not match the spec's JSON Schema."),
    )


def _storable(attempt: SynthesisAttempt) -> bool:
    """Schema-valid: validation built its typed spec (this process), or it dumps."""
    if getattr(attempt, "parsed_spec", None) is not None:
        return True
    try:
        engine_spec.canonical_dump(attempt.document)
    except SpecError:
        return False
    return True


def _store_attempt(
    slot: SynthesisSlot, lease: SlotLease, round_: int, answer: Answer
) -> SynthesisAttempt:
    report = answer.report
    problems = (report or {}).get("problems", [])
    attempt = SynthesisAttempt(
        slot=slot,
        round=round_,
        kind=AttemptKind.DRAFT if round_ == 0 else AttemptKind.REPAIR,
        document=answer.document,
        raw_text=answer.raw_text if answer.document is None else "",
        report=report,
        valid=None if report is None else bool(report["valid"]),
        error_count=sum(1 for p in problems if p.get("severity") == "error"),
        warning_count=sum(1 for p in problems if p.get("severity") == "warning"),
        tokens_in=answer.tokens_in,
        tokens_out=answer.tokens_out,
        latency_ms=answer.latency_ms,
        validation_ms=answer.validation_ms,
        cost=answer.cost,
        llm_call_ids=answer.call_ids,
        model=answer.model,
        prompt_version=slot.synthesis.prompt_version,
        error=answer.error,
    )
    try:
        with transaction.atomic():
            fenced = lease.claim.renew(
                attempts_count=F("attempts_count") + 1,
                repair_rounds=round_,
                tokens_in=F("tokens_in") + answer.tokens_in,
                tokens_out=F("tokens_out") + answer.tokens_out,
                cost=F("cost") + answer.cost,
                model=answer.model or F("model"),
            )
            if not fenced:
                raise SlotLost
            attempt.save()
    except IntegrityError:
        raise SlotLost from None  # another holder stored this round
    # In memory only: the typed spec validation built (schema passed), which the import
    # stores without a second schema pass. An attempt read back after a takeover has none.
    attempt.parsed_spec = answer.spec
    return attempt


def _finish(slot: SynthesisSlot, lease: SlotLease, final: Final, *, fenced_only=False) -> str:
    """Mark the slot finished and, for a storable draft, create its environment — in one
    transaction, fenced by the claim token."""
    synthesis = slot.synthesis
    now = timezone.now()
    lineage = {
        "endpoint_name": synthesis.endpoint_name,
        "prompt_version": synthesis.prompt_version,
    }
    if fenced_only or final.attempt is None:
        lease.lost = lease.lost or not lease.claim.finish(
            status=final.status, error=final.error, finished_at=now, **lineage
        )
        return "lost" if lease.lost else final.status
    document = final.attempt.document
    sketch, shingle_count = document_sketch(document)
    signatures_refresh(project=synthesis.project)
    with transaction.atomic():
        # One finishing slot per project at a time: on PostgreSQL two slots finishing at the
        # same moment would not see each other's signature and miss their near-duplicate.
        Project.objects.select_for_update().filter(pk=synthesis.project_id).first()
        if not lease.claim.finish(
            status=final.status, error=final.error, finished_at=now, **lineage
        ):
            raise SlotLost
        environment = environment_import(
            project=synthesis.project,
            spec=getattr(final.attempt, "parsed_spec", None) or document,
            user=synthesis.created_by,
            source=EnvironmentSource.SYNTHESIZED,
        )
        environment_validation_record(
            environment=environment, result=final.attempt.report, job=synthesis.job
        )
        other, similarity = duplicate_find(
            project=synthesis.project, sketch=sketch, exclude_environment=environment
        )
        signature_store(environment=environment, sketch=sketch, shingles=shingle_count)
        SynthesisSlot.objects.filter(pk=slot.pk).update(
            environment=environment,
            similarity=similarity if other is not None else None,
            duplicate_of=other if similarity >= DUPLICATE_THRESHOLD else None,
        )
    return final.status
