from django.urls import path

from apps.training import views

app_name = "training"

urlpatterns = [
    path("p/<slug:slug>/training/", views.job_list_view, name="list"),
    path("p/<slug:slug>/training/new/", views.job_create_view, name="create"),
    path("p/<slug:slug>/training/compare/", views.job_compare_view, name="compare"),
    path("p/<slug:slug>/training/compare/rl/", views.job_compare_rl_view, name="compare_rl"),
    path("p/<slug:slug>/training/templates/", views.template_list_view, name="templates"),
    path("training/<int:pk>/", views.job_detail_view, name="detail"),
    path("training/<int:pk>/cancel/", views.job_cancel_view, name="cancel"),
    path("training/models/<int:pk>/evaluate/", views.model_evaluate_view, name="model_evaluate"),
    path("training/models/<int:pk>/compare/", views.model_compare_view, name="model_compare"),
]
