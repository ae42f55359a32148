"""The environments REST API, mounted under /api/v1/ — environments and their parts.

Collections and objects end with a slash (``environments/``, ``tasks/{id}/``); actions on an
environment do not (``environments/{id}/spec``, ``…/validate``, ``environments/import``), as
the issue names them.
"""

from django.urls import path

from apps.environments.apis import environments as env
from apps.environments.apis import parts

urlpatterns = [
    path("environments/", env.EnvironmentListApi.as_view(), name="environment_list"),
    path("environments/import", env.EnvironmentImportApi.as_view(), name="environment_import"),
    path("environments/<int:pk>/", env.EnvironmentDetailApi.as_view(), name="environment_detail"),
    path("environments/<int:pk>/spec", env.EnvironmentSpecApi.as_view(), name="environment_spec"),
    path(
        "environments/<int:pk>/validate",
        env.EnvironmentValidateApi.as_view(),
        name="environment_validate",
    ),
    path(
        "environments/<int:pk>/approve",
        env.EnvironmentApproveApi.as_view(),
        name="environment_approve",
    ),
    path(
        "environments/<int:pk>/archive",
        env.EnvironmentArchiveApi.as_view(),
        name="environment_archive",
    ),
    path(
        "environments/<int:pk>/restore",
        env.EnvironmentRestoreApi.as_view(),
        name="environment_restore",
    ),
    path(
        "environments/<int:pk>/duplicate",
        env.EnvironmentDuplicateApi.as_view(),
        name="environment_duplicate",
    ),
    path("environments/<int:pk>/tasks/", parts.TaskListApi.as_view(), name="task_list"),
    path("tasks/<int:pk>/", parts.TaskDetailApi.as_view(), name="task_detail"),
    path("tasks/<int:pk>/graders/", parts.GraderListApi.as_view(), name="grader_list"),
    path("graders/<int:pk>/", parts.GraderDetailApi.as_view(), name="grader_detail"),
    path("environments/<int:pk>/tools/", parts.ToolListApi.as_view(), name="tool_list"),
    path("tools/<int:pk>/", parts.ToolDetailApi.as_view(), name="tool_detail"),
    path("environments/<int:pk>/records/", parts.RecordListApi.as_view(), name="record_list"),
    path("records/<int:pk>/", parts.RecordDetailApi.as_view(), name="record_detail"),
    path("spec-schema/", env.SpecSchemaApi.as_view(), name="spec_schema"),
]
