from django.contrib.auth import views as auth_views
from django.urls import path, reverse_lazy

from apps.accounts import views

app_name = "accounts"

urlpatterns = [
    path("", views.home, name="home"),
    path(
        "login/",
        auth_views.LoginView.as_view(
            template_name="accounts/login.html", redirect_authenticated_user=True
        ),
        name="login",
    ),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path(
        "account/password/",
        auth_views.PasswordChangeView.as_view(
            template_name="accounts/password_change.html",
            success_url=reverse_lazy("accounts:password_change_done"),
        ),
        name="password_change",
    ),
    path(
        "account/password/done/",
        auth_views.PasswordChangeDoneView.as_view(
            template_name="accounts/password_change_done.html"
        ),
        name="password_change_done",
    ),
    path("account/tokens/", views.token_list, name="token_list"),
    path("account/tokens/new/", views.token_create, name="token_create"),
    path("account/tokens/<int:pk>/revoke/", views.token_revoke, name="token_revoke"),
    path("projects/", views.project_list, name="project_list"),
    path("p/<slug:slug>/settings/", views.project_settings, name="project_settings"),
    path("p/<slug:slug>/members/", views.member_list, name="member_list"),
    path("p/<slug:slug>/members/add/", views.member_add, name="member_add"),
    path("p/<slug:slug>/members/<int:pk>/role/", views.member_change_role, name="member_role"),
    path("p/<slug:slug>/members/<int:pk>/remove/", views.member_remove, name="member_remove"),
]
