from django.urls import path

from apps.experiments import views

app_name = "experiments"

urlpatterns = [
    path("p/<slug:slug>/experiments/", views.experiment_list_view, name="list"),
    path("p/<slug:slug>/experiments/new/", views.experiment_create_view, name="create"),
    path("experiments/<int:pk>/", views.experiment_detail_view, name="detail"),
]
