"""Demonstrations from runs: the automatic promotion of a teacher batch's passing runs and
a reviewer's promotion of any graded run by hand."""

from __future__ import annotations

import logging

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import CheckConstraint, OuterRef, Q, Subquery, Value
from django.db.models.constants import LOOKUP_SEP

from apps.capabilities.models import Capability
from apps.core.exceptions import ApplicationError
from apps.curation.models import Demonstration, DemonstrationStatus, DemonstrationVersion
from apps.curation.services.settings import curation_settings_get
from apps.runs.models import Run, RunBatch, RunRole, RunStatus

logger = logging.getLogger(__name__)

# A batch's runs are promoted this many at a time: one read, one INSERT per table.
PROMOTE_CHUNK = 500

# What a demonstration and its first version copy from a run (``task__split`` decides the
# split): the batch path reads only these, leaving out the run's other big JSON columns.
RUN_FIELDS_COPIED = (
    "id",
    "batch_id",
    "project_id",
    "task_id",
    "task__split",
    "environment_id",
    "task_key",
    "task_title",
    "environment_name",
    "split",
    "capabilities",
    "model",
    "policy_name",
    "status",
    "transcript",
    "tools",
    "audit_log",
    "exogenous_log",
    "score",
    "passed",
    "strict",
    "completion",
    "safety",
    "robustness",
    "verdicts",
    "environment_revision",
    "spec_hash",
)

# The batch path leaves these to the database, which checks them when the rows are inserted:
# each is one of the run's own foreign keys (or empty), and full_clean's existence check of
# a foreign key is a query per row.
_RELATIONS = [field.name for field in Demonstration._meta.concrete_fields if field.is_relation]


def grading_from_run(run: Run) -> dict:
    """The grading a run recorded, in the shape of ``Grading.to_dict()``."""
    return {
        "score": run.score,
        "passed": run.passed,
        "strict": run.strict,
        "completion": run.completion,
        "safety": run.safety,
        "robustness": run.robustness,
        "verdicts": run.verdicts,
    }


def is_eval_task_run(run: Run) -> bool:
    """Whether the run's task is (now) an eval task: its current split, or the split the run
    recorded once the task is gone."""
    task = run.task
    split = task.split if task is not None else run.split
    return split == "eval"


def promotion_refusal(run: Run) -> str | None:
    """Why the run cannot become a demonstration, or None if it can."""
    if run.status != RunStatus.SUCCEEDED:
        return f"Only a graded run can become a demonstration; this one is {run.status}."
    if not run.transcript:
        return "This run has no transcript to review."
    if is_eval_task_run(run):
        return (
            f"Run #{run.pk} is of an eval task ({run.task_key}): eval tasks measure models and "
            "never become demonstrations or dataset rows. To train on this task, move it to "
            "the train split in its environment first."
        )
    return None


def demonstration_build(run: Run, *, batch: RunBatch, settings, user=None) -> Demonstration:
    """The run's pending demonstration, unsaved (``batch`` is the run's)."""
    task_split = run.task.split if run.task_id is not None else run.split
    return Demonstration(
        project_id=run.project_id,
        run=run,
        run_ref=run.pk,
        task_id=run.task_id,
        environment_id=run.environment_id,
        task_key=run.task_key,
        task_title=run.task_title,
        environment_name=run.environment_name,
        split=task_split or "train",
        capability_slugs=list(run.capabilities or []),
        model_name=run.model or batch.policy_label,
        policy=run.policy_name or batch.policy_kind,
        score=run.score,
        status=DemonstrationStatus.PENDING,
        reviews_required=settings.reviews_required,
        promoted_by=user,
    )


def first_version_build(demonstration: Demonstration, run: Run) -> DemonstrationVersion:
    """Version 1 of a saved demonstration: the run's transcript as recorded, unsaved."""
    return DemonstrationVersion(
        demonstration=demonstration,
        number=1,
        transcript=run.transcript,
        tools=run.tools,
        audit_log=run.audit_log,
        exogenous_log=run.exogenous_log,
        grading=grading_from_run(run),
        score=run.score,
        passed=run.passed,
        strict=run.strict,
        environment_revision=run.environment_revision,
        spec_hash=run.spec_hash,
        note="The run's transcript as recorded.",
    )


def demonstrations_insert(rows: list[tuple[Demonstration, Run]]) -> None:
    """Save built demonstrations with their first versions and capability links: a few
    statements whatever their number. Call it inside a transaction; a run promoted
    meanwhile raises ``IntegrityError`` (a demonstration's run is unique)."""
    demonstrations = [demonstration for demonstration, _ in rows]
    Demonstration.objects.bulk_create(demonstrations)
    versions = [first_version_build(demonstration, run) for demonstration, run in rows]
    # One value given as an expression keeps the INSERT a multi-row VALUES on PostgreSQL:
    # Django's UNNEST form sends each column as an array, and with client-side binding
    # (Django's default on psycopg 3) psycopg quotes every transcript's JSON as an array
    # element in Python, a regex substitution per double quote: a third of this function's
    # CPU on bench/curation.py's batch, more with longer transcripts.
    for version in versions:
        version.note = Value(version.note)
    DemonstrationVersion.objects.bulk_create(versions)
    for version in versions:
        version.note = version.note.value
    Demonstration.objects.filter(pk__in=[d.pk for d in demonstrations]).update(
        current_version=Subquery(
            DemonstrationVersion.objects.filter(demonstration=OuterRef("pk"), number=1).values(
                "pk"
            )[:1]
        )
    )
    for demonstration, version in zip(demonstrations, versions, strict=True):
        demonstration.current_version = version
    _capabilities_link(demonstrations)


def _capabilities_link(demonstrations: list[Demonstration]) -> None:
    wanted = {(d.project_id, slug) for d in demonstrations for slug in d.capability_slugs}
    if not wanted:
        return
    found = {
        (project_id, slug): pk
        for pk, project_id, slug in Capability.objects.filter(
            project_id__in={project_id for project_id, _ in wanted},
            slug__in={slug for _, slug in wanted},
        ).values_list("pk", "project_id", "slug")
    }
    link = Demonstration.capabilities.through
    link.objects.bulk_create(
        [
            link(demonstration_id=d.pk, capability_id=found[d.project_id, slug])
            for d in demonstrations
            for slug in dict.fromkeys(d.capability_slugs)
            if (d.project_id, slug) in found
        ]
    )


def demonstration_from_run(*, run: Run, user=None) -> Demonstration:
    """The run's demonstration, created (pending, version 1 = the run's transcript) if it
    has none yet. Idempotent: a second call, or a concurrent one, returns the same row.

    Any graded run of a train task can be promoted by hand (``user`` is who promoted it);
    the automatic promotion of passing teacher runs is ``demonstrations_from_batch``. A run of
    an eval task is refused: eval tasks measure models and never enter a dataset, so a
    review of one could lead nowhere.
    """
    existing = Demonstration.objects.filter(run=run).first()
    if existing is not None:
        return existing
    refusal = promotion_refusal(run)
    if refusal is not None:
        raise ApplicationError(refusal)
    settings = curation_settings_get(project=run.project)
    demonstration = demonstration_build(run, batch=run.batch, settings=settings, user=user)
    demonstration.full_clean(exclude=["run", "current_version"])
    try:
        with transaction.atomic():
            demonstrations_insert([(demonstration, run)])
    except IntegrityError:
        # Promoted concurrently (the run is unique): return the winner's row.
        found = Demonstration.objects.filter(run=run).first()
        if found is None:
            raise
        return found
    return demonstration


def qualifying_runs(*, batch: RunBatch, settings=None):
    """The batch's graded runs that pass the project's promotion rule."""
    settings = settings or curation_settings_get(project=batch.project)
    runs = (
        Run.objects.filter(
            batch=batch,
            status=RunStatus.SUCCEEDED,
            score__gte=settings.pass_threshold,
            demonstration__isnull=True,
        )
        # Eval tasks never become demonstrations (the task's current split decides; a run
        # whose task is gone goes by the split it recorded).
        .exclude(task__split="eval")
        .exclude(task__isnull=True, split="eval")
    )
    if settings.strict_only:
        runs = runs.filter(strict=True)
    return runs


def demonstrations_from_batch(*, batch: RunBatch) -> int:
    """Promote every passing run of a TEACHER batch's train tasks to a pending demonstration
    (score at least the project's ``pass_threshold``, and strict if ``strict_only``). Eval
    tasks and other roles promote nothing. Idempotent, and safe when two workers finish the
    same batch at once. Returns how many demonstrations were created.

    In bulk, ``PROMOTE_CHUNK`` runs at a time in one transaction: the query count does not
    grow with the batch's size. A run that ``demonstration_from_run`` would refuse (no
    transcript, a field or constraint that does not validate) is left out with a warning."""
    if batch.role != RunRole.TEACHER:
        return 0
    settings = curation_settings_get(project=batch.project)
    runs = (
        qualifying_runs(batch=batch, settings=settings)
        .select_related("task")
        .only(*RUN_FIELDS_COPIED)
        .order_by("pk")
    )
    checked: set = set()
    created = 0
    last = 0
    with transaction.atomic():
        while True:
            chunk = list(runs.filter(pk__gt=last)[:PROMOTE_CHUNK])
            if not chunk:
                break
            last = chunk[-1].pk
            rows = [
                row
                for run in chunk
                if (row := _row_validated(run, batch=batch, settings=settings, checked=checked))
            ]
            created += _rows_insert(rows, batch=batch, settings=settings)
            if len(chunk) < PROMOTE_CHUNK:
                break
    if created:
        logger.info("Batch %s: %s runs became demonstrations.", batch.pk, created)
    return created


def _row_validated(run: Run, *, batch: RunBatch, settings, checked: set):
    """(demonstration, run) if the run can be promoted: the rules of
    ``demonstration_from_run`` (its refusals and ``full_clean``) without a query per row;
    None, logged, if not."""
    refusal = promotion_refusal(run)
    if refusal is not None:
        logger.warning("Batch %s: run %s not promoted: %s", batch.pk, run.pk, refusal)
        return None
    demonstration = demonstration_build(run, batch=batch, settings=settings)
    try:
        demonstration.full_clean(exclude=_RELATIONS, validate_constraints=False)
        _constraints_validate(demonstration, checked)
    except ValidationError as error:
        logger.warning("Batch %s: run %s not promoted: %s", batch.pk, run.pk, error)
        return None
    return demonstration, run


def _constraints_validate(demonstration: Demonstration, checked: set) -> None:
    """``validate_constraints`` (each check is a query), once per distinct set of the values
    a check constraint reads: a batch's rows share them (status, reviews_required, claim)."""
    for constraint in Demonstration._meta.constraints:
        names = _fields_read(constraint)
        key = (
            None
            if names is None
            else (constraint.name, *(getattr(demonstration, name) for name in names))
        )
        try:
            if key in checked:
                continue
        except TypeError:  # a value that cannot be a key (JSON): check this row
            key = None
        constraint.validate(Demonstration, demonstration, exclude={"run", "current_version"})
        if key is not None:
            checked.add(key)


def _fields_read(constraint) -> tuple[str, ...] | None:
    """The attribute names a check constraint reads; None when its outcome may depend on
    more than the row (a unique constraint) or cannot be told."""
    if not isinstance(constraint, CheckConstraint) or not isinstance(constraint.condition, Q):
        return None
    names: set[str] = set()
    pending = [constraint.condition]
    while pending:
        for child in pending.pop().children:
            if isinstance(child, Q):
                pending.append(child)
            elif isinstance(child, tuple) and isinstance(child[0], str):
                names.add(Demonstration._meta.get_field(child[0].split(LOOKUP_SEP)[0]).attname)
            else:
                return None
    return tuple(sorted(names))


def _rows_insert(rows: list[tuple[Demonstration, Run]], *, batch: RunBatch, settings) -> int:
    """Insert the rows (in a savepoint); runs promoted meanwhile, by hand or by another worker
    finishing the same batch, are left out. Returns how many were inserted."""
    while rows:
        try:
            with transaction.atomic():
                demonstrations_insert(rows)
            return len(rows)
        except IntegrityError:
            run_ids = [run.pk for _, run in rows]
            taken = set(
                Demonstration.objects.filter(run_id__in=run_ids).values_list("run_id", flat=True)
            )
            if not taken:
                raise
            rows = [
                (demonstration_build(run, batch=batch, settings=settings), run)
                for _, run in rows
                if run.pk not in taken
            ]
    return 0
