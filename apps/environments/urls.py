from django.urls import path

from apps.environments.views import browse

app_name = "environments"

urlpatterns = [
    # --- browse: list, import, export, actions, validation (views/browse.py) ---
    path("p/<slug:slug>/environments/", browse.environment_list_view, name="list"),
    path("p/<slug:slug>/environments/import/", browse.environment_import_view, name="import"),
    path("p/<slug:slug>/environments/bulk/", browse.environment_bulk_view, name="bulk"),
    path(
        "p/<slug:slug>/environments/export.zip",
        browse.environment_export_matching_view,
        name="export_matching",
    ),
    path("environments/<int:pk>/spec.json", browse.environment_export_view, name="export"),
    path("environments/<int:pk>/validate/", browse.environment_validate_view, name="validate"),
    path("environments/<int:pk>/duplicate/", browse.environment_duplicate_view, name="duplicate"),
    path("environments/<int:pk>/archive/", browse.environment_archive_view, name="archive"),
    path("environments/<int:pk>/restore/", browse.environment_restore_view, name="restore"),
    path("environments/<int:pk>/delete/", browse.environment_delete_view, name="delete"),
    path("environments/<int:pk>/approve/", browse.environment_approve_view, name="approve"),
    # --- editing: detail tabs, edit forms, whole-spec editor (views/editing.py) ---
]
