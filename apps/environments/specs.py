"""Between the portable document and the normalized rows.

``environment_spec`` rebuilds the canonical document from the rows; ``spec_rows_create``
writes a canonical document's parts as rows. Both are plain functions over one environment,
used by the services (which own transactions, revisions and status).
"""

from collections import defaultdict

from apps.capabilities.models import Capability
from apps.environments.models import (
    Environment,
    Grader,
    ServiceRecord,
    Task,
    TaskCapability,
    ToolSchema,
)
from coworkenv_engine import spec as engine_spec


def environment_document(environment: Environment) -> dict:
    """The document as stored, before canonicalisation (tasks, tools and records in order)."""
    return environment_documents([environment])[environment.pk]


def environment_documents(environments: list[Environment]) -> dict[int, dict]:
    """``environment_document`` of each environment, by id, with the same six queries for
    all of them (a worker starting a batch over 32 environments read each one's rows on its
    own, 224 queries one after another, while its lanes waited)."""
    ids = [environment.pk for environment in environments]
    tasks = _by_environment(
        Task.objects.filter(environment_id__in=ids).prefetch_related(
            "graders", "capability_links__capability"
        )
    )
    tools = _by_environment(ToolSchema.objects.filter(environment_id__in=ids))
    records = _by_environment(ServiceRecord.objects.filter(environment_id__in=ids))
    return {
        environment.pk: _document(
            environment, tasks[environment.pk], tools[environment.pk], records[environment.pk]
        )
        for environment in environments
    }


def _by_environment(rows) -> dict[int, list]:
    """Rows of several environments, each environment's in its own order."""
    grouped: dict[int, list] = defaultdict(list)
    for row in rows.order_by("environment_id", "position", "id"):
        grouped[row.environment_id].append(row)
    return grouped


def _document(
    environment: Environment,
    tasks: list[Task],
    tools: list[ToolSchema],
    records: list[ServiceRecord],
) -> dict:
    services: dict[str, dict[str, list]] = {
        service: {collection: [] for collection in collections}
        for service, collections in environment.collections.items()
    }
    task_records: dict[int, dict[str, dict[str, list]]] = defaultdict(dict)
    for record in records:
        target = services if record.task_id is None else task_records[record.task_id]
        target.setdefault(record.service, {}).setdefault(record.collection, []).append(record.data)

    document = {
        "schema": engine_spec.SCHEMA_ID,
        "name": environment.name,
        "domain": environment.domain,
        "description": environment.description,
        "services": services,
        "tools": [
            {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
                "binding": tool.binding,
                **({"faults": tool.faults} if tool.faults else {}),
            }
            for tool in tools
        ],
        "tasks": [_task_document(task, task_records.get(task.pk, {})) for task in tasks],
        "metadata": environment.metadata,
    }
    if environment.clock:
        document["clock"] = environment.clock
    if environment.attachments:
        document["attachments"] = environment.attachments
    return document


def _task_document(task: Task, records: dict) -> dict:
    document = {
        "key": task.key,
        "title": task.title,
        "capabilities": [
            link.capability.slug
            for link in sorted(task.capability_links.all(), key=lambda link: link.position)
        ],
        "split": task.split,
        "system": task.system,
        "constraints": task.constraints,
        "records": records,
        "user": task.user,
        "turns": task.turns,
        "reference_solution": task.reference_solution,
        "graders": [
            _grader_document(grader)
            for grader in sorted(task.graders.all(), key=lambda g: (g.position, g.pk))
        ],
        "metadata": task.metadata,
    }
    if task.scoring is not None:
        document["scoring"] = task.scoring
    return document


def environment_spec(environment: Environment) -> dict:
    """The canonical document of an environment (raises SpecError if the rows are invalid)."""
    return engine_spec.canonical_dump(environment_document(environment))


def spec_rows_create(*, environment: Environment, document: dict) -> None:
    """Write a canonical document's services, tools and tasks as rows of ``environment``."""
    environment.collections = {
        service: list(collections) for service, collections in document["services"].items()
    }
    environment.clock = document.get("clock") or {}
    environment.metadata = document.get("metadata") or {}
    environment.attachments = document.get("attachments") or []

    ToolSchema.objects.bulk_create(
        ToolSchema(
            environment=environment,
            position=position,
            name=tool["name"],
            description=tool.get("description", ""),
            parameters=tool.get("parameters", {}),
            binding=tool.get("binding", {}),
            faults=tool.get("faults") or {},
        )
        for position, tool in enumerate(document["tools"])
    )

    tasks = Task.objects.bulk_create(
        Task(
            environment=environment,
            position=position,
            key=task["key"],
            title=task.get("title", ""),
            split=task.get("split", "train"),
            system=task.get("system", ""),
            constraints=task.get("constraints", []),
            user=task.get("user", {}),
            turns=task.get("turns", []),
            reference_solution=task.get("reference_solution", []),
            scoring=task.get("scoring"),
            metadata=task.get("metadata", {}),
        )
        for position, task in enumerate(document["tasks"])
    )

    capabilities = _capabilities_by_slug(
        environment.project_id,
        {slug for task in document["tasks"] for slug in task.get("capabilities", [])},
    )
    graders, links, records = [], [], []
    for task_row, task in zip(tasks, document["tasks"], strict=True):
        graders.extend(
            Grader(
                task=task_row,
                position=position,
                key=grader["id"],
                description=grader.get("description", ""),
                category=grader.get("category", "completion"),
                weight=grader.get("weight", 1),
                at_turn=grader.get("at_turn"),
                capability=grader.get("capability") or "",
                check_spec=grader.get("check", {}),
            )
            for position, grader in enumerate(task.get("graders", []))
        )
        links.extend(
            TaskCapability(task=task_row, capability=capabilities[slug], position=position)
            for position, slug in enumerate(task.get("capabilities", []))
        )
        records.extend(_record_rows(environment, task.get("records", {}), task_row))
    records.extend(_record_rows(environment, document["services"], None))
    Grader.objects.bulk_create(graders)
    TaskCapability.objects.bulk_create(links)
    ServiceRecord.objects.bulk_create(records, batch_size=1000)


def spec_rows_delete(*, environment: Environment) -> None:
    environment.records.all().delete()
    environment.tools.all().delete()
    environment.tasks.all().delete()


def _record_rows(environment: Environment, services: dict, task: Task | None):
    for service, collections in services.items():
        for collection, items in collections.items():
            for position, data in enumerate(items):
                yield ServiceRecord(
                    environment=environment,
                    task=task,
                    service=service,
                    collection=collection,
                    record_id=str(data.get("id", "")),
                    position=position,
                    data=data,
                )


def _capabilities_by_slug(project_id: int, slugs: set[str]) -> dict[str, Capability]:
    """The project's capabilities with these slugs; unknown ones are added to the catalogue."""
    found = {c.slug: c for c in Capability.objects.filter(project_id=project_id, slug__in=slugs)}
    missing = [
        Capability(
            project_id=project_id,
            slug=slug,
            name=slug.replace("-", " ").replace("_", " ").capitalize(),
            description="Added when an environment that uses it was imported.",
        )
        for slug in sorted(slugs - found.keys())
    ]
    for capability in Capability.objects.bulk_create(missing):
        found[capability.slug] = capability
    if len(missing) and any(c.pk is None for c in missing):
        found.update(
            {c.slug: c for c in Capability.objects.filter(project_id=project_id, slug__in=slugs)}
        )
    return found


def _grader_document(grader: Grader) -> dict:
    document = {
        "id": grader.key,
        "description": grader.description,
        "category": grader.category,
        "weight": grader.weight,
        "at_turn": grader.at_turn,
    }
    if grader.capability:  # only when set, as the engine's canonical form writes it
        document["capability"] = grader.capability
    document["check"] = grader.check_spec
    return document
