"""The environments REST API, mounted under /api/v1/ — environments and their parts.

Every path ends with a slash, as across the whole API (``environments/``, ``tasks/{id}/``,
``environments/{id}/validate/``). The slash-less spellings of the actions that earlier releases
documented (``environments/import``, ``environments/{id}/spec``…) still answer, under names
ending in ``_legacy``, and are left out of the schema (``apps.core.api.legacy_paths_hook``).
"""

from django.urls import path
from django.urls.resolvers import URLPattern

from apps.environments.apis import attachments, interop, parts
from apps.environments.apis import environments as env


def _action(route: str, view, name: str) -> list[URLPattern]:
    """``route/`` (documented), and ``route`` without the slash (legacy)."""
    return [path(f"{route}/", view, name=name), path(route, view, name=f"{name}_legacy")]


urlpatterns = [
    path("environments/", env.EnvironmentListApi.as_view(), name="environment_list"),
    *_action("environments/import", env.EnvironmentImportApi.as_view(), "environment_import"),
    path(
        "environments/import/claw-eval/",
        interop.ClawEvalImportApi.as_view(),
        name="environment_import_claw_eval",
    ),
    path("environments/<int:pk>/", env.EnvironmentDetailApi.as_view(), name="environment_detail"),
    *_action("environments/<int:pk>/spec", env.EnvironmentSpecApi.as_view(), "environment_spec"),
    *_action(
        "environments/<int:pk>/validate",
        env.EnvironmentValidateApi.as_view(),
        "environment_validate",
    ),
    *_action(
        "environments/<int:pk>/approve", env.EnvironmentApproveApi.as_view(), "environment_approve"
    ),
    *_action(
        "environments/<int:pk>/archive", env.EnvironmentArchiveApi.as_view(), "environment_archive"
    ),
    *_action(
        "environments/<int:pk>/restore", env.EnvironmentRestoreApi.as_view(), "environment_restore"
    ),
    *_action(
        "environments/<int:pk>/duplicate",
        env.EnvironmentDuplicateApi.as_view(),
        "environment_duplicate",
    ),
    path(
        "environments/<int:pk>/export/claw-eval/",
        interop.ClawEvalExportApi.as_view(),
        name="environment_export_claw_eval",
    ),
    path(
        "environments/<int:pk>/export/clawmark/",
        interop.ClawMarkExportApi.as_view(),
        name="environment_export_clawmark",
    ),
    path(
        "environments/<int:pk>/attachments/",
        attachments.AttachmentListApi.as_view(),
        name="attachment_list",
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
