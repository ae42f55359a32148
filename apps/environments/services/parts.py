"""Edits to the parts of an environment: tasks, graders, tools and records.

Each edit runs in one transaction: the row changes, then the whole environment must still
make a schema-valid document (or the edit is rolled back with the problems), its revision is
bumped and it goes back to draft.
"""

from django.db import transaction
from django.db.models import Max

from apps.capabilities.models import Capability
from apps.core.exceptions import ApplicationError
from apps.environments.models import (
    Environment,
    Grader,
    ServiceRecord,
    Task,
    TaskCapability,
    ToolSchema,
)
from apps.environments.services.environments import environment_edited, input_screened

TASK_FIELDS = {
    "key", "title", "split", "system", "constraints", "user", "turns",
    "reference_solution", "scoring", "metadata",
}  # fmt: skip
GRADER_FIELDS = {
    "key", "description", "category", "weight", "at_turn", "capability", "check_spec",
}  # fmt: skip
TOOL_FIELDS = {"name", "description", "parameters", "binding", "faults"}


def _apply(instance, data: dict, allowed: set[str]) -> None:
    unknown = set(data) - allowed
    if unknown:
        raise ApplicationError(
            f"Unknown field{'' if len(unknown) == 1 else 's'}: {', '.join(sorted(unknown))}."
        )
    input_screened(data)
    for field, value in data.items():
        setattr(instance, field, value)
    try:
        instance.full_clean()
    except Exception as exc:  # ValidationError: one message a person can act on
        messages = getattr(exc, "message_dict", None) or {"__all__": [str(exc)]}
        raise ApplicationError(
            "; ".join(f"{field}: {' '.join(errors)}" for field, errors in messages.items()),
            {"fields": messages},
        ) from None


def _next_position(queryset) -> int:
    return (queryset.aggregate(top=Max("position"))["top"] or 0) + 1


# --- tasks ----------------------------------------------------------------------------------


@transaction.atomic
def task_create(*, environment: Environment, data: dict) -> Task:
    task = Task(environment=environment, position=_next_position(environment.tasks))
    capability_slugs = data.pop("capabilities", [])
    _apply(task, data, TASK_FIELDS)
    task.save()
    _set_capabilities(task, capability_slugs)
    environment_edited(environment)
    return task


@transaction.atomic
def task_update(*, task: Task, data: dict) -> Task:
    data = dict(data)
    capability_slugs = data.pop("capabilities", None)
    _apply(task, data, TASK_FIELDS)
    task.save()
    if capability_slugs is not None:
        _set_capabilities(task, capability_slugs)
    environment_edited(task.environment)
    return task


@transaction.atomic
def task_delete(*, task: Task) -> None:
    environment = task.environment
    if environment.tasks.count() <= 1:
        raise ApplicationError("An environment needs at least one task.")
    task.delete()
    environment_edited(environment)


def _set_capabilities(task: Task, slugs: list[str]) -> None:
    capabilities = {
        c.slug: c
        for c in Capability.objects.filter(project_id=task.environment.project_id, slug__in=slugs)
    }
    unknown = [slug for slug in slugs if slug not in capabilities]
    if unknown:
        raise ApplicationError(f"Unknown capability: {', '.join(unknown)}.")
    TaskCapability.objects.filter(task=task).delete()
    TaskCapability.objects.bulk_create(
        TaskCapability(task=task, capability=capabilities[slug], position=position)
        for position, slug in enumerate(dict.fromkeys(slugs))
    )


# --- graders --------------------------------------------------------------------------------


@transaction.atomic
def grader_create(*, task: Task, data: dict) -> Grader:
    grader = Grader(task=task, position=_next_position(task.graders))
    _apply(grader, data, GRADER_FIELDS)
    grader.save()
    environment_edited(task.environment)
    return grader


@transaction.atomic
def grader_update(*, grader: Grader, data: dict) -> Grader:
    _apply(grader, data, GRADER_FIELDS)
    grader.save()
    environment_edited(grader.task.environment)
    return grader


@transaction.atomic
def grader_delete(*, grader: Grader) -> None:
    environment = grader.task.environment
    grader.delete()
    environment_edited(environment)


# --- tools ----------------------------------------------------------------------------------


@transaction.atomic
def tool_create(*, environment: Environment, data: dict) -> ToolSchema:
    tool = ToolSchema(environment=environment, position=_next_position(environment.tools))
    _apply(tool, data, TOOL_FIELDS)
    tool.save()
    environment_edited(environment)
    return tool


@transaction.atomic
def tool_update(*, tool: ToolSchema, data: dict) -> ToolSchema:
    _apply(tool, data, TOOL_FIELDS)
    tool.save()
    environment_edited(tool.environment)
    return tool


@transaction.atomic
def tool_delete(*, tool: ToolSchema) -> None:
    environment = tool.environment
    tool.delete()
    environment_edited(environment)


# --- records --------------------------------------------------------------------------------


@transaction.atomic
def record_create(
    *, environment: Environment, service: str, collection: str, data: dict, task: Task | None = None
) -> ServiceRecord:
    input_screened({"service": service, "collection": collection, "data": data})
    if not isinstance(data, dict) or not isinstance(data.get("id"), str) or not data["id"]:
        raise ApplicationError("A record is a JSON object with a non-empty string “id”.")
    if collection not in environment.collections.get(service, []):
        raise ApplicationError(
            f"The environment has no collection {service}.{collection}; add it in the spec first."
        )
    siblings = environment.records.filter(task=task, service=service, collection=collection)
    if siblings.filter(record_id=data["id"]).exists():
        raise ApplicationError(f"{service}.{collection} already has a record “{data['id']}”.")
    record = ServiceRecord.objects.create(
        environment=environment,
        task=task,
        service=service,
        collection=collection,
        record_id=data["id"],
        position=_next_position(siblings),
        data=data,
    )
    environment_edited(environment)
    return record


@transaction.atomic
def record_update(*, record: ServiceRecord, data: dict) -> ServiceRecord:
    input_screened({"data": data})
    if not isinstance(data, dict) or not isinstance(data.get("id"), str) or not data["id"]:
        raise ApplicationError("A record is a JSON object with a non-empty string “id”.")
    clash = (
        ServiceRecord.objects.filter(
            environment=record.environment_id,
            task=record.task_id,
            service=record.service,
            collection=record.collection,
            record_id=data["id"],
        )
        .exclude(pk=record.pk)
        .exists()
    )
    if clash:
        raise ApplicationError(f"Another record already has the id “{data['id']}”.")
    record.data = data
    record.record_id = data["id"]
    record.save(update_fields=["data", "record_id"])
    environment_edited(record.environment)
    return record


@transaction.atomic
def record_delete(*, record: ServiceRecord) -> None:
    environment = record.environment
    record.delete()
    environment_edited(environment)
