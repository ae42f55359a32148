from django.urls import path

from apps.datasets import views

app_name = "datasets"

urlpatterns = [
    path("p/<slug:slug>/datasets/", views.dataset_list_view, name="list"),
    path("p/<slug:slug>/datasets/new/", views.dataset_create_view, name="create"),
    path("datasets/<int:pk>/", views.dataset_detail_view, name="detail"),
    path("datasets/<int:pk>/edit/", views.dataset_edit_view, name="edit"),
    path("datasets/<int:pk>/delete/", views.dataset_delete_view, name="delete"),
    path("datasets/<int:pk>/versions/new/", views.version_create_view, name="version_create"),
    path(
        "datasets/<int:pk>/versions/new-rollouts/",
        views.rollout_version_create_view,
        name="rollout_version_create",
    ),
    path(
        "datasets/<int:pk>/versions/<int:number>/",
        views.version_detail_view,
        name="version_detail",
    ),
    path(
        "datasets/<int:pk>/versions/<int:number>/progress/",
        views.version_progress_view,
        name="version_progress",
    ),
    path(
        "datasets/<int:pk>/versions/<int:number>/verify/",
        views.version_verify_view,
        name="version_verify",
    ),
    path(
        "datasets/<int:pk>/versions/<int:number>/rebuild/",
        views.version_rebuild_view,
        name="version_rebuild",
    ),
    path(
        "datasets/<int:pk>/versions/<int:number>/download/card/",
        views.version_download_view,
        {"fmt": "card"},
        name="download_card",
    ),
    path(
        "datasets/<int:pk>/versions/<int:number>/download/<str:fmt>/<str:split>/",
        views.version_download_view,
        name="download",
    ),
]
