"""The edit forms of an environment, its tools and records, and the whole-spec editor."""

import json

import pytest
from django.urls import reverse

from apps.environments.models import (
    Environment,
    EnvironmentStatus,
    ServiceRecord,
    ToolSchema,
)
from apps.environments.specs import environment_spec
from tests.conftest import HTMX_HEADERS
from tests.environments.page_helpers import html, snapshot, tab

pytestmark = pytest.mark.django_db


# --- detail page: access, tabs, htmx ---------------------------------------------------------


# --- overview ---------------------------------------------------------------------------------


# --- services, records ------------------------------------------------------------------------


# --- tools, tasks -----------------------------------------------------------------------------


# --- validation and spec tabs -----------------------------------------------------------------


# --- who sees edit controls -------------------------------------------------------------------


# --- grader edit: the full checklist ----------------------------------------------------------


# --- tasks, tools, records, environment -------------------------------------------------------


def test_tool_edit_create_delete(client_for, author, viewer, environment):
    tool = environment.tools.order_by("position")[2]  # send_email
    client = client_for(author)
    url = reverse("environments:tool_edit", args=[tool.pk])
    form = client.get(url).context["form"]
    assert json.loads(form["binding"].value()) == tool.binding
    data = {
        "name": tool.name,
        "description": "Send it.",
        "parameters": json.dumps(tool.parameters),
        "binding": json.dumps(tool.binding),
        "faults": json.dumps({"rate": 0.1, "kinds": ["timeout"]}),
    }
    assert client_for(viewer).post(url, data).status_code == 403
    response = client_for(author).post(url, data)
    assert response["Location"] == tab(environment, "tools") + "#tool-2"
    tool.refresh_from_db()
    assert (tool.description, tool.faults) == ("Send it.", {"rate": 0.1, "kinds": ["timeout"]})
    create = reverse("environments:tool_create", args=[environment.pk])
    response = client_for(author).post(create, {**data, "name": "send_email_2", "faults": ""})
    assert response["Location"] == tab(environment, "tools") + "#tool-8"
    new = ToolSchema.objects.get(environment=environment, name="send_email_2")
    assert new.faults == {}
    response = client_for(author).post(reverse("environments:tool_delete", args=[new.pk]))
    assert response.status_code == 302
    assert not ToolSchema.objects.filter(pk=new.pk).exists()


def test_record_create_edit_delete(client_for, author, viewer, environment):
    client = client_for(author)
    create = reverse("environments:record_create", args=[environment.pk])
    assert client.get(create, {"target": "env|contacts|people"}).status_code == 200
    data = {"id": "p-new", "name": "New Person", "email": "new@acme.test"}
    response = client.post(create, {"target": "env|contacts|people", "data": json.dumps(data)})
    assert response["Location"] == tab(environment, "services") + "#collection-contacts-people"
    record = ServiceRecord.objects.get(environment=environment, record_id="p-new")
    assert record.data == data and record.task is None
    edit = reverse("environments:record_edit", args=[record.pk])
    response = client.post(edit, {"data": json.dumps({"name": "no id"})})
    assert "A record is a JSON object with a non-empty string “id”." in html(response)
    assert client_for(viewer).post(edit, {"data": json.dumps(data)}).status_code == 403
    changed = {**data, "name": "Renamed"}
    response = client_for(author).post(edit, {"data": json.dumps(changed)})
    assert response.status_code == 302
    record.refresh_from_db()
    assert record.data == changed
    response = client_for(author).post(reverse("environments:record_delete", args=[record.pk]))
    assert response.status_code == 302
    assert not ServiceRecord.objects.filter(pk=record.pk).exists()
    assert Environment.objects.get(pk=environment.pk).revision == 4


def test_record_create_for_a_task(client_for, author, environment):
    task = environment.tasks.order_by("position")[1]
    data = {"id": "p-task", "name": "Task Person", "email": "t@acme.test"}
    response = client_for(author).post(
        reverse("environments:record_create", args=[environment.pk]),
        {"target": f"{task.pk}|contacts|people", "data": json.dumps(data)},
    )
    assert (
        response["Location"] == tab(environment, "services") + "#task-1-collection-contacts-people"
    )
    assert ServiceRecord.objects.get(record_id="p-task").task == task


def test_environment_edit(client_for, author, viewer, outsider, environment):
    url = reverse("environments:edit", args=[environment.pk])
    data = {"name": "Renamed", "domain": "ops", "description": "New."}
    before = snapshot(environment)
    assert client_for(viewer).post(url, data).status_code == 403
    assert client_for(outsider).post(url, data).status_code == 404
    assert snapshot(environment) == before
    client = client_for(author)
    response = client.post(url, {**data, "name": ""}, **HTMX_HEADERS)
    assert response.status_code == 200 and "This field is required." in html(response)
    response = client.post(url, data)
    assert response["Location"] == tab(environment, "overview")
    environment.refresh_from_db()
    assert (environment.name, environment.domain, environment.revision) == ("Renamed", "ops", 2)


# --- whole-spec editor ------------------------------------------------------------------------


def test_spec_editor_get_prefills_the_canonical_document(client_for, author, environment):
    response = client_for(author).get(reverse("environments:edit_spec", args=[environment.pk]))
    assert json.loads(response.context["form"]["spec"].value()) == environment_spec(environment)
    assert "The static checks find no problems." in html(response)


def test_spec_editor_syntax_error_has_line_and_column(client_for, author, environment):
    text = json.dumps(environment_spec(environment), indent=2).replace(
        '"domain": "operations",', '"domain": "operations"', 1
    )
    before = snapshot(environment)
    url = reverse("environments:edit_spec", args=[environment.pk])
    client = client_for(author)
    response = client.post(url, {"spec": text})
    assert response.status_code == 200
    syntax = response.context["syntax"]
    line = text.splitlines().index('  "domain": "operations"') + 2
    assert (syntax.line, syntax.column) == (line, 3)
    response = client.post(url, {"spec": text}, **HTMX_HEADERS)
    body = html(response)
    assert body.lstrip().startswith('<div id="spec-editor"')
    assert f"JSON syntax error at line {line}, column 3:" in body
    assert f'data-jump-line="{line}"' in body
    assert snapshot(environment) == before


def test_spec_editor_refuses_schema_problems(client_for, author, environment):
    document = environment_spec(environment)
    document["tasks"][0]["graders"][0]["weight"] = "heavy"
    text = json.dumps(document, indent=2)
    before = snapshot(environment)
    response = client_for(author).post(
        reverse("environments:edit_spec", args=[environment.pk]), {"spec": text}
    )
    assert response.status_code == 200
    problems = response.context["problems"]
    assert problems and problems[0]["pointer"].startswith("/tasks/0/graders/0")
    assert text.splitlines()[problems[0]["line"] - 1].strip().startswith('"weight": "heavy"') or (
        problems[0]["pointer"] == "/tasks/0/graders/0"
    )
    assert "Nothing was saved." in html(response)
    assert snapshot(environment) == before


def test_spec_editor_saves_with_static_problems_listed_by_line(client_for, author, environment):
    document = environment_spec(environment)
    document["tasks"][0]["graders"][0]["check"]["query"] = "length(email.nowhere)"
    text = json.dumps(document, indent=2)
    client = client_for(author)
    url = reverse("environments:edit_spec", args=[environment.pk])
    response = client.post(url, {"spec": text})
    assert response.status_code == 302 and response["Location"] == url
    environment.refresh_from_db()
    assert (environment.revision, environment.status) == (2, EnvironmentStatus.DRAFT)
    assert environment_spec(environment)["tasks"][0]["graders"][0]["check"]["query"] == (
        "length(email.nowhere)"
    )
    page = client.get(url)
    problem = next(p for p in page.context["problems"] if p["code"] == "unknown_collection")
    assert problem["pointer"].startswith("/tasks/0/graders/0/check")
    shown = page.context["form"]["spec"].value().splitlines()[problem["line"] - 1]
    assert "email.nowhere" in shown


def test_spec_editor_clean_save_redirects_to_overview(client_for, author, environment):
    document = environment_spec(environment)
    document["description"] = "Rewritten."
    response = client_for(author).post(
        reverse("environments:edit_spec", args=[environment.pk]), {"spec": json.dumps(document)}
    )
    assert response["Location"] == tab(environment, "overview")
    environment.refresh_from_db()
    assert environment.description == "Rewritten." and environment.revision == 2


def test_spec_editor_access(client, client_for, viewer, outsider, environment):
    url = reverse("environments:edit_spec", args=[environment.pk])
    text = json.dumps(environment_spec(environment))
    before = snapshot(environment)
    assert client.get(url).status_code == 302
    assert client_for(outsider).get(url).status_code == 404
    assert client_for(viewer).get(url).status_code == 403
    assert client_for(viewer).post(url, {"spec": text}).status_code == 403
    assert client_for(viewer).put(url).status_code == 405
    assert snapshot(environment) == before


# --- escaping ---------------------------------------------------------------------------------


# --- query counts stay flat -------------------------------------------------------------------


def test_tool_edit_problem_is_placed_in_its_field(client_for, author, environment):
    tool = environment.tools.order_by("position")[2]
    binding = {**tool.binding, "op": "explode"}
    response = client_for(author).post(
        reverse("environments:tool_edit", args=[tool.pk]),
        {
            "name": tool.name,
            "description": "",
            "parameters": json.dumps(tool.parameters, indent=2),
            "binding": json.dumps(binding, indent=2),
            "faults": "",
        },
    )
    assert response.status_code == 200
    fields = response.context["form"].fields
    marks = json.loads(fields["binding"].widget.attrs["data-problems"])
    text = json.dumps(binding, indent=2).splitlines()
    assert [text[m["line"] - 1].strip() for m in marks] == ['"op": "explode",']
    assert json.loads(fields["parameters"].widget.attrs["data-problems"]) == []
    assert "in Binding, line 2" in html(response)


def test_spec_editor_problems_become_editor_marks(client_for, author, environment):
    document = environment_spec(environment)
    document["tasks"][0]["graders"][0]["check"]["query"] = "length(email.nowhere)"
    text = json.dumps(document, indent=2)
    url = reverse("environments:edit_spec", args=[environment.pk])
    client = client_for(author)
    client.post(url, {"spec": text})
    page = client.get(url)
    marks = json.loads(page.context["form"].fields["spec"].widget.attrs["data-problems"])
    located = [p for p in page.context["problems"] if p["line"]]
    assert [(m["line"], m["message"]) for m in marks] == [
        (p["line"], p["message"]) for p in located
    ]
    assert any("email.nowhere" in text.splitlines()[m["line"] - 1] for m in marks)
    broken = text.replace('"domain": "operations",', '"domain": "operations"', 1)
    response = client.post(url, {"spec": broken})
    marks = json.loads(response.context["form"].fields["spec"].widget.attrs["data-problems"])
    line = broken.splitlines().index('  "domain": "operations"') + 2
    assert marks == [
        {"line": line, "column": 3, "severity": "error", "message": "Expecting ',' delimiter."}
    ]
