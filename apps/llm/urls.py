from django.urls import path

from apps.llm import views

app_name = "llm"

urlpatterns = [
    path("p/<slug:slug>/models/", views.endpoint_list_view, name="endpoint_list"),
    path("p/<slug:slug>/models/new/", views.endpoint_create_view, name="endpoint_create"),
    path("p/<slug:slug>/models/judge/", views.judge_setting_view, name="judge_setting"),
    path("models/<int:pk>/", views.endpoint_detail_view, name="endpoint_detail"),
    path("models/<int:pk>/edit/", views.endpoint_edit_view, name="endpoint_edit"),
    path("models/<int:pk>/delete/", views.endpoint_delete_view, name="endpoint_delete"),
    path("models/<int:pk>/test/", views.endpoint_test_view, name="endpoint_test"),
    path("jobs/<int:pk>/llm-calls/", views.job_calls_view, name="job_calls"),
]
