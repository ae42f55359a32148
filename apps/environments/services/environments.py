"""Writes to environments: import, whole-spec edits, duplicate, archive, approve."""

from django.db import transaction
from django.db.models import F

from apps.core.exceptions import ApplicationError
from apps.core.safeinput import UnsafeInput, json_check
from apps.core.text import count_of
from apps.environments.models import Environment, EnvironmentSource, EnvironmentStatus
from apps.environments.services.attachment_owners import attachments_owned_check
from apps.environments.specs import environment_spec, spec_rows_create, spec_rows_delete
from coworkenv_engine import spec as engine_spec
from coworkenv_engine.problems import SpecError
from coworkenv_engine.spec_model import EnvironmentSpec


def spec_canonical(document) -> dict:
    """The canonical form of a document, or ApplicationError listing every schema problem.

    ``document`` may also be the engine's typed spec of a document that already passed the
    schema (``validate_spec(doc).spec``): it is dumped without a second schema pass."""
    if isinstance(document, EnvironmentSpec):
        canonical = engine_spec.canonical_dump(document)
        input_screened(canonical)
        return canonical
    if not isinstance(document, dict):
        raise ApplicationError(
            "A spec must be a JSON object.",
            {"problems": [_problem("not_an_object", "", "A spec must be a JSON object.")]},
        )
    # Every path of a whole spec into the database (API, upload, paste, synthesis) passes here.
    input_screened(document)
    try:
        return engine_spec.canonical_dump(document)
    except SpecError as exc:
        problems = [p.to_dict() for p in exc.problems]
        raise ApplicationError(
            f"The spec does not match {engine_spec.SCHEMA_ID}: "
            f"{count_of(len(problems), 'problem')}.",
            {"problems": problems},
        ) from None


def input_screened(value) -> None:
    """ApplicationError, with the problem's JSON pointer, for text the database cannot store
    (NUL, lone surrogates) or JSON nested too deeply: before any row is written."""
    try:
        json_check(value)
    except UnsafeInput as exc:
        hint = (
            "Flatten the document."
            if exc.code == "json_too_deep"
            else "Remove the character: NUL and unpaired surrogates are not text."
        )
        raise ApplicationError(
            exc.message, {"problems": [_problem(exc.code, exc.pointer, exc.message, hint)]}
        ) from None


def _problem(code: str, pointer: str, message: str, hint: str = "") -> dict:
    return {"code": code, "severity": "error", "pointer": pointer, "message": message, "hint": hint}


@transaction.atomic
def environment_import(
    *, project, spec: dict | EnvironmentSpec, user, source: str = EnvironmentSource.IMPORTED
) -> Environment:
    """Store a spec as a new draft environment; a spec that is not schema-valid saves nothing.

    ``spec`` is a document, or the typed spec the validator built from one
    (``validate_spec(doc).spec``), which is stored without a second schema pass."""
    document = spec_canonical(spec)
    environment = Environment(
        project=project,
        name=document["name"],
        domain=document["domain"],
        description=document["description"],
        source=source,
        created_by=user,
    )
    environment.full_clean(exclude=["collections", "clock", "metadata", "attachments"])
    environment.save()
    spec_rows_create(environment=environment, document=document)
    environment.spec_hash = engine_spec.canonical_hash(document)
    environment.save(update_fields=["collections", "clock", "metadata", "attachments", "spec_hash"])
    return environment


@transaction.atomic
def environment_replace_spec(*, environment: Environment, spec: dict) -> Environment:
    """Replace everything an environment holds by a new document (the whole-spec editor)."""
    environment = _lock(environment)
    attachments_owned_check(project=environment.project, document=spec)
    document = spec_canonical(spec)
    spec_rows_delete(environment=environment)
    environment.name = document["name"]
    environment.domain = document["domain"]
    environment.description = document["description"]
    spec_rows_create(environment=environment, document=document)
    return _record_edit(environment)


@transaction.atomic
def environment_update(
    *, environment: Environment, name: str, domain: str, description: str
) -> Environment:
    environment = _lock(environment)
    environment.name, environment.domain, environment.description = name, domain, description
    return _record_edit(environment)


def environment_edited(environment: Environment) -> Environment:
    """Call inside the transaction of any edit to a part of an environment (task, grader…)."""
    return _record_edit(_lock(environment))


def _lock(environment: Environment) -> Environment:
    locked = Environment.objects.select_for_update().get(pk=environment.pk)
    if locked.status == EnvironmentStatus.ARCHIVED:
        raise ApplicationError("This environment is archived; restore it before editing.")
    return locked


def _record_edit(environment: Environment) -> Environment:
    """Every edit: the rows must still make a schema-valid document; bump the revision and
    send the environment back to draft until it is validated again."""
    try:
        document = environment_spec(environment)
    except SpecError as exc:
        problems = [p.to_dict() for p in exc.problems]
        raise ApplicationError(
            "That change would make the spec invalid: " + problems[0]["message"],
            {"problems": problems},
        ) from None
    environment.spec_hash = engine_spec.canonical_hash(document)
    environment.revision = F("revision") + 1
    environment.status = EnvironmentStatus.DRAFT
    environment.full_clean(exclude=["revision"])
    environment.save()
    environment.refresh_from_db()
    return environment


@transaction.atomic
def environment_duplicate(*, environment: Environment, user) -> Environment:
    copy = environment_import(
        project=environment.project,
        spec=environment_spec(environment),
        user=user,
        source=EnvironmentSource.MANUAL,
    )
    copy.name = f"{environment.name} (copy)"[:200]
    copy.duplicated_from = environment
    copy.save(update_fields=["name", "duplicated_from"])
    copy.spec_hash = engine_spec.canonical_hash(environment_spec(copy))
    copy.save(update_fields=["spec_hash"])
    return copy


@transaction.atomic
def environment_archive(*, environment: Environment) -> Environment:
    environment = Environment.objects.select_for_update().get(pk=environment.pk)
    environment.status = EnvironmentStatus.ARCHIVED
    environment.save(update_fields=["status", "updated_at"])
    return environment


@transaction.atomic
def environment_restore(*, environment: Environment) -> Environment:
    environment = Environment.objects.select_for_update().get(pk=environment.pk)
    if environment.status != EnvironmentStatus.ARCHIVED:
        raise ApplicationError("Only an archived environment can be restored.")
    environment.status = EnvironmentStatus.DRAFT
    environment.save(update_fields=["status", "updated_at"])
    return environment


def environment_delete(*, environment: Environment) -> None:
    """Delete for good. Two steps on purpose: archive first (reversible), then delete, so an
    environment in use cannot go with one stray click or request."""
    if environment.status != EnvironmentStatus.ARCHIVED:
        raise ApplicationError("Archive this environment before deleting it.")
    environment.delete()


@transaction.atomic
def environment_approve(*, environment: Environment) -> Environment:
    environment = Environment.objects.select_for_update().get(pk=environment.pk)
    if environment.status != EnvironmentStatus.VALID:
        raise ApplicationError(
            "Only a valid environment can be approved: validate its current revision first."
        )
    environment.status = EnvironmentStatus.APPROVED
    environment.save(update_fields=["status", "updated_at"])
    return environment
