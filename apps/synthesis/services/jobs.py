"""Synthesis jobs: start, cancel, resume, and keep the core Job's progress and verdict."""

import random

from django.db import transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from apps.core.claims import Claimable
from apps.core.exceptions import ApplicationError
from apps.core.leases import stale_after
from apps.core.models import ACTIVE_JOB_STATUSES, Job, JobStatus
from apps.core.services import job_create, send_task
from apps.synthesis.generators import (
    GENERATOR_VERSION,
    MAX_RECEIPT_TASKS,
    RECEIPTS_FAMILY,
    TEMPLATE_FAMILY_CHOICES,
)
from apps.synthesis.models import (
    MAX_ENVIRONMENTS_PER_JOB,
    MAX_REPAIR_ROUNDS,
    MAX_TASKS_PER_ENVIRONMENT,
    MAX_TURNS,
    RUNNING_SLOT_STATUSES,
    Difficulty,
    Generator,
    Horizon,
    SlotStatus,
    SynthesisJob,
    SynthesisSlot,
)
from apps.synthesis.selectors import synthesis_summary
from apps.synthesis.services.prompts import CURRENT_PROMPT_VERSION
from coworkenv_engine import library

SYNTHESIS_JOB_KIND = "synthesis"
MAX_RESULT_LINKS = 50


# A slot is claimed when requested, or taken over when its holder stopped heartbeating.
SLOTS = Claimable(
    SynthesisSlot,
    waiting=Q(status=SlotStatus.REQUESTED),
    held=Q(status__in=RUNNING_SLOT_STATUSES),
)


def _field_error(field: str, message: str) -> ApplicationError:
    return ApplicationError(message, {"fields": {field: [message]}})


def _check_inputs(
    *,
    project,
    capabilities,
    count,
    generator,
    endpoint,
    services,
    tasks_per_environment,
    turns,
    difficulty,
    max_repair_rounds,
    horizon=Horizon.SHORT,
    family="",
) -> None:
    _check_capabilities(project, capabilities)
    if not 1 <= count <= MAX_ENVIRONMENTS_PER_JOB:
        raise _field_error(
            "count", f"Ask for between 1 and {MAX_ENVIRONMENTS_PER_JOB} environments."
        )
    _check_generator(project, generator, endpoint)
    unknown = [s for s in services if s not in library.KINDS]
    if unknown:
        raise _field_error(
            "services",
            f"Unknown service {', '.join(unknown)}; the standard ones are "
            f"{', '.join(library.KINDS)}.",
        )
    if not 1 <= tasks_per_environment <= MAX_TASKS_PER_ENVIRONMENT:
        raise _field_error(
            "tasks_per_environment",
            f"Ask for between 1 and {MAX_TASKS_PER_ENVIRONMENT} tasks per environment.",
        )
    low, high = turns
    if not 1 <= low <= high <= MAX_TURNS:
        raise _field_error("turns_max", f"The turn range must satisfy 1 ≤ from ≤ to ≤ {MAX_TURNS}.")
    if difficulty not in Difficulty.values:
        raise _field_error("difficulty", f"Choose a difficulty: {', '.join(Difficulty.values)}.")
    if horizon not in Horizon.values:
        raise _field_error("horizon", f"Choose a horizon: {', '.join(Horizon.values)}.")
    if not 0 <= max_repair_rounds <= MAX_REPAIR_ROUNDS:
        raise _field_error(
            "max_repair_rounds", f"Allow between 0 and {MAX_REPAIR_ROUNDS} repair rounds."
        )
    _check_family(
        family=family,
        generator=generator,
        services=services,
        tasks_per_environment=tasks_per_environment,
        horizon=horizon,
    )


def _check_capabilities(project, capabilities) -> None:
    if not capabilities:
        raise _field_error("capabilities", "Choose at least one capability.")
    for capability in capabilities:
        if capability.project_id != project.pk:
            raise _field_error("capabilities", f"“{capability.slug}” is not in this project.")
        if capability.is_archived:
            raise _field_error("capabilities", f"“{capability.slug}” is archived.")


def _check_generator(project, generator, endpoint) -> None:
    """A known generator; the LLM one with an endpoint of this project."""
    if generator not in Generator.values:
        raise _field_error("generator", f"Choose a generator: {', '.join(Generator.values)}.")
    if generator == Generator.LLM:
        if endpoint is None:
            raise _field_error("endpoint", "The LLM generator needs a model endpoint.")
        if endpoint.project_id != project.pk:
            raise _field_error("endpoint", "That endpoint is not in this project.")


def _check_family(*, family, generator, services, tasks_per_environment, horizon) -> None:
    if not family:
        return
    keys = [key for key, _ in TEMPLATE_FAMILY_CHOICES]
    if family not in keys:
        raise _field_error("family", f"Unknown family “{family}”; choose one of {', '.join(keys)}.")
    if generator != Generator.TEMPLATE:
        raise _field_error("family", "A family is chosen for the template generator only.")
    if family != RECEIPTS_FAMILY:
        return
    if services:
        raise _field_error(
            "services", "The receipts family brings its own expenses service; choose none."
        )
    if horizon != Horizon.SHORT:
        raise _field_error("horizon", "The receipts family has short tasks only.")
    if tasks_per_environment > MAX_RECEIPT_TASKS:
        raise _field_error(
            "tasks_per_environment",
            f"The receipts family has at most {MAX_RECEIPT_TASKS} tasks per environment.",
        )


def synthesis_start(
    *,
    project,
    user,
    capabilities: list,
    count: int,
    generator: str,
    endpoint=None,
    services: list[str] | tuple[str, ...] = (),
    tasks_per_environment: int = 3,
    turns: tuple[int, int] = (1, 3),
    difficulty: str = Difficulty.MEDIUM,
    horizon: str = Horizon.SHORT,
    family: str = "",
    domain_hint: str = "",
    scenario_hint: str = "",
    max_repair_rounds: int = 3,
    seed: int | None = None,
    enqueue: bool = True,
) -> SynthesisJob:
    """Create the job and its slots; once committed, one task per slot goes to the queue.

    ``family`` (template generator only) forces a scenario family,
    ``generators.TEMPLATE_FAMILY_CHOICES``: ``receipts`` gives multimodal environments whose
    images are stored by hash as each slot is drafted. ``enqueue=False`` leaves the slots
    for ``synthesis_run_inline`` (the command's --sync, the demo seed).
    """
    services = list(dict.fromkeys(services))
    capabilities = list(dict.fromkeys(capabilities))
    _check_inputs(
        project=project,
        capabilities=capabilities,
        count=count,
        generator=generator,
        endpoint=endpoint,
        services=services,
        tasks_per_environment=tasks_per_environment,
        turns=turns,
        difficulty=difficulty,
        max_repair_rounds=max_repair_rounds,
        horizon=horizon,
        family=family,
    )
    if generator != Generator.LLM:
        endpoint = None
    seed = random.SystemRandom().randrange(2**31) if seed is None else int(seed)
    slugs = [capability.slug for capability in capabilities]
    noun = "environment" if count == 1 else "environments"
    how = f"{generator}, {family}" if family else generator
    title = f"Synthesize {count} {noun} ({how}): {', '.join(slugs)}"
    with transaction.atomic():
        job = job_create(
            project=project,
            kind=SYNTHESIS_JOB_KIND,
            title=title[:200],
            started_by=user,
            total=count,
        )
        synthesis = SynthesisJob(
            project=project,
            job=job,
            capability_slugs=slugs,
            domain_hint=domain_hint.strip(),
            scenario_hint=scenario_hint.strip(),
            services=services,
            count=count,
            tasks_per_environment=tasks_per_environment,
            turns_min=turns[0],
            turns_max=turns[1],
            difficulty=difficulty,
            horizon=horizon,
            family=family,
            generator=generator,
            endpoint=endpoint,
            endpoint_name=endpoint.name if endpoint else "",
            model=endpoint.model if endpoint else "",
            max_repair_rounds=max_repair_rounds if generator == Generator.LLM else 0,
            seed=seed,
            prompt_version=(
                CURRENT_PROMPT_VERSION
                if generator == Generator.LLM
                else f"template-v{GENERATOR_VERSION}"
            ),
            created_by=user,
        )
        synthesis.full_clean(exclude=["job", "project"])
        synthesis.save()
        synthesis.capabilities.set(capabilities)
        enqueued_at = timezone.now() if enqueue else None
        slots = SynthesisSlot.objects.bulk_create(
            SynthesisSlot(synthesis=synthesis, index=i, seed=seed + i, enqueued_at=enqueued_at)
            for i in range(count)
        )
        job.params = {"synthesis_id": synthesis.pk}
        job.save(update_fields=["params"])
        if enqueue:
            slot_ids = [slot.pk for slot in slots]
            transaction.on_commit(lambda: _enqueue_slots(slot_ids))
    return synthesis


def _enqueue_slots(slot_ids: list[int]) -> None:
    for slot_id in slot_ids:
        _send_slot(slot_id)


def _send_slot(slot_id: int) -> bool:
    return send_task("apps.synthesis.tasks.synthesize_slot_task", slot_id)


def synthesis_cancel(*, synthesis: SynthesisJob) -> SynthesisJob:
    """Cancel the slots not started yet; running ones stop at their next checkpoint."""
    job = synthesis.job
    if job.status not in ACTIVE_JOB_STATUSES:
        raise ApplicationError(f"This synthesis job has already {job.status}.")
    now = timezone.now()
    with transaction.atomic():
        Job.objects.filter(pk=job.pk).update(cancel_requested=True)
        SynthesisSlot.objects.filter(synthesis=synthesis, status=SlotStatus.REQUESTED).update(
            status=SlotStatus.CANCELLED, finished_at=now, error="Cancelled before it started."
        )
    synthesis_refresh(synthesis=synthesis)
    synthesis.job.refresh_from_db()
    return synthesis


def synthesis_resume(*, synthesis: SynthesisJob) -> dict:
    """Queue again every slot that nobody is working on: not started, or whose worker
    stopped sending heartbeats. A slot still leased elsewhere is left alone (a duplicate
    message would find it claimed and do nothing anyway).

    Returns ``{"enqueued": n, "leased": m, "recheck_in": seconds | None}``.
    """
    job = Job.objects.get(pk=synthesis.job_id)
    if job.status not in ACTIVE_JOB_STATUSES:
        return {"enqueued": 0, "leased": 0, "recheck_in": None}
    now = timezone.now()
    lease = stale_after()
    slots = SynthesisSlot.objects.filter(synthesis=synthesis)
    ready = list(slots.filter(SLOTS.lost(now - lease)).values_list("pk", flat=True))
    beats = list(
        slots.filter(SLOTS.held).exclude(pk__in=ready).values_list("heartbeat_at", flat=True)
    )
    if ready:
        SynthesisSlot.objects.filter(pk__in=ready).update(enqueued_at=now)
        transaction.on_commit(lambda: _enqueue_slots(ready))
    synthesis_refresh(synthesis=synthesis)
    recheck = None
    if beats:
        recheck = max(1.0, (min(beats) + lease - now).total_seconds() + 1.0)
    return {"enqueued": len(ready), "leased": len(beats), "recheck_in": recheck}


def synthesis_sweep(*, now=None) -> dict:
    """What Celery beat runs every JOB_SWEEP_EVERY_S: send again every slot of an active job
    that nobody works on although it was sent more than ``JOB_STALE_AFTER_S`` ago (its
    worker died, or the message was lost; once per period, ``Claimable.sweep``), then bring
    every active job's progress and verdict up to date (a job whose last slot finished while
    its refresh failed ends here). Slots worked in process (``--sync``, never sent) are left
    to that process. Returns ``{"sent": [slot ids], "jobs": [synthesis ids refreshed]}``.
    """
    active = SynthesisJob.objects.filter(job__status__in=ACTIVE_JOB_STATUSES)
    sent = SLOTS.sweep(SynthesisSlot.objects.filter(synthesis__in=active), send=_send_slot, now=now)
    refreshed = []
    for synthesis in active.order_by("id"):
        synthesis_refresh(synthesis=synthesis)
        refreshed.append(synthesis.pk)
    return {"sent": sent, "jobs": refreshed}


def synthesis_refresh(*, synthesis: SynthesisJob) -> Job:
    """Write progress (finished slots) into the core Job and finish it when every slot is."""
    summary = synthesis_summary(synthesis=synthesis)
    finished = summary["finished"]
    now = timezone.now()
    job_id = synthesis.job_id
    Job.objects.filter(pk=job_id, status__in=ACTIVE_JOB_STATUSES).update(
        progress_done=finished, heartbeat_at=now, message=summary["message"]
    )
    if finished >= synthesis.count:
        job = Job.objects.get(pk=job_id)
        if job.cancel_requested:
            status = JobStatus.CANCELLED
        elif summary["counts"][SlotStatus.FAILED] == synthesis.count:
            status = JobStatus.FAILED
        else:
            status = JobStatus.SUCCEEDED
        Job.objects.filter(pk=job_id, status__in=ACTIVE_JOB_STATUSES).update(
            status=status,
            finished_at=now,
            progress_done=finished,
            message=summary["message"],
            result=_job_result(synthesis, summary),
        )
    # A job made running by its first claim stays consistent even if nobody claims again.
    return Job.objects.get(pk=job_id)


def synthesis_mark_running(*, synthesis: SynthesisJob) -> None:
    now = timezone.now()
    Job.objects.filter(pk=synthesis.job_id, status=JobStatus.PENDING).update(
        status=JobStatus.RUNNING, started_at=now, heartbeat_at=now
    )


def _job_result(synthesis: SynthesisJob, summary: dict) -> dict:
    slots = (
        SynthesisSlot.objects.filter(synthesis=synthesis, environment__isnull=False)
        .select_related("environment")
        .order_by("index")[:MAX_RESULT_LINKS]
    )
    links = [
        {
            "label": slot.environment.name,
            "url": reverse("environments:detail", args=[slot.environment_id]),
            "note": slot.status + (" · near-duplicate" if slot.duplicate_of_id else ""),
        }
        for slot in slots
    ]
    links.insert(
        0,
        {
            "label": f"Synthesis job #{synthesis.pk}",
            "url": reverse("synthesis:detail", args=[synthesis.pk]),
            "note": "every slot and attempt",
        },
    )
    return {
        "synthesis_id": synthesis.pk,
        "counts": summary["counts"],
        "repaired": summary["repaired"],
        "duplicates": summary["duplicates"],
        "tokens_in": summary["tokens_in"],
        "tokens_out": summary["tokens_out"],
        "cost": str(summary["cost"]),
        "links": links,
    }


def synthesis_run_inline(*, synthesis: SynthesisJob, on_slot=None) -> Job:
    """Run every unfinished slot here, one after the other (no worker needed)."""
    from apps.synthesis.services.slots import synthesis_slot_run

    slot_ids = list(
        SynthesisSlot.objects.filter(synthesis=synthesis)
        .filter(Q(status=SlotStatus.REQUESTED) | Q(status__in=RUNNING_SLOT_STATUSES))
        .order_by("index")
        .values_list("pk", flat=True)
    )
    for slot_id in slot_ids:
        outcome = synthesis_slot_run(slot_id=slot_id, worker="inline")
        if on_slot is not None:
            on_slot(SynthesisSlot.objects.get(pk=slot_id), outcome)
    return synthesis_refresh(synthesis=synthesis)
