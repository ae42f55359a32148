from django.urls import path

from apps.curation import library_views, views

app_name = "curation"

urlpatterns = [
    path("p/<slug:slug>/review/", views.queue_view, name="queue"),
    path("p/<slug:slug>/review/start/", views.queue_start_view, name="queue_start"),
    path("p/<slug:slug>/review/adjudicate/", library_views.adjudicate_view, name="adjudicate"),
    path("p/<slug:slug>/review/settings/", library_views.settings_view, name="settings"),
    path("p/<slug:slug>/review/tags/", library_views.tag_create_view, name="tag_create"),
    path("p/<slug:slug>/review/<int:pk>/", views.review_view, name="review"),
    path("p/<slug:slug>/review/<int:pk>/move/", views.queue_move_view, name="queue_move"),
    path("p/<slug:slug>/demonstrations/", library_views.list_view, name="list"),
    path("p/<slug:slug>/demonstrations/regrade/", library_views.regrade_view, name="regrade"),
    path("demonstrations/<int:pk>/", views.detail_view, name="detail"),
    path("demonstrations/<int:pk>/claim/", views.claim_view, name="claim"),
    path("demonstrations/<int:pk>/release/", views.release_view, name="release"),
    path("demonstrations/<int:pk>/decide/", views.decide_view, name="decide"),
    path("demonstrations/<int:pk>/correct/", views.correct_view, name="correct"),
    path("demonstrations/<int:pk>/reopen/", views.reopen_view, name="reopen"),
    path(
        "demonstrations/<int:pk>/adjudicate/",
        library_views.adjudicate_decide_view,
        name="adjudicate_decide",
    ),
    path("review/tags/<int:pk>/", library_views.tag_update_view, name="tag_update"),
    path("runs/<int:pk>/promote/", views.promote_view, name="promote"),
]
