import pytest
from django.urls import reverse

from apps.accounts.models import ApiToken, Membership, Role
from tests.conftest import HTMX_HEADERS
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


# --- login and navigation -------------------------------------------------------------------


def test_anonymous_is_sent_to_login(client, project):
    for url in [
        reverse("accounts:home"),
        reverse("accounts:project_list"),
        reverse("workspace:dashboard", args=[project.slug]),
        reverse("accounts:member_list", args=[project.slug]),
        reverse("accounts:token_list"),
        reverse("accounts:password_change"),
    ]:
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith(reverse("accounts:login")), url


def test_login_page_and_login(client, admin, project):
    assert client.get(reverse("accounts:login")).status_code == 200
    response = client.post(
        reverse("accounts:login"), {"username": admin.username, "password": "secret-pass-123"}
    )
    assert response.status_code == 302
    response = client.get(reverse("accounts:home"))
    assert response["Location"] == reverse("workspace:dashboard", args=[project.slug])


def test_wrong_password_shows_error(client, admin):
    response = client.post(reverse("accounts:login"), {"username": admin.username, "password": "x"})
    assert response.status_code == 200
    assert b"did not match" in response.content


def test_home_without_projects_goes_to_project_list(client_for, db):
    client = client_for(UserFactory(username="newcomer"))
    assert client.get(reverse("accounts:home"))["Location"] == reverse("accounts:project_list")
    page = client.get(reverse("accounts:project_list"))
    assert b"not in any project yet" in page.content


def test_home_remembers_last_project(client_for, admin, project, other_project):
    Membership.objects.create(project=other_project, user=admin, role=Role.VIEWER)
    client = client_for(admin)
    client.get(reverse("workspace:dashboard", args=[other_project.slug]))
    assert client.get(reverse("accounts:home"))["Location"].endswith(f"/p/{other_project.slug}/")


@pytest.mark.parametrize("secure", [True, False])
def test_last_project_cookie_follows_the_session_cookie(
    client_for, admin, project, settings, secure
):
    """With DEBUG=false the session cookie is Secure, and so is the last-project cookie."""
    settings.SESSION_COOKIE_SECURE = secure
    response = client_for(admin).get(reverse("workspace:dashboard", args=[project.slug]))
    cookie = response.cookies["cw_last_project"]
    assert cookie.value == project.slug
    assert bool(cookie["secure"]) is secure
    assert cookie["httponly"] is True
    assert cookie["samesite"] == "Lax"


# --- dashboard --------------------------------------------------------------------------------


def test_project_switcher_lists_only_my_projects(client_for, admin, project, other_project):
    response = client_for(admin).get(reverse("workspace:dashboard", args=[project.slug]))
    assert b"Acme agents" in response.content
    assert b"Other team" not in response.content


# --- projects -------------------------------------------------------------------------------


def test_settings_admin_only(client_for, admin, author, project):
    url = reverse("accounts:project_settings", args=[project.slug])
    assert client_for(author).get(url).status_code == 403
    response = client_for(author).post(url, {"name": "Hijacked", "description": ""})
    assert response.status_code == 403
    project.refresh_from_db()
    assert project.name == "Acme agents"
    response = client_for(admin).post(url, {"name": "Acme 2", "description": "New"})
    assert response.status_code == 302
    project.refresh_from_db()
    assert (project.name, project.description) == ("Acme 2", "New")


def test_settings_invalid_htmx_rerenders_partial(client_for, admin, project):
    url = reverse("accounts:project_settings", args=[project.slug])
    response = client_for(admin).post(url, {"name": "", "description": ""}, **HTMX_HEADERS)
    assert response.status_code == 200
    assert b'id="settings-form"' in response.content
    assert b"<html" not in response.content


# --- members --------------------------------------------------------------------------------


def test_member_list_visible_to_viewer_without_controls(client_for, viewer, admin, project):
    response = client_for(viewer).get(reverse("accounts:member_list", args=[project.slug]))
    assert response.status_code == 200
    assert b"Add a member" not in response.content
    assert b"alice-admin" in response.content


def test_member_list_htmx_partial(client_for, admin, project):
    response = client_for(admin).get(
        reverse("accounts:member_list", args=[project.slug]), **HTMX_HEADERS
    )
    assert response.status_code == 200
    assert response.content.lstrip().startswith(b'<div id="members">')


def test_admin_adds_member(client_for, admin, project):
    UserFactory(username="newbie")
    response = client_for(admin).post(
        reverse("accounts:member_add", args=[project.slug]),
        {"username": "newbie", "role": "author"},
        **HTMX_HEADERS,
    )
    assert response.status_code == 200
    assert Membership.objects.get(project=project, user__username="newbie").role == Role.AUTHOR


def test_add_unknown_user_shows_error(client_for, admin, project):
    response = client_for(admin).post(
        reverse("accounts:member_add", args=[project.slug]), {"username": "ghost", "role": "viewer"}
    )
    assert response.status_code == 200
    assert "There is no user called “ghost”" in response.content.decode()
    assert Membership.objects.filter(project=project).count() == 1


def test_non_admin_cannot_add_member(client_for, reviewer, project):
    UserFactory(username="newbie")
    response = client_for(reviewer).post(
        reverse("accounts:member_add", args=[project.slug]), {"username": "newbie", "role": "admin"}
    )
    assert response.status_code == 403
    assert not Membership.objects.filter(user__username="newbie").exists()


def test_outsider_cannot_add_member(client_for, outsider, project):
    response = client_for(outsider).post(
        reverse("accounts:member_add", args=[project.slug]),
        {"username": "oscar-outsider", "role": "admin"},
    )
    assert response.status_code == 404
    assert not Membership.objects.filter(project=project, user=outsider).exists()


def test_admin_changes_role(client_for, admin, viewer, project):
    membership = Membership.objects.get(user=viewer)
    response = client_for(admin).post(
        reverse("accounts:member_role", args=[project.slug, membership.pk]), {"role": "reviewer"}
    )
    assert response.status_code == 302
    membership.refresh_from_db()
    assert membership.role == Role.REVIEWER


def test_last_admin_cannot_demote_themselves(client_for, admin, project):
    membership = Membership.objects.get(user=admin)
    client_for(admin).post(
        reverse("accounts:member_role", args=[project.slug, membership.pk]), {"role": "viewer"}
    )
    membership.refresh_from_db()
    assert membership.role == Role.ADMIN


def test_membership_of_other_project_is_404(client_for, admin, outsider, project):
    foreign = Membership.objects.get(user=outsider)
    response = client_for(admin).post(
        reverse("accounts:member_role", args=[project.slug, foreign.pk]), {"role": "viewer"}
    )
    assert response.status_code == 404
    foreign.refresh_from_db()
    assert foreign.role == Role.ADMIN


def test_admin_removes_member_htmx(client_for, admin, viewer, project):
    membership = Membership.objects.get(user=viewer)
    response = client_for(admin).post(
        reverse("accounts:member_remove", args=[project.slug, membership.pk]), **HTMX_HEADERS
    )
    assert response.status_code == 200
    table = response.content.split(b'data-testid="member-table"')[1]
    assert b"vera-viewer" not in table
    assert b"Removed vera-viewer" in response.content
    assert not Membership.objects.filter(pk=membership.pk).exists()


def test_author_cannot_remove_member(client_for, author, viewer, project):
    membership = Membership.objects.get(user=viewer)
    response = client_for(author).post(
        reverse("accounts:member_remove", args=[project.slug, membership.pk])
    )
    assert response.status_code == 403
    assert Membership.objects.filter(pk=membership.pk).exists()


def test_member_add_wrong_method(client_for, admin, project):
    assert (
        client_for(admin).get(reverse("accounts:member_add", args=[project.slug])).status_code
        == 405
    )


# --- tokens ---------------------------------------------------------------------------------


def test_token_create_shows_secret_once(client_for, viewer):
    client = client_for(viewer)
    response = client.post(reverse("accounts:token_create"), {"name": "laptop"}, **HTMX_HEADERS)
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    token = ApiToken.objects.get(user=viewer)
    secret = response.context["new_secret"]
    assert secret.startswith(f"cwe_{token.prefix}_")
    assert secret.encode() in response.content
    assert secret not in token.key_hash
    again = client.get(reverse("accounts:token_list"))
    assert secret.encode() not in again.content
    assert f"cwe_{token.prefix}_".encode() in again.content


def test_token_secret_has_a_copy_button(client_for, viewer):
    response = client_for(viewer).post(
        reverse("accounts:token_create"), {"name": "laptop"}, **HTMX_HEADERS
    )
    body = response.content.decode()
    secret = response.context["new_secret"]
    assert f'<code id="new-token-secret">{secret}</code>' in body
    assert 'data-copy="#new-token-secret" data-testid="copy-token" hidden>Copy</button>' in body


def test_token_create_get_goes_to_the_token_page(client_for, client, viewer):
    response = client_for(viewer).get(reverse("accounts:token_create"))
    assert response.status_code == 302
    assert response["Location"] == reverse("accounts:token_list")
    assert not ApiToken.objects.exists()
    assert client_for(viewer).put(reverse("accounts:token_create")).status_code == 405


def test_account_pages_keep_the_last_project(client_for, viewer, project, other_project):
    client = client_for(viewer)
    tokens = client.get(reverse("accounts:token_list")).content.decode()
    assert 'class="layout"' in tokens and "with-sidebar" not in tokens  # no project yet
    client.get(reverse("workspace:dashboard", args=[project.slug]))
    tokens = client.get(reverse("accounts:token_list")).content.decode()
    assert 'class="layout with-sidebar"' in tokens
    assert f'href="{reverse("workspace:dashboard", args=[project.slug])}"' in tokens
    assert f"<summary>{project.name}</summary>" in tokens
    # A project the user is not a member of never becomes the context.
    assert client.get(f"/p/{other_project.slug}/").status_code == 404
    tokens = client.get(reverse("accounts:password_change")).content.decode()
    assert f"<summary>{project.name}</summary>" in tokens
    assert other_project.name not in tokens


def test_token_create_requires_name(client_for, viewer):
    response = client_for(viewer).post(reverse("accounts:token_create"), {"name": "  "})
    assert response.status_code == 200
    assert not ApiToken.objects.exists()


def test_token_revoke(client_for, viewer):
    client = client_for(viewer)
    client.post(reverse("accounts:token_create"), {"name": "ci"})
    token = ApiToken.objects.get()
    response = client.post(reverse("accounts:token_revoke", args=[token.pk]))
    assert response.status_code == 302
    token.refresh_from_db()
    assert token.revoked_at is not None


def test_cannot_revoke_someone_elses_token(client_for, viewer, admin):
    client_for(viewer).post(reverse("accounts:token_create"), {"name": "mine"})
    token = ApiToken.objects.get()
    response = client_for(admin).post(reverse("accounts:token_revoke", args=[token.pk]))
    assert response.status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None
