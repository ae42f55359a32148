"""Writes that create a part together with the parts it cannot exist without.

The spec requires every task to have at least one grader, so a task can only be added with
its graders, in one transaction: the task, its capabilities and graders are written, then the
whole environment must still make a schema-valid document (or everything is rolled back with
the problems), its revision is bumped and it goes back to draft.
"""

from django.db import transaction

from apps.core.exceptions import ApplicationError
from apps.environments.models import Environment, Grader, Task
from apps.environments.services.environments import environment_edited
from apps.environments.services.parts import (
    GRADER_FIELDS,
    TASK_FIELDS,
    _apply,
    _next_position,
    _set_capabilities,
)


@transaction.atomic
def task_create_with_graders(*, environment: Environment, data: dict, graders: list[dict]) -> Task:
    """Add a task and its graders (each a dict of Grader fields, ``check_spec`` for the check)."""
    if not graders:
        raise ApplicationError("A task needs at least one grader.")
    keys = [str(grader.get("key")) for grader in graders]
    duplicates = sorted({key for key in keys if keys.count(key) > 1})
    if duplicates:
        raise ApplicationError(
            f"Two graders share the key{'' if len(duplicates) == 1 else 's'}: "
            f"{', '.join(duplicates)}."
        )
    data = dict(data)
    capability_slugs = data.pop("capabilities", [])
    task = Task(environment=environment, position=_next_position(environment.tasks))
    _apply(task, data, TASK_FIELDS)
    task.save()
    _set_capabilities(task, capability_slugs)
    for position, grader_data in enumerate(graders):
        grader = Grader(task=task, position=position)
        _apply(grader, dict(grader_data), GRADER_FIELDS)
        grader.save()
    environment_edited(environment)
    return task
