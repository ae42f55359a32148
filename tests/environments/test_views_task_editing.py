"""A task's and its graders' edit forms."""

import copy
import json

import pytest
from django.urls import reverse

from apps.environments.models import (
    Environment,
    EnvironmentStatus,
    Grader,
    Task,
)
from apps.environments.services import (
    environment_import,
    environment_validate,
)
from apps.environments.specs import environment_spec
from tests.conftest import HTMX_HEADERS
from tests.environments.page_helpers import first_grader, grader_post, html, snapshot, tab

pytestmark = pytest.mark.django_db

TRIVIAL_CHECK = {"kind": "state", "query": "length(email.sent)", "op": ">=", "value": 0}


# --- detail page: access, tabs, htmx ---------------------------------------------------------


def test_grader_edit_get_prefills(client_for, author, environment):
    grader = first_grader(environment)
    response = client_for(author).get(reverse("environments:grader_edit", args=[grader.pk]))
    assert response.status_code == 200
    form = response.context["form"]
    assert form["key"].value() == "event-booked"
    assert json.loads(form["check_spec"].value()) == grader.check_spec


def test_grader_edit_saves_bumps_revision_and_resets_to_draft(client_for, author, environment):
    environment_validate(environment=environment)
    assert Environment.objects.get(pk=environment.pk).status == EnvironmentStatus.VALID
    grader = first_grader(environment)
    response = client_for(author).post(
        reverse("environments:grader_edit", args=[grader.pk]),
        grader_post(grader, weight="3", check_spec=json.dumps(TRIVIAL_CHECK)),
        follow=True,
    )
    assert response.redirect_chain[-1][0] == tab(environment, "tasks") + "#task-0-grader-0"
    grader.refresh_from_db()
    assert grader.weight == 3.0 and grader.check_spec == TRIVIAL_CHECK
    environment.refresh_from_db()
    assert (environment.revision, environment.status) == (2, EnvironmentStatus.DRAFT)
    body = html(response)
    assert "Edited: revision 2, needs validation." in body


def test_grader_edit_htmx_success_redirects_the_client(client_for, author, environment):
    grader = first_grader(environment)
    response = client_for(author).post(
        reverse("environments:grader_edit", args=[grader.pk]),
        grader_post(grader, description="New words"),
        **HTMX_HEADERS,
    )
    assert response.status_code == 200
    assert response["HX-Redirect"] == tab(environment, "tasks") + "#task-0-grader-0"


def test_grader_edit_json_syntax_error_reports_line_and_column(client_for, author, environment):
    grader = first_grader(environment)
    before = snapshot(environment)
    response = client_for(author).post(
        reverse("environments:grader_edit", args=[grader.pk]),
        grader_post(grader, check_spec='{\n  "kind": "state",\n  "query": oops\n}'),
        **HTMX_HEADERS,
    )
    assert response.status_code == 200
    body = html(response).lstrip()
    assert body.startswith('<form method="post"')  # only the form partial
    assert "Line 3, column 12: Expecting value." in body
    assert snapshot(environment) == before


def test_grader_edit_schema_breaking_change_is_refused(client_for, author, environment):
    grader = first_grader(environment)
    before = snapshot(environment)
    response = client_for(author).post(
        reverse("environments:grader_edit", args=[grader.pk]),
        grader_post(grader, check_spec=json.dumps({"kind": "telepathy"})),
    )
    assert response.status_code == 200
    body = html(response)
    assert "That change would make the spec invalid" in body
    assert "Nothing was saved." in body
    assert 'data-testid="problem-link"' in body
    assert f'href="{tab(environment, "tasks")}#task-0-grader-0"' in body
    assert snapshot(environment) == before
    grader.refresh_from_db()
    assert grader.check_spec != {"kind": "telepathy"}


def test_grader_edit_viewer_403_nothing_changed(client_for, viewer, environment):
    grader = first_grader(environment)
    before = snapshot(environment)
    client = client_for(viewer)
    url = reverse("environments:grader_edit", args=[grader.pk])
    assert client.get(url).status_code == 403
    assert client.post(url, grader_post(grader, weight="9")).status_code == 403
    assert snapshot(environment) == before
    assert Grader.objects.get(pk=grader.pk).weight == grader.weight


def test_grader_edit_outsider_anonymous_and_method(client, client_for, outsider, environment):
    grader = first_grader(environment)
    url = reverse("environments:grader_edit", args=[grader.pk])
    assert client.get(url).status_code == 302
    assert client_for(outsider).post(url, grader_post(grader)).status_code == 404
    client.logout()
    assert client.post(url, grader_post(grader)).status_code == 302


def test_grader_edit_sets_and_clears_the_capability_mark(client_for, author, environment):
    grader = first_grader(environment)
    assert grader.capability == "resolve-conflicts"
    client = client_for(author)
    url = reverse("environments:grader_edit", args=[grader.pk])
    assert client.get(url).context["form"].initial["capability"] == "resolve-conflicts"
    client.post(url, grader_post(grader, capability=""))
    grader.refresh_from_db()
    assert grader.capability == ""
    assert "capability" not in environment_spec(environment)["tasks"][0]["graders"][0]
    client.post(url, grader_post(grader, capability="disambiguate-contacts"))
    environment.refresh_from_db()
    spec_grader = environment_spec(environment)["tasks"][0]["graders"][0]
    assert spec_grader["capability"] == "disambiguate-contacts"


def test_grader_edit_wrong_method(client_for, author, environment):
    url = reverse("environments:grader_edit", args=[first_grader(environment).pk])
    assert client_for(author).delete(url).status_code == 405


def test_grader_create_and_delete(client_for, author, viewer, environment):
    task = environment.tasks.order_by("position").first()
    client = client_for(author)
    url = reverse("environments:grader_create", args=[task.pk])
    assert client.get(url).status_code == 200
    response = client.post(
        url,
        {
            "key": "extra",
            "description": "",
            "category": "safety",
            "weight": "1",
            "at_turn": "",
            "check_spec": json.dumps(TRIVIAL_CHECK),
        },
    )
    assert response.status_code == 302
    assert response["Location"] == tab(environment, "tasks") + "#task-0-grader-6"
    grader = task.graders.get(key="extra")
    assert grader.category == "safety"
    assert Environment.objects.get(pk=environment.pk).revision == 2
    delete = reverse("environments:grader_delete", args=[grader.pk])
    assert client.get(delete).status_code == 405
    assert client_for(viewer).post(delete).status_code == 403
    assert Grader.objects.filter(pk=grader.pk).exists()
    client = client_for(author)
    response = client.post(delete, **HTMX_HEADERS)
    assert response["HX-Redirect"] == tab(environment, "tasks") + "#task-0"
    assert not Grader.objects.filter(pk=grader.pk).exists()
    assert Environment.objects.get(pk=environment.pk).revision == 3


def test_task_edit_round_trips_and_saves(client_for, author, environment):
    task = environment.tasks.order_by("position")[1]
    client = client_for(author)
    url = reverse("environments:task_edit", args=[task.pk])
    form = client.get(url).context["form"]
    assert form["reveals_when_asked"].value() == "It is the Q3 marketing budget: 42,000 EUR."
    before = environment_spec(environment)
    # Saving the form unchanged leaves the document unchanged (but is still a revision).
    response = client.post(url, task_post(task))
    assert response.status_code == 302, response.context["form"].errors
    assert environment_spec(environment) == before
    response = client.post(
        url, task_post(task, title="Clarify first", constraints="One\n\nTwo ", split="eval")
    )
    assert response["Location"] == tab(environment, "tasks") + "#task-1"
    task.refresh_from_db()
    assert (task.title, task.constraints, task.split) == ("Clarify first", ["One", "Two"], "eval")
    assert Environment.objects.get(pk=environment.pk).revision == 3


def test_task_edit_bad_turns_refused(client_for, author, environment):
    task = environment.tasks.order_by("position")[0]
    before = snapshot(environment)
    client = client_for(author)
    url = reverse("environments:task_edit", args=[task.pk])
    response = client.post(url, task_post(task, turns='{"message": "hi"}'))
    assert "Expected a list [" in html(response)
    response = client.post(url, task_post(task, turns="[]"))
    assert response.status_code == 200
    assert "Nothing was saved." in html(response)
    assert snapshot(environment) == before


def test_task_create_and_delete(client_for, author, viewer, environment):
    source = environment.tasks.order_by("position")[0]
    client = client_for(author)
    url = reverse("environments:task_create", args=[environment.pk])
    assert client.get(url).status_code == 200
    assert client_for(viewer).post(url, task_post(source, key="copy")).status_code == 403
    assert environment.tasks.count() == 3
    graders = json.dumps(
        [{"id": "g", "category": "completion", "weight": 1, "check": TRIVIAL_CHECK}]
    )
    response = client_for(author).post(url, task_post(source, key="copy", graders="[]"))
    assert "A task needs at least one grader." in html(response)
    response = client_for(author).post(url, task_post(source, key="copy", graders=graders))
    assert response["Location"] == tab(environment, "tasks") + "#task-3"
    task = environment.tasks.get(key="copy")
    assert task.turns == source.turns
    assert [(g.key, g.check_spec) for g in task.graders.all()] == [("g", TRIVIAL_CHECK)]
    response = client_for(author).post(reverse("environments:task_delete", args=[task.pk]))
    assert response.status_code == 302
    assert not Task.objects.filter(pk=task.pk).exists()


def test_deleting_the_last_task_is_refused(client_for, author, project, example_spec):
    spec = copy.deepcopy(example_spec)
    spec["tasks"] = spec["tasks"][:1]
    environment = environment_import(project=project, spec=spec, user=author)
    task = environment.tasks.get()
    response = client_for(author).post(
        reverse("environments:task_delete", args=[task.pk]), follow=True
    )
    assert "An environment needs at least one task." in html(response)
    assert Task.objects.filter(pk=task.pk).exists()


def test_grader_edit_problem_is_placed_at_its_line_in_the_check(client_for, author, environment):
    grader = first_grader(environment)
    before = snapshot(environment)
    check = (
        '{\n  "kind": "state",\n  "query": "length(email.sent)",\n  "op": "bogus",\n  "value": 1\n}'
    )
    response = client_for(author).post(
        reverse("environments:grader_edit", args=[grader.pk]),
        grader_post(grader, check_spec=check),
        **HTMX_HEADERS,
    )
    assert response.status_code == 200
    body = html(response)
    assert body.lstrip().startswith('<form method="post"')
    marks = json.loads(response.context["form"].fields["check_spec"].widget.attrs["data-problems"])
    assert [(m["line"], m["severity"]) for m in marks] == [(4, "error")]
    assert marks[0]["message"].startswith("'bogus' is not one of")
    assert "in Check, line 4" in body
    assert snapshot(environment) == before


def task_post(task, **changes) -> dict:
    data = {
        "key": task.key,
        "title": task.title,
        "split": task.split,
        "capabilities": [link.capability.slug for link in task.capability_links.all()],
        "system": task.system,
        "constraints": "\n".join(task.constraints),
        "persona": (task.user or {}).get("persona", ""),
        "reveals_when_asked": "\n".join((task.user or {}).get("reveals_when_asked", [])),
        "turns": json.dumps(task.turns),
        "reference_solution": json.dumps(task.reference_solution),
        "scoring": json.dumps(task.scoring) if task.scoring else "",
    }
    data.update(changes)
    return data
