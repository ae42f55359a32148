"""The capability pages, under the ``capabilities`` namespace (served by environments)."""

from django.urls import path

from apps.environments.views import capabilities as views

app_name = "capabilities"

urlpatterns = [
    path("p/<slug:slug>/capabilities/", views.capability_list_view, name="list"),
    path("p/<slug:slug>/capabilities/new/", views.capability_create_view, name="create"),
    path(
        "p/<slug:slug>/capabilities/catalogue/",
        views.capability_catalogue_seed_view,
        name="seed",
    ),
    path("p/<slug:slug>/coverage/", views.coverage, name="coverage"),
    path("capabilities/<int:pk>/", views.capability_detail, name="detail"),
    path("capabilities/<int:pk>/edit/", views.capability_edit, name="edit"),
    path("capabilities/<int:pk>/archive/", views.capability_archive_view, name="archive"),
    path("capabilities/<int:pk>/restore/", views.capability_restore_view, name="restore"),
]
