"""The job pages keep the ``core`` namespace (their templates and links name it)."""

from django.urls import path

from apps.accounts import job_views as views

app_name = "core"

urlpatterns = [
    path("p/<slug:slug>/jobs/", views.project_job_list, name="job_list"),
    path("p/<slug:slug>/jobs/worker-check/", views.worker_check_create, name="worker_check"),
    path("jobs/<int:pk>/", views.job_detail, name="job_detail"),
    path("jobs/<int:pk>/status/", views.job_status, name="job_status"),
    path("jobs/<int:pk>/cancel/", views.job_cancel_view, name="job_cancel"),
]
