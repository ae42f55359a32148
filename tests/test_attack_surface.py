"""An attacker's and a careless user's sweep over every route of the app.

Every route (read from the URL configuration) has an entry in ``PROBES`` saying which methods
it answers and the least role each needs, so a new route fails ``test_every_route_has_a_probe``
until someone says how to probe it. Against another team's project with a member of every
role (the world of tests/test_existence_oracle.py), the sweep checks:

- anonymous callers: a page sends them to sign in (htmx too), the API answers 401, the
  training callback routes 404 without their secret;
- roles: each role below a route's gets 403 for every method (the htmx variant too) and
  changes no row; the route's own role is not refused (so the table stays exact); the API
  answers 405 to every method the table does not list;
- another project's ids: inside API bodies (training, dataset versions, judge, run batch,
  Claw-Eval import) they answer exactly as a missing id; htmx requests for another
  project's objects get the page's 404;
- hostile values: a number past every id column in a form's id field is an invalid choice,
  never a server error;
- ``next=`` never leaves the site; pages and the session-authenticated API refuse a POST
  without the CSRF token.

Other projects' ids in paths are compared byte for byte with missing ones in
tests/test_existence_oracle.py, and in page forms and query strings in
tests/test_cross_project_ids.py.
"""

import base64
import json

import pytest
from django.apps import apps as django_apps
from django.db import transaction
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from apps.accounts.models import Role
from apps.core.models import Job
from apps.curation.models import DemonstrationVersion
from apps.datasets.models import DatasetKind, DatasetVersion
from apps.datasets.services import dataset_create
from apps.runs.models import RunBatch
from apps.synthesis.models import SynthesisJob
from tests.factories import MembershipFactory, UserFactory
from tests.test_existence_oracle import (
    SAMPLE,
    _build_world,
    _kwargs,
    _teardown_world,
    named_routes,
)

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
PAST_EVERY_ID = "99999999999999999999999"  # past 2**63: no id column can hold it


def _dataset(project, admin, kind):
    return dataset_create(project=project, name=f"d-{kind}", user=admin, kind=kind)


# (name, url(project, admin), form with the hostile id, the field that must say so)
ID_FIELD_CASES = [
    (
        "run batch: environments",
        lambda p, a: reverse("runs:batch_create", args=[p.slug]),
        {"policy": "oracle", "role": "eval", "environments": [PAST_EVERY_ID]},
        "environments",
    ),
    (
        "run batch: user simulator endpoint",
        lambda p, a: reverse("runs:batch_create", args=[p.slug]),
        {"policy": "oracle", "role": "eval", "simulator_endpoint": PAST_EVERY_ID},
        "simulator_endpoint",
    ),
    (
        "run batch: judge endpoint",
        lambda p, a: reverse("runs:batch_create", args=[p.slug]),
        {"policy": "oracle", "role": "eval", "judge_endpoint": PAST_EVERY_ID},
        "judge_endpoint",
    ),
    (
        "synthesis: capabilities",
        lambda p, a: reverse("synthesis:create", args=[p.slug]),
        {"count": 1, "capabilities": [PAST_EVERY_ID]},
        "capabilities",
    ),
    (
        "synthesis: endpoint",
        lambda p, a: reverse("synthesis:create", args=[p.slug]),
        {"count": 1, "generator": "llm", "endpoint": PAST_EVERY_ID},
        "endpoint",
    ),
    (
        "SFT version: environments",
        lambda p, a: reverse("datasets:version_create", args=[_dataset(p, a, DatasetKind.SFT).pk]),
        {"seed": 0, "validation_fraction": 0.1, "environments": [PAST_EVERY_ID]},
        "environments",
    ),
    (
        "RL prompt version: environments",
        lambda p, a: reverse(
            "datasets:version_create", args=[_dataset(p, a, DatasetKind.RL_PROMPTS).pk]
        ),
        {"seeds": "0", "environments": [PAST_EVERY_ID]},
        "environments",
    ),
    (
        "scored rollout version: batches",
        lambda p, a: reverse(
            "datasets:rollout_version_create", args=[_dataset(p, a, DatasetKind.ROLLOUTS).pk]
        ),
        {"batches": [PAST_EVERY_ID], "reward": "score", "advantage": "grpo"},
        "batches",
    ),
    (
        "judge setting: endpoint",
        lambda p, a: reverse("llm:judge_setting", args=[p.slug]),
        {"endpoint": PAST_EVERY_ID},
        "endpoint",
    ),
]


def _made():
    return (RunBatch.objects.count(), SynthesisJob.objects.count(), DatasetVersion.objects.count())


@pytest.mark.parametrize("hx", [False, True], ids=["page", "htmx"])
@pytest.mark.parametrize(
    ("url", "form", "field"),
    [case[1:] for case in ID_FIELD_CASES],
    ids=[case[0] for case in ID_FIELD_CASES],
)
def test_an_id_past_every_column_is_an_invalid_choice(
    client_for, project, admin, url, form, field, hx
):
    target = url(project, admin)
    before = _made()
    response = client_for(admin).post(target, form, **(HTMX if hx else {}))
    assert response.status_code == 200, response.content[:300]
    if hx:  # the form's fragment, saying which choice is wrong
        text = response.content.decode()
        assert "is not a valid value" in text or "Select a valid choice" in text
    else:
        assert field in response.context["form"].errors
    assert _made() == before


# --- the sweep over every route ---------------------------------------------------------------

# Who may do what through each route: "method=role" for each method the route answers
# (others answer 405). Roles rank viewer < author < reviewer < admin. "signed-in": any
# signed-in user (their own account's objects, or a project they create); "public": no sign-in;
# "secret": the training callback's bearer secret, nothing else (a session is no key).
PROBES = {
    "accounts:home": "get=signed-in",
    "accounts:login": "get=public post=public",
    "accounts:logout": "post=public",  # signed out already: to the sign-in page
    "accounts:member_add": "post=admin",
    "accounts:member_list": "get=viewer",
    "accounts:member_remove": "post=admin",
    "accounts:member_role": "post=admin",
    "accounts:password_change": "get=signed-in post=signed-in",
    "accounts:password_change_done": "get=signed-in",
    "accounts:project_list": "get=signed-in",
    "accounts:project_settings": "get=admin post=admin",
    "accounts:token_create": "get=signed-in post=signed-in",
    "accounts:token_list": "get=signed-in",
    "accounts:token_revoke": "post=signed-in",
    "api:attachment_list": "get=viewer post=author",
    "api:capability_detail": "get=viewer patch=author delete=admin",
    "api:capability_list": "get=viewer post=author",
    "api:dataset_detail": "get=viewer",
    "api:dataset_list": "get=viewer post=author",
    "api:dataset_rollout_version_create": "post=author",
    "api:dataset_version_detail": "get=viewer",
    "api:dataset_version_export": "get=viewer",
    "api:dataset_version_export_legacy": "get=viewer",
    "api:dataset_version_list": "get=viewer post=author",
    "api:dataset_version_rebuild": "post=author",
    "api:dataset_version_rows": "get=viewer",
    "api:dataset_version_verify": "post=author",
    "api:demonstration_approve": "post=reviewer",
    "api:demonstration_correct": "post=reviewer",
    "api:demonstration_detail": "get=viewer",
    "api:demonstration_list": "get=viewer",
    "api:demonstration_reject": "post=reviewer",
    "api:docs": "get=public",
    "api:environment_approve": "post=reviewer",
    "api:environment_approve_legacy": "post=reviewer",
    "api:environment_archive": "post=author",
    "api:environment_archive_legacy": "post=author",
    "api:environment_detail": "get=viewer patch=author delete=author",
    "api:environment_duplicate": "post=author",
    "api:environment_duplicate_legacy": "post=author",
    "api:environment_export_claw_eval": "get=viewer",
    "api:environment_export_clawmark": "get=viewer",
    "api:environment_import": "post=author",
    "api:environment_import_claw_eval": "post=author",
    "api:environment_import_legacy": "post=author",
    "api:environment_list": "get=viewer",
    "api:environment_restore": "post=author",
    "api:environment_restore_legacy": "post=author",
    "api:environment_spec": "get=viewer put=author",
    "api:environment_spec_legacy": "get=viewer put=author",
    "api:environment_validate": "post=author",
    "api:environment_validate_legacy": "post=author",
    "api:grader_detail": "get=viewer patch=author delete=author",
    "api:grader_list": "get=viewer post=author",
    "api:job_cancel": "post=author",
    "api:job_detail": "get=viewer",
    "api:job_llm_calls": "get=viewer",
    "api:membership_detail": "get=viewer patch=admin delete=admin",
    "api:membership_list": "get=viewer post=admin",
    "api:model_endpoint_calls": "get=viewer",
    "api:model_endpoint_detail": "get=viewer put=author patch=author delete=admin",
    "api:model_endpoint_list": "get=viewer post=author",
    "api:model_endpoint_test": "post=author",
    "api:project_detail": "get=viewer patch=admin",
    "api:project_judge": "get=viewer put=author",
    "api:project_list": "get=signed-in post=signed-in",
    "api:record_detail": "get=viewer patch=author delete=author",
    "api:record_list": "get=viewer post=author",
    "api:redoc": "get=public",
    "api:run_batch_cancel": "post=author",
    "api:run_batch_detail": "get=viewer",
    "api:run_batch_groups": "get=viewer",
    "api:run_batch_list": "get=viewer post=author",
    "api:run_batch_resume": "post=author",
    "api:run_detail": "get=viewer",
    "api:run_list": "get=viewer",
    "api:schema": "get=public",
    "api:spec_schema": "get=signed-in",
    "api:synthesis_cancel": "post=author",
    "api:synthesis_detail": "get=viewer",
    "api:synthesis_list": "get=viewer post=author",
    "api:task_detail": "get=viewer patch=author delete=author",
    "api:task_list": "get=viewer post=author",
    "api:token_detail": "delete=signed-in",
    "api:token_list": "get=signed-in post=signed-in",
    "api:tool_detail": "get=viewer patch=author delete=author",
    "api:tool_list": "get=viewer post=author",
    "api:training-artifacts": "get=viewer",
    "api:training-callback": "post=secret",
    "api:training-cancel": "post=author",
    "api:training-config": "get=secret",
    "api:training-bundle-eval": "get=secret",
    "api:training-bundle-train": "get=secret",
    "api:training-data-eval": "get=secret",
    "api:training-data-train": "get=secret",
    "api:training-detail": "get=viewer",
    "api:training-list": "get=viewer post=author",
    "api:training-metrics": "get=viewer",
    "api:training-command-templates": "get=signed-in",
    "api:experiment-list": "get=viewer post=author",
    "api:experiment-detail": "get=viewer",
    "api:experiment-results": "get=viewer",
    "api:model-server-list": "get=viewer post=author",
    "api:model-server-detail": "get=viewer",
    "api:model-server-stop": "post=author",
    "capabilities:archive": "post=author",
    "capabilities:coverage": "get=viewer",
    "capabilities:create": "get=author post=author",
    "capabilities:detail": "get=viewer",
    "capabilities:edit": "get=author post=author",
    "capabilities:list": "get=viewer",
    "capabilities:restore": "post=author",
    "capabilities:seed": "post=author",
    "core:job_cancel": "post=author",
    "core:job_detail": "get=viewer",
    "core:job_list": "get=viewer",
    "core:job_status": "get=viewer",
    "core:worker_check": "post=author",
    "curation:adjudicate": "get=reviewer",
    "curation:adjudicate_decide": "post=admin",
    "curation:claim": "post=reviewer",
    "curation:correct": "post=reviewer",
    "curation:decide": "post=reviewer",
    "curation:detail": "get=viewer",
    "curation:list": "get=viewer",
    "curation:promote": "post=reviewer",
    "curation:queue": "get=reviewer",
    "curation:queue_move": "post=reviewer",
    "curation:queue_start": "post=reviewer",
    "curation:regrade": "post=reviewer",
    "curation:release": "post=reviewer",
    "curation:reopen": "post=reviewer",
    "curation:review": "get=reviewer",
    "curation:settings": "get=admin post=admin",
    "curation:tag_create": "post=admin",
    "curation:tag_update": "post=admin",
    "datasets:create": "get=author post=author",
    "datasets:delete": "get=admin post=admin",
    "datasets:detail": "get=viewer",
    "datasets:download": "get=viewer",
    "datasets:download_card": "get=viewer",
    "datasets:edit": "get=author post=author",
    "datasets:list": "get=viewer",
    "datasets:rollout_version_create": "get=author post=author",
    "datasets:version_create": "get=author post=author",
    "datasets:version_detail": "get=viewer",
    "datasets:version_progress": "get=viewer",
    "datasets:version_rebuild": "post=author",
    "datasets:version_verify": "post=author",
    "environments:approve": "post=reviewer",
    "environments:archive": "post=author",
    "environments:attachment": "get=viewer",
    "environments:bulk": "post=author",  # validate; exporting is a read (viewer)
    "environments:collection_json": "get=viewer",
    "environments:delete": "get=author post=author",
    "environments:detail": "get=viewer",
    "environments:envserver": "get=viewer",
    "environments:duplicate": "post=author",
    "environments:edit": "get=author post=author",
    "environments:edit_spec": "get=author post=author",
    "environments:export": "get=viewer",
    "environments:export_claw_eval": "get=viewer",
    "environments:export_clawmark": "get=viewer",
    "environments:export_matching": "get=viewer",
    "environments:grader_create": "get=author post=author",
    "environments:grader_delete": "post=author",
    "environments:grader_edit": "get=author post=author",
    "environments:import": "get=author post=author",
    "environments:list": "get=viewer",
    "environments:propose_checks": "post=author",
    "environments:record_create": "get=author post=author",
    "environments:record_delete": "post=author",
    "environments:record_detail": "get=viewer",
    "environments:record_edit": "get=author post=author",
    "environments:restore": "post=author",
    "environments:tab": "get=viewer",
    "environments:task_create": "get=author post=author",
    "environments:task_delete": "post=author",
    "environments:task_edit": "get=author post=author",
    "environments:tool_create": "get=author post=author",
    "environments:tool_delete": "post=author",
    "environments:tool_edit": "get=author post=author",
    "environments:validate": "post=author",
    "environments:validation_report_live": "get=viewer",
    "environments:validation_status": "get=viewer",
    "llm:endpoint_create": "get=author post=author",
    "llm:endpoint_delete": "get=admin post=admin",
    "llm:endpoint_detail": "get=viewer",
    "llm:endpoint_edit": "get=author post=author",
    "llm:endpoint_list": "get=viewer",
    "llm:endpoint_test": "post=author",
    "llm:job_calls": "get=viewer",
    "llm:judge_setting": "get=author post=author",
    "runs:batch_cancel": "post=author",
    "runs:batch_create": "get=author post=author",
    "runs:batch_detail": "get=viewer",
    "runs:batch_groups": "get=viewer",
    "runs:batch_list": "get=viewer",
    "runs:batch_progress": "get=viewer",
    "runs:environment_runs": "get=viewer",
    "runs:batch_resume": "post=author",
    "runs:compare": "get=viewer",
    "runs:detail": "get=viewer",
    "runs:evaluation": "get=viewer",
    "runs:leaderboard": "get=viewer",
    "synthesis:cancel": "post=author",
    "synthesis:create": "get=author post=author",
    "synthesis:detail": "get=viewer",
    "synthesis:list": "get=viewer",
    "synthesis:resume": "post=author",
    "synthesis:slot": "get=viewer",
    "training:cancel": "post=author",
    "training:compare": "get=viewer",
    "training:compare_rl": "get=viewer",
    "training:create": "get=author post=author",
    "training:detail": "get=viewer",
    "training:list": "get=viewer",
    "training:model_compare": "get=viewer",
    "training:model_evaluate": "post=author",
    "training:templates": "get=viewer",
    "experiments:continue": "post=author",
    "experiments:create": "get=author post=author",
    "experiments:detail": "get=viewer",
    "experiments:list": "get=viewer",
    "experiments:results_csv": "get=viewer",
    "experiments:results_md": "get=viewer",
    "experiments:weaknesses": "post=author",
    "serving:list": "get=viewer",
    "serving:start": "post=author",
    "serving:detail": "get=viewer",
    "serving:stop": "post=author",
    "workspace:dashboard": "get=viewer",
    "workspace:project_create": "get=signed-in post=signed-in",
}
RANK = [Role.VIEWER, Role.AUTHOR, Role.REVIEWER, Role.ADMIN]
API_METHODS = ["get", "post", "put", "patch", "delete"]


ALL_ROUTES = dict(named_routes(with_parameters=False))
# the sweeps below walk the routes PROBES knows; test_every_route_has_a_probe names the others
ROUTES = {name: route for name, route in ALL_ROUTES.items() if name in PROBES}


def _rules(name: str) -> dict[str, str]:
    return dict(rule.split("=") for rule in PROBES[name].split())


def test_every_route_has_a_probe():
    missing = sorted(set(ALL_ROUTES) - set(PROBES))
    stale = sorted(set(PROBES) - set(ALL_ROUTES))
    assert not missing, f"Say in PROBES who may use these routes: {missing}"
    assert not stale, f"PROBES names routes that are gone: {stale}"


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker):
    """The other project's world of tests/test_existence_oracle.py, with a member of every
    role; built once (every request below runs in a savepoint that is rolled back)."""
    with django_db_blocker.unblock(), transaction.atomic():
        built = _build_world()
        for role in (Role.VIEWER, Role.AUTHOR, Role.REVIEWER):
            built[role] = MembershipFactory(
                project=built["project"], user=UserFactory(username=f"probe-{role}"), role=role
            ).user
        built[Role.ADMIN] = built["owner"]
        demonstration = built["demonstration"]
        demonstration.current_version = DemonstrationVersion.objects.create(
            demonstration=demonstration, number=1
        )
        demonstration.save(update_fields=["current_version"])
    yield built
    with django_db_blocker.unblock():
        for role in (Role.VIEWER, Role.AUTHOR, Role.REVIEWER):
            built[role].delete()
        _teardown_world(built)


def _body(name: str, world) -> dict:
    """A body that passes validation up to the role check, where the project is in the body
    (these routes validate first, then look the project up)."""
    project = world["project"].pk
    return {
        "api:capability_list": {"project": project, "name": "Planted"},
        "api:environment_import": {"project": project, "spec": json.loads(SAMPLE.read_text())},
        "api:environment_import_legacy": {
            "project": project,
            "spec": json.loads(SAMPLE.read_text()),
        },
        "api:environment_import_claw_eval": {
            "project": project,
            "filename": "tasks.zip",
            "content_base64": base64.b64encode(b"PK\x05\x06" + b"\x00" * 18).decode(),
        },
        "environments:bulk": {"action": "validate", "ids": [world["environment"].pk]},
    }.get(name, {})


def _fingerprint() -> tuple:
    """How many rows each of the apps' models holds: a refused write changes none."""
    return tuple(
        model.objects.count()
        for model in django_apps.get_models()
        if model.__module__.startswith("apps.")
    )


def _send(user, name: str, method: str, world, *, hx: bool = False):
    """The request, in a savepoint rolled back after it (the world stays as built)."""
    point = transaction.savepoint()
    try:
        return _request(user, name, method, world, hx=hx)
    finally:
        transaction.savepoint_rollback(point)


def _request(user, name: str, method: str, world, *, hx: bool = False):
    route = ROUTES[name]
    kwargs = _kwargs(name, route, world, real=True) if ("<" in route or "(?P" in route) else {}
    url = reverse(name, kwargs=kwargs)
    extra = HTMX if hx else {}
    body = _body(name, world)
    if name.startswith("api:"):
        client = APIClient()
        if user is not None:
            client.force_authenticate(user)
        return getattr(client, method)(url, body, format="json", **extra)
    client = Client()
    if user is not None:
        client.force_login(user)
    return getattr(client, method)(url, body, **extra)


PAGE_OR_API = sorted(ROUTES)


@pytest.mark.django_db
@pytest.mark.parametrize("name", PAGE_OR_API)
def test_anonymous_callers_get_nothing(world, name):
    """A page sends an anonymous caller to sign in (htmx too); the API answers 401; the
    training callback routes answer 404 without their secret."""
    rules = _rules(name)
    methods = API_METHODS if name.startswith("api:") else ["get", "post"]
    for method in methods:
        for hx in (False, True):
            response = _send(None, name, method, world, hx=hx)
            seen = (method, hx, response.status_code)
            if method not in rules:  # refused either way, as unsigned or as unanswered
                assert response.status_code in (302, 401, 405), seen
            elif rules[method] == "public":
                assert response.status_code in (200, 302), seen
            elif rules[method] == "secret":
                assert response.status_code == 404, seen
            elif name.startswith("api:"):
                assert response.status_code == 401, seen
            else:
                assert response.status_code == 302, seen
                assert response["Location"].startswith(reverse("accounts:login") + "?next="), seen


def _role_cases():
    for name in PAGE_OR_API:
        for method, role in _rules(name).items():
            if role in RANK:
                yield name, method, role


ROLE_CASES = list(_role_cases())


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("name", "method", "role"), ROLE_CASES, ids=[f"{m} {n}" for n, m, _ in ROLE_CASES]
)
def test_each_role_below_the_routes_is_refused_and_its_own_passes(world, name, method, role):
    """Every member below the route's role gets 403 (the htmx variant too) and changes
    nothing; a member with the role itself is not refused (so the table stays exact)."""
    writes = method != "get"
    before = _fingerprint() if writes else None
    for lower in RANK[: RANK.index(role)]:
        for hx in (False, True):
            response = _send(world[lower], name, method, world, hx=hx)
            assert response.status_code == 403, (lower, hx, response.status_code)
            assert b"Traceback" not in response.content
    if writes:
        assert _fingerprint() == before
    response = _send(world[role], name, method, world)
    assert response.status_code not in (401, 403, 405), (role, response.status_code)
    assert response.status_code < 500


@pytest.mark.django_db
@pytest.mark.parametrize("name", sorted(n for n in ROUTES if n.startswith("api:")))
def test_api_methods_the_table_does_not_list_answer_405(world, name):
    rules = _rules(name)
    for method in API_METHODS:
        if method in rules:
            continue
        response = _send(world["owner"], name, method, world)
        assert response.status_code == 405, (method, response.status_code)


CSRF_ROUTES = sorted(
    name
    for name in ROUTES
    if not name.startswith("api:") and _rules(name).get("post") not in (None, "public")
)


@pytest.mark.django_db
@pytest.mark.parametrize("name", CSRF_ROUTES)
def test_pages_refuse_a_post_without_the_csrf_token(world, name):
    route = ROUTES[name]
    kwargs = _kwargs(name, route, world, real=True) if "<" in route else {}
    client = Client(enforce_csrf_checks=True)
    client.force_login(world["owner"])
    before = _fingerprint()
    for extra in ({}, HTMX):
        response = client.post(reverse(name, kwargs=kwargs), _body(name, world), **extra)
        assert response.status_code == 403, extra
    assert _fingerprint() == before


@pytest.mark.django_db
def test_the_api_refuses_a_session_post_without_the_csrf_token(world):
    """A browser's session cookie alone is no key to the API's writes (a token is)."""
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(world["owner"])  # a session cookie, as a browser has
    url = reverse("api:environment_archive", args=[world["environment"].pk])
    response = client.post(url, {}, format="json")
    assert response.status_code == 403
    world["environment"].refresh_from_db()
    assert world["environment"].status != "archived"


HOSTILE_NEXT = [
    "https://evil.example/",
    "//evil.example/",
    "/\\evil.example/",
    "\\\\evil.example",
    "https:evil.example",
    " //evil.example",
    "javascript:alert(1)",
]


@pytest.mark.django_db
@pytest.mark.parametrize("target", HOSTILE_NEXT)
def test_next_never_leaves_the_site(world, target):
    client = Client()
    client.force_login(world["owner"])
    signed_in = client.get(reverse("accounts:login"), {"next": target})
    url = reverse("environments:archive", args=[world["environment"].pk])
    archived = _send_post_next(client, url, target)
    anonymous = Client().post(
        reverse("accounts:login"),
        {"username": world["owner"].username, "password": "secret-pass-123", "next": target},
    )
    for response in (signed_in, archived, anonymous):
        assert response.status_code == 302, response.status_code
        location = response["Location"]
        assert location.startswith("/") and not location.startswith(("//", "/\\")), location


def _send_post_next(client, url, target):
    point = transaction.savepoint()
    try:
        return client.post(url, {"next": target})
    finally:
        transaction.savepoint_rollback(point)


# --- another project's ids inside bodies: answered exactly as a missing id ------------------

MISSING_ID = 987654321


# (name, method, url(own, world), body(own, world, id), the id: foreign(world))
BODY_ID_CASES = [
    (
        "training job: the other project's dataset",
        "post",
        lambda o, w: reverse("api:training-list", args=[o["project"].pk]),
        lambda o, w, i: {"dataset": i, "version": 1, "backend": "command", "base_model": "m"},
        lambda w: w["dataset"].pk,
    ),
    (
        "training job: the other project's environment (grpo)",
        "post",
        lambda o, w: reverse("api:training-list", args=[o["project"].pk]),
        lambda o, w, i: {"method": "grpo", "environments": [i], "backend": "command"},
        lambda w: w["environment"].pk,
    ),
    (
        "training job: the other project's fine-tuning endpoint",
        "post",
        lambda o, w: reverse("api:training-list", args=[o["project"].pk]),
        lambda o, w, i: {
            "dataset": o["dataset"].pk,
            "version": 1,
            "backend": "openai",
            "base_model": "m",
            "endpoint": i,
        },
        lambda w: w["endpoint"].pk,
    ),
    (
        "SFT version: the other project's environment",
        "post",
        lambda o, w: reverse("api:dataset_version_list", args=[o["dataset"].pk]),
        lambda o, w, i: {"environments": [i]},
        lambda w: w["environment"].pk,
    ),
    (
        "RL prompt version: the other project's environment",
        "post",
        lambda o, w: reverse("api:dataset_version_list", args=[o["prompts"].pk]),
        lambda o, w, i: {"environments": [i], "seeds": [0]},
        lambda w: w["environment"].pk,
    ),
    (
        "scored rollout version: the other project's batch",
        "post",
        lambda o, w: reverse("api:dataset_rollout_version_create", args=[o["rollouts"].pk]),
        lambda o, w, i: {"batches": [i]},
        lambda w: w["batch"].pk,
    ),
    (
        "judge: the other project's endpoint",
        "put",
        lambda o, w: reverse("api:project_judge", args=[o["project"].pk]),
        lambda o, w, i: {"endpoint": i},
        lambda w: w["endpoint"].pk,
    ),
    (
        "run batch: the other project's judge endpoint",
        "post",
        lambda o, w: reverse("api:run_batch_list", args=[o["project"].pk]),
        lambda o, w, i: {"policy": "oracle", "judge_endpoint": i},
        lambda w: w["endpoint"].pk,
    ),
    (
        "claw-eval import into the other project",
        "post",
        lambda o, w: reverse("api:environment_import_claw_eval"),
        lambda o, w, i: {"project": i, "filename": "t.zip", "content_base64": "UEsFBgAAAAA="},
        lambda w: w["project"].pk,
    ),
]


@pytest.fixture
def own(project, admin, author):
    sft = _dataset(project, admin, DatasetKind.SFT)
    job = Job.objects.create(project=project, kind="dataset_version", title="v")
    DatasetVersion.objects.create(dataset=sft, number=1, job=job)
    return {
        "project": project,
        "dataset": sft,
        "prompts": _dataset(project, admin, DatasetKind.RL_PROMPTS),
        "rollouts": _dataset(project, admin, DatasetKind.ROLLOUTS),
    }


def _answer(response, number) -> tuple:
    return response.status_code, response.content.decode().replace(str(number), "<id>")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("method", "url", "body", "foreign"),
    [case[1:] for case in BODY_ID_CASES],
    ids=[case[0] for case in BODY_ID_CASES],
)
def test_another_projects_id_in_a_body_reads_like_a_missing_one(
    world, own, admin, method, url, body, foreign
):
    foreign_id = foreign(world)
    api = APIClient()
    api.force_authenticate(admin)
    before = _fingerprint()
    seen = getattr(api, method)(url(own, world), body(own, world, foreign_id), format="json")
    missing = getattr(api, method)(url(own, world), body(own, world, MISSING_ID), format="json")
    assert seen.status_code in (400, 404), seen.content[:300]
    assert _answer(seen, foreign_id) == _answer(missing, MISSING_ID)
    assert _fingerprint() == before


@pytest.mark.django_db
@pytest.mark.parametrize(
    "name", sorted(n for n, r in ROUTES.items() if "<" in r and not n.startswith("api:"))
)
def test_htmx_reads_another_projects_ids_as_the_page_does(world, name):
    """An outsider's htmx request for another project's object is the page's 404 (never a
    fragment of it)."""
    outsider = world["outsider"]
    for method in ("get", "post"):
        page = _send(outsider, name, method, world)
        fragment = _send(outsider, name, method, world, hx=True)
        assert page.status_code in (404, 405), (method, page.status_code)
        assert fragment.status_code == page.status_code, (method, fragment.status_code)
        assert b"Foreign team" not in fragment.content
