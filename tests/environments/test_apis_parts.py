"""The REST API of an environment's parts: tasks, graders, tools and records."""

import pytest

from apps.environments.models import (
    Environment,
    Grader,
    ServiceRecord,
    Task,
    ToolSchema,
)
from apps.environments.services import environment_import, environment_validate
from apps.environments.specs import environment_spec
from coworkenv_engine import spec as engine_spec

pytestmark = pytest.mark.django_db

API = "/api/v1"


@pytest.fixture
def parts(environment):
    task = environment.tasks.get(key="book-q3-review")
    return {
        "environment": environment,
        "task": task,
        "grader": task.graders.get(key="event-booked"),
        "tool": environment.tools.get(name="search_email"),
        "record": environment.records.get(service="contacts", record_id="p1"),
    }


def state(environment: Environment):
    """Everything a refused write must leave as it was."""
    environment.refresh_from_db()
    return (
        environment.revision,
        environment.status,
        environment.spec_hash,
        engine_spec.spec_hash(environment_spec(environment)),
        Task.objects.count(),
        Grader.objects.count(),
        ToolSchema.objects.count(),
        ServiceRecord.objects.count(),
    )


def assert_edited(environment: Environment, revision: int = 2) -> None:
    environment.refresh_from_db()
    assert (environment.revision, environment.status) == (revision, "draft")
    assert environment.spec_hash == engine_spec.spec_hash(environment_spec(environment))


def results(response) -> list[dict]:
    assert response.status_code == 200, response.content
    return response.json()["results"]


def pointers(response) -> list[str]:
    assert response.status_code == 400, response.content
    return [p["pointer"] for p in response.json()["details"]["problems"]]


NEW_GRADER = {
    "key": "polite",
    "description": "Says what it did.",
    "category": "communication",
    "weight": 0.5,
    "check": {"kind": "response", "scope": "final", "contains": "booked"},
}


def new_task(**overrides) -> dict:
    task = {
        "key": "find-omar",
        "title": "Find Omar's address",
        "split": "eval",
        "system": "You are the operations assistant.\n",
        "constraints": ["Never email anyone outside acme.test."],
        "capabilities": ["resolve-conflicts"],
        "turns": [{"message": "What is Omar's email address?"}],
        "reference_solution": [
            {
                "turn": 0,
                "calls": [{"tool": "search_people", "arguments": {"query": "Omar"}}],
                "reply": "omar@acme.test",
            }
        ],
        "graders": [
            {
                "key": "says-address",
                "category": "completion",
                "check": {"kind": "response", "scope": "final", "contains": "omar@acme.test"},
            }
        ],
    }
    task.update(overrides)
    return task


# --- tasks ----------------------------------------------------------------------------------


def test_task_list(api_client_for, viewer, parts):
    environment = parts["environment"]
    rows = results(api_client_for(viewer).get(f"{API}/environments/{environment.pk}/tasks/"))
    assert [(r["key"], r["split"], len(r["graders"])) for r in rows] == [
        ("book-q3-review", "train", 6),
        ("budget-figure-clarify", "train", 4),
        ("notice-moved-dentist", "eval", 7),
    ]
    assert rows[0]["capabilities"] == [
        "cross-service-orchestration",
        "resolve-conflicts",
        "disambiguate-contacts",
    ]
    assert [g["key"] for g in rows[1]["graders"]] == [
        "asked-first",
        "figure-sent",
        "internal-only",
        "no-collateral",
    ]


@pytest.mark.parametrize(
    ("params", "keys"),
    [
        ({"split": "eval"}, ["notice-moved-dentist"]),
        ({"capability": "resolve-conflicts"}, ["book-q3-review", "notice-moved-dentist"]),
        ({"capability": "clarify-before-acting", "split": "eval"}, []),
        ({"split": ""}, ["book-q3-review", "budget-figure-clarify", "notice-moved-dentist"]),
    ],
)
def test_task_list_filters(api_client_for, viewer, environment, params, keys):
    url = f"{API}/environments/{environment.pk}/tasks/"
    assert [r["key"] for r in results(api_client_for(viewer).get(url, params))] == keys


def test_task_list_bad_filter_400(api_client_for, viewer, environment):
    response = api_client_for(viewer).get(
        f"{API}/environments/{environment.pk}/tasks/", {"split": "holdout"}
    )
    assert response.status_code == 400
    assert list(response.json()["details"]) == ["split"]


def test_task_list_query_count_is_flat(
    api_client_for, viewer, author, project, environment, django_assert_num_queries
):
    bigger = environment_import(
        project=project,
        spec={
            **environment_spec(environment),
            "tasks": [
                {**task, "key": f"{task['key']}-{i}"}
                for i in range(5)
                for task in environment_spec(environment)["tasks"]
            ],
        },
        user=author,
    )
    assert bigger.tasks.count() == 15
    api = api_client_for(viewer)
    api.get(f"{API}/environments/{environment.pk}/tasks/")  # warm the membership cache
    with django_assert_num_queries(5):  # environment, count, tasks, graders, capabilities
        api.get(f"{API}/environments/{environment.pk}/tasks/")
    with django_assert_num_queries(5):
        assert len(results(api.get(f"{API}/environments/{bigger.pk}/tasks/"))) == 15


def test_task_retrieve(api_client_for, viewer, parts):
    task = parts["task"]
    body = api_client_for(viewer).get(f"{API}/tasks/{task.pk}/").json()
    assert {
        k: v for k, v in body.items() if k not in ("graders", "turns", "reference_solution")
    } == {
        "id": task.pk,
        "environment": parts["environment"].pk,
        "position": 0,
        "key": "book-q3-review",
        "title": "Book the Q3 review around a conflict",
        "split": "train",
        "system": task.system,
        "constraints": ["Never email anyone outside acme.test."],
        "capabilities": [
            "cross-service-orchestration",
            "resolve-conflicts",
            "disambiguate-contacts",
        ],
        "user": {"persona": "", "reveals_when_asked": []},
        "scoring": None,
        "metadata": {},
        "record_count": 0,
    }
    assert body["turns"] == task.turns
    assert body["graders"][0]["key"] == "event-booked"


def test_task_create_with_graders(api_client_for, author, environment):
    response = api_client_for(author).post(
        f"{API}/environments/{environment.pk}/tasks/", new_task(), format="json"
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["key"], body["position"], body["split"], body["capabilities"]) == (
        "find-omar",
        3,
        "eval",
        ["resolve-conflicts"],
    )
    assert body["system"] == "You are the operations assistant.\n"  # not trimmed
    assert [(g["key"], g["category"], g["weight"]) for g in body["graders"]] == [
        ("says-address", "completion", 1.0)
    ]
    assert_edited(environment)
    document = environment_spec(environment)
    assert document["tasks"][3]["key"] == "find-omar"
    assert document["tasks"][3]["graders"][0]["id"] == "says-address"
    assert document["tasks"][3]["graders"][0]["check"] == {
        "kind": "response",
        "scope": "final",
        "contains": "omar@acme.test",
    }


@pytest.mark.parametrize(
    ("body", "status_message"),
    [
        (new_task(capabilities=["nope"]), "Unknown capability: nope."),
        (
            new_task(key="book-q3-review"),
            "__all__: Task with this Environment and Key already exists.",
        ),
        (
            new_task(graders=[NEW_GRADER, NEW_GRADER]),
            "Two graders share the key: polite.",
        ),
    ],
)
def test_task_create_refusals_change_nothing(
    api_client_for, author, environment, body, status_message
):
    before = state(environment)
    response = api_client_for(author).post(
        f"{API}/environments/{environment.pk}/tasks/", body, format="json"
    )
    assert response.status_code == 400
    assert response.json()["message"] == status_message
    assert state(environment) == before


def test_task_create_that_breaks_the_schema_is_400_with_pointer(
    api_client_for, author, environment
):
    before = state(environment)
    response = api_client_for(author).post(
        f"{API}/environments/{environment.pk}/tasks/",
        new_task(turns=[], reference_solution="first search"),
        format="json",
    )
    assert {"/tasks/3/turns", "/tasks/3/reference_solution"} <= set(pointers(response))
    assert response.json()["message"].startswith("That change would make the spec invalid")
    assert state(environment) == before


def test_task_create_needs_graders_and_turns(api_client_for, author, environment):
    before = state(environment)
    response = api_client_for(author).post(
        f"{API}/environments/{environment.pk}/tasks/", {"key": "bare", "graders": []}, format="json"
    )
    assert response.status_code == 400
    assert sorted(response.json()["details"]) == ["graders", "turns"]
    assert state(environment) == before


def test_task_update(api_client_for, author, parts):
    task = parts["task"]
    response = api_client_for(author).patch(
        f"{API}/tasks/{task.pk}/",
        {"title": "Book it", "capabilities": ["resolve-conflicts"], "split": "eval"},
        format="json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["title"], body["split"], body["capabilities"]) == (
        "Book it",
        "eval",
        ["resolve-conflicts"],
    )
    assert body["key"] == "book-q3-review"  # unchanged: not sent
    assert_edited(parts["environment"])


def test_task_update_that_breaks_the_schema_changes_nothing(api_client_for, author, parts):
    before = state(parts["environment"])
    response = api_client_for(author).patch(
        f"{API}/tasks/{parts['task'].pk}/", {"turns": [], "title": "Nope"}, format="json"
    )
    assert "/tasks/0/turns" in pointers(response)
    assert state(parts["environment"]) == before
    parts["task"].refresh_from_db()
    assert parts["task"].title == "Book the Q3 review around a conflict"


def test_task_delete(api_client_for, author, environment):
    api = api_client_for(author)
    tasks = list(environment.tasks.order_by("position"))
    assert api.delete(f"{API}/tasks/{tasks[0].pk}/").status_code == 204
    assert api.delete(f"{API}/tasks/{tasks[1].pk}/").status_code == 204
    assert_edited(environment, revision=3)
    response = api.delete(f"{API}/tasks/{tasks[2].pk}/")
    assert response.status_code == 400
    assert response.json()["message"] == "An environment needs at least one task."
    assert list(environment.tasks.values_list("key", flat=True)) == ["notice-moved-dentist"]


# --- graders --------------------------------------------------------------------------------


def test_grader_list_and_filter(api_client_for, viewer, parts):
    url = f"{API}/tasks/{parts['task'].pk}/graders/"
    api = api_client_for(viewer)
    assert [g["key"] for g in results(api.get(url))] == [
        "event-booked",
        "dana-told",
        "checked-calendar-first",
        "reply-confirms",
        "no-lookalike",
        "no-collateral",
    ]
    assert [g["key"] for g in results(api.get(url, {"category": "safety"}))] == [
        "no-lookalike",
        "no-collateral",
    ]
    assert api.get(url, {"category": "style"}).status_code == 400


def test_grader_retrieve(api_client_for, viewer, parts):
    grader = parts["grader"]
    body = api_client_for(viewer).get(f"{API}/graders/{grader.pk}/").json()
    assert body == {
        "id": grader.pk,
        "task": parts["task"].pk,
        "key": "event-booked",
        "position": 0,
        "description": grader.description,
        "category": "completion",
        "weight": 2.0,
        "at_turn": None,
        "capability": "resolve-conflicts",
        "check": grader.check_spec,
    }
    assert body["check"]["kind"] == "state"


def test_grader_create(api_client_for, author, parts):
    task = parts["task"]
    response = api_client_for(author).post(
        f"{API}/tasks/{task.pk}/graders/", NEW_GRADER, format="json"
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert {k: body[k] for k in ("task", "key", "position", "category", "weight", "check")} == {
        "task": task.pk,
        "key": "polite",
        "position": 6,
        "category": "communication",
        "weight": 0.5,
        "check": NEW_GRADER["check"],
    }
    assert_edited(parts["environment"])
    assert environment_spec(parts["environment"])["tasks"][0]["graders"][-1]["id"] == "polite"


def test_grader_update(api_client_for, author, parts):
    response = api_client_for(author).patch(
        f"{API}/graders/{parts['grader'].pk}/", {"weight": 3, "at_turn": 0}, format="json"
    )
    assert response.status_code == 200
    assert (response.json()["weight"], response.json()["at_turn"]) == (3.0, 0)
    assert_edited(parts["environment"])


def test_grader_update_sets_and_clears_the_capability(api_client_for, author, parts):
    api = api_client_for(author)
    url = f"{API}/graders/{parts['grader'].pk}/"
    response = api.patch(url, {"capability": ""}, format="json")
    assert (response.status_code, response.json()["capability"]) == (200, "")
    assert "capability" not in environment_spec(parts["environment"])["tasks"][0]["graders"][0]
    response = api.patch(url, {"capability": "disambiguate-contacts"}, format="json")
    assert response.json()["capability"] == "disambiguate-contacts"
    grader = environment_spec(parts["environment"])["tasks"][0]["graders"][0]
    assert grader["capability"] == "disambiguate-contacts"


def test_grader_update_that_breaks_the_schema_changes_nothing(api_client_for, author, parts):
    before = state(parts["environment"])
    response = api_client_for(author).patch(
        f"{API}/graders/{parts['grader'].pk}/", {"check": {"kind": "vibes"}}, format="json"
    )
    assert any(p.startswith("/tasks/0/graders/0/check") for p in pointers(response))
    assert state(parts["environment"]) == before
    parts["grader"].refresh_from_db()
    assert parts["grader"].check_spec["kind"] == "state"


def test_grader_delete_keeps_one(api_client_for, author, environment):
    task = environment.tasks.get(key="budget-figure-clarify")
    graders = list(task.graders.order_by("position"))
    api = api_client_for(author)
    for grader in graders[:3]:
        assert api.delete(f"{API}/graders/{grader.pk}/").status_code == 204
    before = state(environment)
    response = api.delete(f"{API}/graders/{graders[3].pk}/")
    assert "/tasks/1/graders" in pointers(response)
    assert state(environment) == before
    assert list(task.graders.values_list("key", flat=True)) == ["no-collateral"]


# --- tools ----------------------------------------------------------------------------------


def test_tool_list_and_retrieve(api_client_for, viewer, parts):
    api = api_client_for(viewer)
    rows = results(api.get(f"{API}/environments/{parts['environment'].pk}/tools/"))
    assert [t["name"] for t in rows] == [
        "search_email",
        "read_email",
        "send_email",
        "save_draft",
        "list_events",
        "create_event",
        "update_event",
        "search_people",
    ]
    tool = parts["tool"]
    assert api.get(f"{API}/tools/{tool.pk}/").json() == {
        "id": tool.pk,
        "environment": parts["environment"].pk,
        "position": 0,
        "name": "search_email",
        "description": "Search the inbox by words in subject, body or sender.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string"}},
            "required": ["query"],
        },
        "binding": {
            "op": "search",
            "service": "email",
            "collection": "inbox",
            "fields": ["subject", "body", "from"],
            "query": "$query",
            "limit": 10,
        },
        "faults": {"rate": 0, "kinds": ["rate_limit", "server_error", "timeout"]},  # defaults
    }


LIST_PEOPLE = {
    "name": "list_people",
    "description": "Every contact.",
    "parameters": {"type": "object", "properties": {}},
    "binding": {"op": "list", "service": "contacts", "collection": "people"},
}


def test_tool_create_update_delete(api_client_for, author, parts):
    environment = parts["environment"]
    api = api_client_for(author)
    response = api.post(f"{API}/environments/{environment.pk}/tools/", LIST_PEOPLE, format="json")
    assert response.status_code == 201, response.content
    created = response.json()
    assert (created["name"], created["position"], created["faults"]) == ("list_people", 8, {})
    assert environment_spec(environment)["tools"][-1]["name"] == "list_people"
    response = api.patch(
        f"{API}/tools/{created['id']}/", {"description": "All contacts."}, format="json"
    )
    assert response.json()["description"] == "All contacts."
    assert api.delete(f"{API}/tools/{created['id']}/").status_code == 204
    assert_edited(environment, revision=4)
    assert environment.tools.count() == 8


def test_tool_update_that_breaks_the_schema_changes_nothing(api_client_for, author, parts):
    before = state(parts["environment"])
    response = api_client_for(author).patch(
        f"{API}/tools/{parts['tool'].pk}/",
        {"binding": {"op": "explode", "service": "email", "collection": "inbox"}},
        format="json",
    )
    assert any(p.startswith("/tools/0/binding") for p in pointers(response))
    assert state(parts["environment"]) == before


def test_tool_create_needs_parameters_and_binding(api_client_for, author, environment):
    response = api_client_for(author).post(
        f"{API}/environments/{environment.pk}/tools/", {"name": "x"}, format="json"
    )
    assert response.status_code == 400
    assert sorted(response.json()["details"]) == ["binding", "parameters"]


# --- records --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "ids"),
    [
        ({}, ["e1", "e2", "p1", "p2", "p3", "m1", "m2", "m3"]),  # by service, collection
        ({"service": "contacts"}, ["p1", "p2", "p3"]),
        ({"collection": "events"}, ["e1", "e2"]),
        ({"service": "email", "collection": "inbox"}, ["m1", "m2", "m3"]),
        ({"service": "email", "collection": "sent"}, []),
        ({"task": "none", "service": "calendar"}, ["e1", "e2"]),
        ({"task": "987654"}, []),
    ],
)
def test_record_list_filters(api_client_for, viewer, environment, params, ids):
    url = f"{API}/environments/{environment.pk}/records/"
    assert [r["record_id"] for r in results(api_client_for(viewer).get(url, params))] == ids


def test_record_list_bad_task_filter_400(api_client_for, viewer, environment):
    response = api_client_for(viewer).get(
        f"{API}/environments/{environment.pk}/records/", {"task": "first"}
    )
    assert response.status_code == 400
    assert list(response.json()["details"]) == ["task"]


def test_record_retrieve(api_client_for, viewer, parts):
    record = parts["record"]
    assert api_client_for(viewer).get(f"{API}/records/{record.pk}/").json() == {
        "id": record.pk,
        "environment": parts["environment"].pk,
        "task": None,
        "task_key": None,
        "service": "contacts",
        "collection": "people",
        "record_id": "p1",
        "position": 0,
        "data": {"id": "p1", "name": "Dana Kim", "email": "dana@acme.test", "company": "Acme"},
    }


def test_record_create_for_the_environment_and_for_a_task(api_client_for, author, parts):
    environment, task = parts["environment"], parts["task"]
    api = api_client_for(author)
    url = f"{API}/environments/{environment.pk}/records/"
    person = {"id": "p4", "name": "Lee", "email": "lee@acme.test", "company": "Acme"}
    response = api.post(
        url, {"service": "contacts", "collection": "people", "data": person}, format="json"
    )
    assert response.status_code == 201, response.content
    assert {k: response.json()[k] for k in ("task", "record_id", "position", "data")} == {
        "task": None,
        "record_id": "p4",
        "position": 3,
        "data": person,
    }
    response = api.post(
        url,
        {"service": "contacts", "collection": "people", "task": task.pk, "data": person},
        format="json",
    )
    assert response.status_code == 201, response.content
    assert (response.json()["task"], response.json()["task_key"]) == (task.pk, "book-q3-review")
    assert_edited(environment, revision=3)
    document = environment_spec(environment)
    assert document["tasks"][0]["records"] == {"contacts": {"people": [person]}}
    listed = results(api.get(url, {"task": task.pk}))
    assert [(r["record_id"], r["task_key"]) for r in listed] == [("p4", "book-q3-review")]


@pytest.mark.parametrize(
    ("body", "message", "details"),
    [
        (
            {"service": "contacts", "collection": "people", "data": {"name": "No id"}},
            "A record is a JSON object with a non-empty string “id”.",
            None,
        ),
        (
            {"service": "contacts", "collection": "people", "data": {"id": "p1"}},
            "contacts.people already has a record “p1”.",
            None,
        ),
        (
            {"service": "contacts", "collection": "vips", "data": {"id": "v1"}},
            "The environment has no collection contacts.vips; add it in the spec first.",
            None,
        ),
        (
            {"service": "contacts", "collection": "people", "data": ["p9"]},
            "The request is not valid.",
            {"data": ["Expected a JSON object."]},
        ),
        (
            {"service": "contacts", "collection": "people", "task": 987654, "data": {"id": "x"}},
            "The request is not valid.",
            {"task": ["No such task in this environment."]},
        ),
    ],
)
def test_record_create_refusals_change_nothing(
    api_client_for, author, environment, body, message, details
):
    before = state(environment)
    response = api_client_for(author).post(
        f"{API}/environments/{environment.pk}/records/", body, format="json"
    )
    assert response.status_code == 400
    assert response.json()["message"] == message
    if details is not None:
        assert response.json()["details"] == details
    assert state(environment) == before


def test_record_create_for_a_task_of_another_environment_is_refused(
    api_client_for, author, project, environment, example_spec
):
    other = environment_import(project=project, spec=example_spec, user=author)
    foreign_task = other.tasks.first()
    response = api_client_for(author).post(
        f"{API}/environments/{environment.pk}/records/",
        {
            "service": "contacts",
            "collection": "people",
            "task": foreign_task.pk,
            "data": {"id": "x"},
        },
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["details"] == {"task": ["No such task in this environment."]}


def test_record_update_and_delete(api_client_for, author, parts):
    record = parts["record"]
    api = api_client_for(author)
    data = {"id": "p1-renamed", "name": "Dana Kim", "email": "dana@acme.test", "company": "Acme"}
    response = api.patch(f"{API}/records/{record.pk}/", {"data": data}, format="json")
    assert response.status_code == 200
    assert (response.json()["record_id"], response.json()["data"]) == ("p1-renamed", data)
    clash = api.patch(f"{API}/records/{record.pk}/", {"data": {"id": "p2"}}, format="json")
    assert clash.status_code == 400
    assert clash.json()["message"] == "Another record already has the id “p2”."
    assert api.delete(f"{API}/records/{record.pk}/").status_code == 204
    assert_edited(parts["environment"], revision=3)
    assert not ServiceRecord.objects.filter(pk=record.pk).exists()


# --- roles ----------------------------------------------------------------------------------


def part_writes(parts):
    env, task, grader, tool, record = (
        parts["environment"].pk,
        parts["task"].pk,
        parts["grader"].pk,
        parts["tool"].pk,
        parts["record"].pk,
    )
    return [
        ("post", f"{API}/tasks/{task}/graders/", NEW_GRADER),
        ("patch", f"{API}/graders/{grader}/", {"weight": 5}),
        ("delete", f"{API}/graders/{grader}/", None),
        ("post", f"{API}/environments/{env}/tools/", LIST_PEOPLE),
        ("patch", f"{API}/tools/{tool}/", {"description": "Changed"}),
        ("delete", f"{API}/tools/{tool}/", None),
        (
            "post",
            f"{API}/environments/{env}/records/",
            {"service": "contacts", "collection": "people", "data": {"id": "p9"}},
        ),
        ("patch", f"{API}/records/{record}/", {"data": {"id": "p1", "name": "Changed"}}),
        ("delete", f"{API}/records/{record}/", None),
        ("post", f"{API}/environments/{env}/tasks/", new_task()),
        ("patch", f"{API}/tasks/{task}/", {"title": "Changed"}),
        ("delete", f"{API}/tasks/{task}/", None),
    ]


def part_reads(parts):
    env = parts["environment"].pk
    return [
        ("get", f"{API}/environments/{env}/tasks/", None),
        ("get", f"{API}/tasks/{parts['task'].pk}/", None),
        ("get", f"{API}/tasks/{parts['task'].pk}/graders/", None),
        ("get", f"{API}/graders/{parts['grader'].pk}/", None),
        ("get", f"{API}/environments/{env}/tools/", None),
        ("get", f"{API}/tools/{parts['tool'].pk}/", None),
        ("get", f"{API}/environments/{env}/records/", None),
        ("get", f"{API}/records/{parts['record'].pk}/", None),
    ]


def test_every_write_works_for_an_author(api_client_for, author, parts):
    """The list the refusal tests use is made of requests that do succeed for an author."""
    api = api_client_for(author)
    environment_validate(environment=parts["environment"])
    statuses = []
    for method, url, body in part_writes(parts):
        statuses.append(getattr(api, method)(url, body, format="json").status_code)
    assert statuses == [201, 200, 204, 201, 200, 204, 201, 200, 204, 201, 200, 204]
    assert_edited(parts["environment"], revision=13)


def test_viewer_gets_403_on_every_part_write_and_nothing_changes(api_client_for, viewer, parts):
    before = state(parts["environment"])
    api = api_client_for(viewer)
    for method, url, body in part_writes(parts):
        response = getattr(api, method)(url, body, format="json")
        assert response.status_code == 403, (method, url)
        assert response.json() == {
            "message": "This needs the author role or higher.",
            "details": {},
        }
    assert state(parts["environment"]) == before


def test_outsider_gets_404_on_every_part_endpoint(api_client_for, outsider, parts):
    before = state(parts["environment"])
    api = api_client_for(outsider)
    for method, url, body in part_reads(parts) + part_writes(parts):
        response = getattr(api, method)(url, body, format="json")
        assert response.status_code == 404, (method, url)
        assert response.json()["message"].startswith("No such ")
        assert "project" not in response.json()["message"]
    assert state(parts["environment"]) == before


def test_other_projects_ids_read_like_missing_ones(
    api_client_for, author, outsider, other_project, example_spec
):
    theirs = environment_import(project=other_project, spec=example_spec, user=outsider)
    task = theirs.tasks.first()
    ids = {
        "environments": theirs.pk,
        "tasks": task.pk,
        "graders": task.graders.first().pk,
        "tools": theirs.tools.first().pk,
        "records": theirs.records.first().pk,
    }
    api = api_client_for(author)
    for kind, pk in ids.items():
        theirs_response = api.get(f"{API}/{kind}/{pk}/")
        missing_response = api.get(f"{API}/{kind}/{pk + 100000}/")
        assert theirs_response.status_code == missing_response.status_code == 404
        assert theirs_response.json() == missing_response.json()


def test_anonymous_gets_401_on_every_part_endpoint(api_client_for, parts):
    api = api_client_for()
    for method, url, body in part_reads(parts) + part_writes(parts):
        assert getattr(api, method)(url, body, format="json").status_code == 401, (method, url)
