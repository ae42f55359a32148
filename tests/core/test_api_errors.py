"""Error replies quote what was sent, never all of it; free text has a size limit."""

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from apps.accounts.models import Membership, Project
from apps.capabilities.models import Capability
from apps.core.api import TRUNCATED, bounded
from apps.datasets.models import Dataset

pytestmark = pytest.mark.django_db


def test_a_huge_offending_value_is_cut_in_the_reply(api_client_for, admin, project):
    huge = "x" * 1_000_000
    url = reverse("api:membership_list", args=[project.pk])
    response = api_client_for(admin).post(url, {"username": "nobody", "role": huge}, format="json")
    assert response.status_code == 400
    assert response.json() == {
        "message": "The request is not valid.",
        "details": {"role": ['"' + "x" * 499 + TRUNCATED]},
    }
    assert len(response.content) < 1000
    assert Membership.objects.filter(project=project).count() == 1


def test_bounded_cuts_strings_lists_and_nesting():
    assert bounded("short") == "short"
    assert bounded({"k" * 600: ["v" * 600]}) == {"k" * 500 + TRUNCATED: ["v" * 500 + TRUNCATED]}
    assert bounded(list(range(103))) == [*range(100), f"{TRUNCATED} 3 more"]
    deep: list = []
    for _ in range(40):
        deep = [deep]
    cut = bounded(deep)
    for _ in range(32):
        cut = cut[0]
    assert cut == TRUNCATED
    assert bounded({"n": 1, "ok": None}) == {"n": 1, "ok": None}


# --- size limits on free text: model, form and API ---------------------------------------


@pytest.mark.parametrize(
    ("field", "limit"), [("description", 2000), ("guidance", 5000)], ids=["description", "guidance"]
)
def test_capability_texts_are_bounded(api_client_for, client_for, author, project, field, limit):
    response = api_client_for(author).post(
        reverse("api:capability_list"),
        {"project": project.pk, "name": "Long", field: "a" * (limit + 1)},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["details"] == {
        field: [f"Ensure this field has no more than {limit} characters."]
    }
    page = client_for(author).post(
        reverse("capabilities:create", args=[project.slug]),
        {"name": "Long", field: "a" * (limit + 1)},
    )
    assert page.status_code == 200
    assert page.context["form"].errors[field] == [
        f"Ensure this value has at most {limit} characters (it has {limit + 1})."
    ]
    assert not Capability.objects.filter(name="Long").exists()
    with pytest.raises(ValidationError) as error:
        Capability(
            project=project, slug="long", name="Long", **{field: "a" * (limit + 1)}
        ).full_clean()
    assert list(error.value.message_dict) == [field]
    # At the limit it is fine.
    response = api_client_for(author).post(
        reverse("api:capability_list"),
        {"project": project.pk, "name": "Long", field: "a" * limit},
        format="json",
    )
    assert response.status_code == 201


def test_project_and_dataset_descriptions_are_bounded(api_client_for, admin, project):
    api = api_client_for(admin)
    response = api.patch(
        reverse("api:project_detail", args=[project.pk]), {"description": "d" * 2001}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["details"] == {
        "description": ["Ensure this field has no more than 2000 characters."]
    }
    project.refresh_from_db()
    assert project.description == ""
    response = api.post(
        reverse("api:dataset_list", args=[project.pk]),
        {"name": "d", "description": "d" * 2001},
        format="json",
    )
    assert response.status_code == 400
    assert not Dataset.objects.exists()
    assert Project.objects.count() == 1


def test_a_page_error_quotes_a_huge_value_only_in_part(client_for, author, project):
    huge = "y" * 100_000
    response = client_for(author).post(
        reverse("runs:batch_create", args=[project.slug]), {"name": "b", "role": huge}
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert huge not in html
    expected = "Select a valid choice. " + "y" * 477 + "… (truncated)"
    assert f"<li>{expected}</li>" in html
