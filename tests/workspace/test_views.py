"""The workspace pages: a project's dashboard and starting a project."""

import pytest
from django.urls import reverse

from apps.accounts.models import Membership, Project, Role
from apps.workspace.views import DASHBOARD_CARDS, _next_step
from tests.conftest import HTMX_HEADERS
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def test_dashboard_for_member(client_for, viewer, project):
    response = client_for(viewer).get(reverse("workspace:dashboard", args=[project.slug]))
    assert response.status_code == 200
    assert response.context["counts"]["members"] == 1
    assert b"No background work yet" in response.content
    # A viewer cannot start work, so the button is not offered.
    assert b"Check background worker" not in response.content


def test_dashboard_outsider_gets_404(client_for, outsider, project):
    response = client_for(outsider).get(reverse("workspace:dashboard", args=[project.slug]))
    assert response.status_code == 404


def test_dashboard_wrong_method(client_for, viewer, project):
    response = client_for(viewer).post(reverse("workspace:dashboard", args=[project.slug]))
    assert response.status_code == 405


def test_create_project_makes_creator_admin(client_for, db):
    user = UserFactory(username="maker")
    response = client_for(user).post(
        reverse("workspace:project_create"), {"name": "Support bots", "slug": "", "description": ""}
    )
    assert response.status_code == 302
    project = Project.objects.get(slug="support-bots")
    assert Membership.objects.get(project=project, user=user).role == Role.ADMIN


def test_create_project_duplicate_slug_htmx(client_for, project):
    user = UserFactory(username="maker")
    response = client_for(user).post(
        reverse("workspace:project_create"),
        {"name": "Acme", "slug": "acme", "description": ""},
        **HTMX_HEADERS,
    )
    assert response.status_code == 200
    assert b"<html" not in response.content  # only the form partial
    assert b"already exists" in response.content or b"is taken" in response.content
    assert Project.objects.filter(slug="acme").count() == 1


def test_create_project_htmx_success_redirects_client(client_for, db):
    response = client_for(UserFactory()).post(
        reverse("workspace:project_create"),
        {"name": "Bots", "slug": "bots", "description": ""},
        **HTMX_HEADERS,
    )
    assert response.status_code == 200
    assert response["HX-Redirect"] == "/p/bots/"


def test_dashboard_cards_link_to_what_they_count(client_for, viewer, project):
    response = client_for(viewer).get(reverse("workspace:dashboard", args=[project.slug]))
    cards = {card["key"]: card for card in response.context["cards"]}
    assert cards["members"]["value"] == 1
    assert cards["environments"]["url"] == reverse("environments:list", args=[project.slug])
    assert cards["datasets"]["url"] == reverse("datasets:list", args=[project.slug])
    assert cards["active_jobs"]["url"] == reverse("core:job_list", args=[project.slug]) + (
        "?status=running"
    )
    assert list(cards) == [key for key, *_ in DASHBOARD_CARDS]


def test_a_new_project_is_told_what_to_do_next(client_for, db):
    user = UserFactory(username="maker")
    client = client_for(user)
    client.post(
        reverse("workspace:project_create"), {"name": "Fresh", "slug": "", "description": ""}
    )
    page = client.get(reverse("workspace:dashboard", args=["fresh"])).content.decode()
    step = page.split('data-testid="next-step"')[1].split("</p>")[0]
    # the project starts with the capability catalogue: environments come next
    assert 'data-step="environments"' in step
    assert f'href="{reverse("synthesis:create", args=["fresh"])}"' in step


@pytest.mark.parametrize(
    ("counts", "step"),
    [
        ({"capabilities": 0}, "capabilities"),
        ({"capabilities": 3, "environments": 2, "valid_environments": 0}, "valid_environments"),
        ({"capabilities": 3, "environments": 2, "valid_environments": 2, "runs": 0}, "runs"),
        (
            {"capabilities": 3, "environments": 2, "valid_environments": 2, "runs": 9}
            | {"demonstrations_pending": 4},
            "demonstrations_pending",
        ),
        (
            {"capabilities": 3, "environments": 2, "valid_environments": 2, "runs": 9}
            | {"demonstrations_pending": 0, "datasets": 0},
            "datasets",
        ),
        (
            {"capabilities": 3, "environments": 2, "valid_environments": 2, "runs": 9}
            | {"demonstrations_pending": 0, "datasets": 1},
            "training",
        ),
    ],
)
def test_the_next_step_is_the_first_stage_not_done(project, counts, step):
    assert _next_step(project, counts)["key"] == step


def test_a_viewer_is_not_offered_a_next_step(client_for, viewer, project):
    page = client_for(viewer).get(reverse("workspace:dashboard", args=[project.slug]))
    assert b'data-testid="next-step"' not in page.content
