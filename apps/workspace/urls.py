from django.urls import path

from apps.workspace import views

app_name = "workspace"

urlpatterns = [
    path("projects/new/", views.project_create_view, name="project_create"),
    path("p/<slug:slug>/", views.project_dashboard, name="dashboard"),
]
