from django.urls import path

from apps.serving import views

app_name = "serving"

urlpatterns = [
    path("p/<slug:slug>/serving/", views.server_list_view, name="list"),
    path("p/<slug:slug>/serving/start/", views.server_start_view, name="start"),
    path("serving/<int:pk>/", views.server_detail_view, name="detail"),
    path("serving/<int:pk>/stop/", views.server_stop_view, name="stop"),
]
