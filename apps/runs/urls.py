from django.urls import path

from apps.runs import views

app_name = "runs"

urlpatterns = [
    path("p/<slug:slug>/runs/", views.batch_list_view, name="batch_list"),
    path("p/<slug:slug>/runs/new/", views.batch_create_view, name="batch_create"),
    path("p/<slug:slug>/runs/evaluation/", views.evaluation_view, name="evaluation"),
    path("p/<slug:slug>/runs/leaderboard/", views.leaderboard_view, name="leaderboard"),
    path("runs/batches/<int:pk>/", views.batch_detail_view, name="batch_detail"),
    path("runs/batches/<int:pk>/progress/", views.batch_progress_view, name="batch_progress"),
    path("runs/batches/<int:pk>/groups/", views.batch_groups_view, name="batch_groups"),
    path("runs/batches/<int:pk>/cancel/", views.batch_cancel_view, name="batch_cancel"),
    path("runs/batches/<int:pk>/resume/", views.batch_resume_view, name="batch_resume"),
    path("runs/environment/<int:pk>/", views.environment_runs_view, name="environment_runs"),
    path("runs/compare/", views.run_compare_view, name="compare"),
    path("runs/<int:pk>/", views.run_detail_view, name="detail"),
]
