from django.urls import path, re_path

from apps.environments.views import (
    attachments,
    browse,
    detail,
    editing,
    serving,
    task_editing,
)

app_name = "environments"

urlpatterns = [
    # --- browse: list, import, export, actions, validation (views/browse.py) ---
    path("p/<slug:slug>/environments/", browse.environment_list_view, name="list"),
    path("p/<slug:slug>/environments/import/", browse.environment_import_view, name="import"),
    path("p/<slug:slug>/environments/bulk/", browse.environment_bulk_view, name="bulk"),
    path("p/<slug:slug>/environments/server/", serving.envserver_view, name="envserver"),
    path(
        "p/<slug:slug>/environments/export.zip",
        browse.environment_export_matching_view,
        name="export_matching",
    ),
    path("environments/<int:pk>/spec.json", browse.environment_export_view, name="export"),
    path(
        "environments/<int:pk>/claw-eval.zip",
        browse.environment_export_claw_eval_view,
        name="export_claw_eval",
    ),
    path(
        "environments/<int:pk>/clawmark.zip",
        browse.environment_export_clawmark_view,
        name="export_clawmark",
    ),
    path(
        "environments/<int:pk>/claw-eval/propose-checks/",
        browse.environment_propose_checks_view,
        name="propose_checks",
    ),
    path("environments/<int:pk>/validate/", browse.environment_validate_view, name="validate"),
    path("environments/<int:pk>/duplicate/", browse.environment_duplicate_view, name="duplicate"),
    path("environments/<int:pk>/archive/", browse.environment_archive_view, name="archive"),
    path("environments/<int:pk>/restore/", browse.environment_restore_view, name="restore"),
    path("environments/<int:pk>/delete/", browse.environment_delete_view, name="delete"),
    path("environments/<int:pk>/approve/", browse.environment_approve_view, name="approve"),
    # --- the detail page and its tabs (views/detail.py); edit forms (views/editing.py,
    # views/task_editing.py) ---
    path("environments/<int:pk>/", detail.environment_detail, name="detail"),
    path(
        "environments/<int:pk>/attachments/<str:sha256>/",
        attachments.attachment_view,
        name="attachment",
    ),
    re_path(
        r"^environments/(?P<pk>[0-9]+)/(?P<tab>overview|services|tools|tasks|validation|runs|spec)/$",
        detail.environment_detail,
        name="tab",
    ),
    path(
        "environments/<int:pk>/validation/live/",
        detail.validation_status,
        name="validation_status",
    ),
    path(
        "environments/<int:pk>/validation/report/",
        detail.validation_report_live,
        name="validation_report_live",
    ),
    path(
        "environments/<int:pk>/services/<str:service>/<str:collection>.json/",
        detail.collection_json,
        name="collection_json",
    ),
    path("environments/<int:pk>/edit/", editing.environment_edit, name="edit"),
    path("environments/<int:pk>/spec/edit/", editing.spec_edit, name="edit_spec"),
    path("environments/<int:pk>/tasks/new/", task_editing.task_create_view, name="task_create"),
    path("environments/tasks/<int:pk>/edit/", task_editing.task_edit_view, name="task_edit"),
    path("environments/tasks/<int:pk>/delete/", task_editing.task_delete_view, name="task_delete"),
    path(
        "environments/tasks/<int:pk>/graders/new/",
        task_editing.grader_create_view,
        name="grader_create",
    ),
    path("environments/graders/<int:pk>/edit/", task_editing.grader_edit_view, name="grader_edit"),
    path(
        "environments/graders/<int:pk>/delete/",
        task_editing.grader_delete_view,
        name="grader_delete",
    ),
    path("environments/<int:pk>/tools/new/", editing.tool_create_view, name="tool_create"),
    path("environments/tools/<int:pk>/edit/", editing.tool_edit_view, name="tool_edit"),
    path("environments/tools/<int:pk>/delete/", editing.tool_delete_view, name="tool_delete"),
    path("environments/<int:pk>/records/new/", editing.record_create_view, name="record_create"),
    path("environments/records/<int:pk>/", detail.record_detail, name="record_detail"),
    path("environments/records/<int:pk>/edit/", editing.record_edit_view, name="record_edit"),
    path("environments/records/<int:pk>/delete/", editing.record_delete_view, name="record_delete"),
]
