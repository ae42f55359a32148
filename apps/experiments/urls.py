from django.urls import path

from apps.experiments import views

app_name = "experiments"

urlpatterns = [
    path("p/<slug:slug>/experiments/", views.experiment_list_view, name="list"),
    path("p/<slug:slug>/experiments/new/", views.experiment_create_view, name="create"),
    path("experiments/<int:pk>/", views.experiment_detail_view, name="detail"),
    path("experiments/<int:pk>/continue/", views.experiment_continue_view, name="continue"),
    path("experiments/<int:pk>/weaknesses/", views.experiment_weaknesses_view, name="weaknesses"),
    path(
        "experiments/<int:pk>/results.csv",
        views.experiment_results_view,
        {"fmt": "csv"},
        name="results_csv",
    ),
    path(
        "experiments/<int:pk>/results.md",
        views.experiment_results_view,
        {"fmt": "md"},
        name="results_md",
    ),
]
