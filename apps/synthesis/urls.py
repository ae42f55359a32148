from django.urls import path

from apps.synthesis import views

app_name = "synthesis"

urlpatterns = [
    path("p/<slug:slug>/synthesis/", views.synthesis_list_view, name="list"),
    path("p/<slug:slug>/synthesis/new/", views.synthesis_create_view, name="create"),
    path("synthesis/<int:pk>/", views.synthesis_detail_view, name="detail"),
    path("synthesis/<int:pk>/cancel/", views.synthesis_cancel_view, name="cancel"),
    path("synthesis/<int:pk>/resume/", views.synthesis_resume_view, name="resume"),
    path("synthesis/slots/<int:pk>/", views.synthesis_slot_view, name="slot"),
]
