"""The parts of an environment: tasks, their graders, tools and service records.

Reading needs the viewer role, writing the author role. Every write goes through a service:
it bumps the environment's revision and sends it back to draft, and a change that would make
the spec schema-invalid is refused (400, ``details.problems`` with pointers) and saves nothing.
"""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response

from apps.accounts.models import Role
from apps.core.api import StandardPagination, paginated_response
from apps.environments.access import (
    environment_get_for_user,
    grader_get_for_user,
    record_get_for_user,
    task_get_for_user,
    tool_get_for_user,
)
from apps.environments.apis.common import (
    READ_ERRORS,
    SPEC_WRITE_ERRORS,
    JsonApiView,
    validated,
)
from apps.environments.apis.serializers import (
    GraderCreateInput,
    GraderFilterInput,
    GraderOutput,
    GraderUpdateInput,
    RecordCreateInput,
    RecordFilterInput,
    RecordOutput,
    RecordUpdateInput,
    TaskCreateInput,
    TaskFilterInput,
    TaskOutput,
    TaskUpdateInput,
    ToolCreateInput,
    ToolOutput,
    ToolUpdateInput,
)
from apps.environments.selectors import (
    environment_record_list,
    environment_task_get,
    environment_task_list,
    environment_tool_list,
    task_grader_list,
)
from apps.environments.services import (
    grader_create,
    grader_delete,
    grader_update,
    record_create,
    record_delete,
    record_update,
    task_create_with_graders,
    task_delete,
    task_update,
    tool_create,
    tool_delete,
    tool_update,
)

NOTE = " Author role or higher; bumps the revision and makes the environment a draft."


def _task_payload(task) -> dict:
    """A task as stored now, with its graders, capabilities and record count."""
    return TaskOutput(environment_task_get(environment=task.environment, pk=task.pk)).data


# --- tasks ----------------------------------------------------------------------------------


class TaskListApi(JsonApiView):
    pagination_class = StandardPagination

    @extend_schema(
        tags=["tasks"],
        operation_id="environments_tasks_list",
        summary="List an environment's tasks",
        description="In spec order, each with its graders.",
        parameters=[TaskFilterInput],
        responses={200: TaskOutput(many=True), **READ_ERRORS},
    )
    def get(self, request, pk):
        environment = environment_get_for_user(request.user, pk)
        filters = validated(TaskFilterInput, request.query_params)
        tasks = environment_task_list(environment=environment, **filters)
        return paginated_response(request, self, tasks, TaskOutput)

    @extend_schema(
        tags=["tasks"],
        operation_id="environments_tasks_create",
        summary="Add a task with its graders",
        description="A task needs at least one turn and one grader, so both come in the same "
        "request; capabilities are slugs of the project's catalogue." + NOTE,
        request=TaskCreateInput,
        responses={201: TaskOutput, **SPEC_WRITE_ERRORS},
    )
    def post(self, request, pk):
        environment = environment_get_for_user(request.user, pk, min_role=Role.AUTHOR)
        data = validated(TaskCreateInput, request.data)
        graders = [dict(grader) for grader in data.pop("graders")]
        task = task_create_with_graders(environment=environment, data=data, graders=graders)
        return Response(_task_payload(task), status=status.HTTP_201_CREATED)


class TaskDetailApi(JsonApiView):
    @extend_schema(
        tags=["tasks"],
        summary="Retrieve a task",
        responses={200: TaskOutput, **READ_ERRORS},
    )
    def get(self, request, pk):
        return Response(_task_payload(task_get_for_user(request.user, pk)))

    @extend_schema(
        tags=["tasks"],
        summary="Edit a task",
        description="Only the fields sent change; ``capabilities`` replaces the list." + NOTE,
        request=TaskUpdateInput,
        responses={200: TaskOutput, **SPEC_WRITE_ERRORS},
    )
    def patch(self, request, pk):
        task = task_get_for_user(request.user, pk, min_role=Role.AUTHOR)
        data = validated(TaskUpdateInput, request.data)
        task = task_update(task=task, data=data)
        return Response(_task_payload(task))

    @extend_schema(
        tags=["tasks"],
        summary="Delete a task",
        description="With its graders and its own records; an environment keeps at least one "
        "task." + NOTE,
        responses={204: None, **SPEC_WRITE_ERRORS},
    )
    def delete(self, request, pk):
        task_delete(task=task_get_for_user(request.user, pk, min_role=Role.AUTHOR))
        return Response(status=status.HTTP_204_NO_CONTENT)


# --- graders --------------------------------------------------------------------------------


class GraderListApi(JsonApiView):
    pagination_class = StandardPagination

    @extend_schema(
        tags=["graders"],
        operation_id="tasks_graders_list",
        summary="List a task's graders",
        description="In spec order. ``key`` is the grader's ``id`` in the spec.",
        parameters=[GraderFilterInput],
        responses={200: GraderOutput(many=True), **READ_ERRORS},
    )
    def get(self, request, pk):
        task = task_get_for_user(request.user, pk)
        filters = validated(GraderFilterInput, request.query_params)
        return paginated_response(
            request, self, task_grader_list(task=task, **filters), GraderOutput
        )

    @extend_schema(
        tags=["graders"],
        operation_id="tasks_graders_create",
        summary="Add a grader to a task",
        description="``key`` is the grader's ``id`` in the spec, ``check`` its check." + NOTE,
        request=GraderCreateInput,
        responses={201: GraderOutput, **SPEC_WRITE_ERRORS},
    )
    def post(self, request, pk):
        task = task_get_for_user(request.user, pk, min_role=Role.AUTHOR)
        grader = grader_create(task=task, data=validated(GraderCreateInput, request.data))
        return Response(GraderOutput(grader).data, status=status.HTTP_201_CREATED)


class GraderDetailApi(JsonApiView):
    @extend_schema(
        tags=["graders"],
        summary="Retrieve a grader",
        responses={200: GraderOutput, **READ_ERRORS},
    )
    def get(self, request, pk):
        return Response(GraderOutput(grader_get_for_user(request.user, pk)).data)

    @extend_schema(
        tags=["graders"],
        summary="Edit a grader",
        description="Only the fields sent change." + NOTE,
        request=GraderUpdateInput,
        responses={200: GraderOutput, **SPEC_WRITE_ERRORS},
    )
    def patch(self, request, pk):
        grader = grader_get_for_user(request.user, pk, min_role=Role.AUTHOR)
        grader = grader_update(grader=grader, data=validated(GraderUpdateInput, request.data))
        return Response(GraderOutput(grader).data)

    @extend_schema(
        tags=["graders"],
        summary="Delete a grader",
        description="A task keeps at least one grader." + NOTE,
        responses={204: None, **SPEC_WRITE_ERRORS},
    )
    def delete(self, request, pk):
        grader_delete(grader=grader_get_for_user(request.user, pk, min_role=Role.AUTHOR))
        return Response(status=status.HTTP_204_NO_CONTENT)


# --- tools ----------------------------------------------------------------------------------


class ToolListApi(JsonApiView):
    pagination_class = StandardPagination

    @extend_schema(
        tags=["tools"],
        operation_id="environments_tools_list",
        summary="List an environment's tools",
        responses={200: ToolOutput(many=True), **READ_ERRORS},
    )
    def get(self, request, pk):
        environment = environment_get_for_user(request.user, pk)
        return paginated_response(
            request, self, environment_tool_list(environment=environment), ToolOutput
        )

    @extend_schema(
        tags=["tools"],
        operation_id="environments_tools_create",
        summary="Add a tool",
        description="A tool schema with its binding to a service operation." + NOTE,
        request=ToolCreateInput,
        responses={201: ToolOutput, **SPEC_WRITE_ERRORS},
    )
    def post(self, request, pk):
        environment = environment_get_for_user(request.user, pk, min_role=Role.AUTHOR)
        tool = tool_create(environment=environment, data=validated(ToolCreateInput, request.data))
        return Response(ToolOutput(tool).data, status=status.HTTP_201_CREATED)


class ToolDetailApi(JsonApiView):
    @extend_schema(
        tags=["tools"],
        summary="Retrieve a tool",
        responses={200: ToolOutput, **READ_ERRORS},
    )
    def get(self, request, pk):
        return Response(ToolOutput(tool_get_for_user(request.user, pk)).data)

    @extend_schema(
        tags=["tools"],
        summary="Edit a tool",
        description="Only the fields sent change." + NOTE,
        request=ToolUpdateInput,
        responses={200: ToolOutput, **SPEC_WRITE_ERRORS},
    )
    def patch(self, request, pk):
        tool = tool_get_for_user(request.user, pk, min_role=Role.AUTHOR)
        tool = tool_update(tool=tool, data=validated(ToolUpdateInput, request.data))
        return Response(ToolOutput(tool).data)

    @extend_schema(
        tags=["tools"],
        summary="Delete a tool",
        description="Checks and reference calls that still name it are reported by the next "
        "validation." + NOTE,
        responses={204: None, **SPEC_WRITE_ERRORS},
    )
    def delete(self, request, pk):
        tool_delete(tool=tool_get_for_user(request.user, pk, min_role=Role.AUTHOR))
        return Response(status=status.HTTP_204_NO_CONTENT)


# --- records --------------------------------------------------------------------------------


class RecordListApi(JsonApiView):
    pagination_class = StandardPagination

    @extend_schema(
        tags=["records"],
        operation_id="environments_records_list",
        summary="List an environment's service records",
        description="Both the records every task shares (``task`` null) and tasks' own records.",
        parameters=[RecordFilterInput],
        responses={200: RecordOutput(many=True), **READ_ERRORS},
    )
    def get(self, request, pk):
        environment = environment_get_for_user(request.user, pk)
        filters = validated(RecordFilterInput, request.query_params)
        task = filters.pop("task", None)
        records = environment_record_list(
            environment=environment,
            task_id=int(task) if task not in (None, "none") else None,
            environment_level_only=task == "none",
            **filters,
        )
        return paginated_response(request, self, records, RecordOutput)

    @extend_schema(
        tags=["records"],
        operation_id="environments_records_create",
        summary="Add a record to a collection",
        description="To the environment's records, or with ``task`` to that task's own. The "
        "collection must be declared by the environment's spec." + NOTE,
        request=RecordCreateInput,
        responses={201: RecordOutput, **SPEC_WRITE_ERRORS},
    )
    def post(self, request, pk):
        environment = environment_get_for_user(request.user, pk, min_role=Role.AUTHOR)
        data = validated(RecordCreateInput, request.data)
        task = None
        if data.get("task") is not None:
            task = environment_task_get(environment=environment, pk=data["task"])
            if task is None:
                raise serializers.ValidationError({"task": ["No such task in this environment."]})
        record = record_create(
            environment=environment,
            service=data["service"],
            collection=data["collection"],
            data=data["data"],
            task=task,
        )
        return Response(RecordOutput(record).data, status=status.HTTP_201_CREATED)


class RecordDetailApi(JsonApiView):
    @extend_schema(
        tags=["records"],
        summary="Retrieve a record",
        responses={200: RecordOutput, **READ_ERRORS},
    )
    def get(self, request, pk):
        return Response(RecordOutput(record_get_for_user(request.user, pk)).data)

    @extend_schema(
        tags=["records"],
        summary="Replace a record's data",
        description="The whole record; its ``id`` may change if no sibling has it." + NOTE,
        request=RecordUpdateInput,
        responses={200: RecordOutput, **SPEC_WRITE_ERRORS},
    )
    def patch(self, request, pk):
        record = record_get_for_user(request.user, pk, min_role=Role.AUTHOR)
        data = validated(RecordUpdateInput, request.data)
        record = record_update(record=record, data=data["data"])
        return Response(RecordOutput(record).data)

    @extend_schema(
        tags=["records"],
        summary="Delete a record",
        description=NOTE.strip(),
        responses={204: None, **SPEC_WRITE_ERRORS},
    )
    def delete(self, request, pk):
        record_delete(record=record_get_for_user(request.user, pk, min_role=Role.AUTHOR))
        return Response(status=status.HTTP_204_NO_CONTENT)
