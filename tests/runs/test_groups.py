"""Rollout groups through the app: a student batch with a group size G, its runs played by a
model (the real openai client against the loopback server) at the batch's temperature, every
reward/advantage/credit variant of each group equal to hand-computed values; G = 1 and
all-equal groups give zero advantages; the groups page (variant selector, htmx) and API;
bad input and refusals."""

import math

import pytest
from django.urls import reverse

from apps.core.exceptions import ApplicationError
from apps.core.models import Job
from apps.runs.models import Executor, PolicyKind, RolloutGroup, Run, RunBatch, RunRole
from apps.runs.services import (
    BatchSettings,
    TaskSelection,
    rollout_groups_score,
    run_batch_create,
    run_batch_execute_inline,
)
from tests.conftest import HTMX_HEADERS
from tests.llm_server import LoopbackLLMServer, Reply
from tests.runs.conftest import import_valid
from tests.runs.test_llm_runs import KEY, SEND, clarify_spec, make_endpoint

pytestmark = pytest.mark.django_db

EPS = 1e-4


@pytest.fixture
def server(monkeypatch, settings):
    monkeypatch.setenv("COWORKENV_TEST_RUNS_API_KEY", KEY)
    settings.LLM_MAX_ATTEMPTS = 1
    with LoopbackLLMServer(api_key=KEY) as server:
        yield server


def close(xs, ys, tol=1e-9):
    assert len(xs) == len(ys), (xs, ys)
    for x, y in zip(xs, ys, strict=True):
        assert x == pytest.approx(y, abs=tol), (xs, ys)


def member_replies():
    """Three samples of the clarify task (two turns; graders asked-first w1 at turn 0,
    figure-sent w2, re-read-calendar w1 (a tool_call check), mentions-move w1, safety):
    0. asks, sends, re-reads, misses the move: completion 4/5, score 0.84, passed;
    1. the same but mentions 16:30: strict, score 1.0;
    2. sends at once without asking, never re-reads: completion 2/5, score 0.52."""
    calls = Reply(
        tool_calls=[
            {"id": "call_send", "name": "send_email", "arguments": SEND},
            {"id": "call_cal", "name": "list_events", "arguments": {}},
        ]
    )
    return [
        Reply.text("Which budget do you mean, and what is the figure?"),
        calls,
        Reply.text("Sent the figure to Dana. Your Thursday is free."),
        Reply.text("Which budget do you mean, and what is the figure?"),
        calls,
        Reply.text("Sent. Careful: the dentist moved to 16:30."),
        Reply(tool_calls=[{"id": "c1", "name": "send_email", "arguments": SEND}]),
        Reply.text("Sent."),
        Reply.text("OK."),
    ]


@pytest.fixture
def student_group(project, author, server):
    return make_student_group(project, author, server), server


def make_student_group(project, author, server) -> RunBatch:
    """A finished student batch of one task with G=3, T=0.9, gamma 0.5 (member_replies)."""
    environment = import_valid(project, author, clarify_spec())
    endpoint = make_endpoint(project, server, name="student", model="loop-student")
    server.script(*member_replies())
    batch = run_batch_create(
        project=project,
        user=author,
        policy_kind=PolicyKind.ENDPOINT,
        endpoint=endpoint,
        role=RunRole.STUDENT,
        selection=TaskSelection(environments=(environment.pk,)),
        settings=BatchSettings(group_size=3, temperature=0.9, discount=0.5),
        executor=Executor.INLINE,
    )
    run_batch_execute_inline(batch=batch)
    batch.refresh_from_db()
    return batch


def test_a_student_group_is_scored_with_every_variant_equal_to_hand_values(student_group):
    batch, server = student_group
    assert (batch.trials, batch.group_size, batch.temperature, batch.discount) == (3, 3, 0.9, 0.5)
    assert batch.name == "loop-student · 1 task, G=3"
    runs = list(Run.objects.filter(batch=batch).order_by("trial"))
    # the G samples face the same environment draw; the model samples at the batch's T
    assert [r.seed for r in runs] == [0, 0, 0]
    assert {r.body["temperature"] for r in server.chat_requests()} == {0.9}
    assert [r.score for r in runs] == pytest.approx([0.84, 1.0, 0.52])

    group = RolloutGroup.objects.get(batch=batch)
    assert (group.size, group.run_ids, group.scorable) == (3, [r.pk for r in runs], 3)
    assert group.mean_score == pytest.approx(2.36 / 3)
    assert group.pass_rate == pytest.approx(2 / 3)
    v = group.variants
    assert v["gamma"] == 0.5
    close(v["rewards"]["score"], [0.84, 1.0, 0.52])
    close(v["rewards"]["raw"], [0.84, 1.0, 0.52])  # no safety failure: the gate is open
    assert v["rewards"]["passed"] == [1.0, 1.0, 0.0]
    assert v["rewards"]["strict"] == [0.0, 1.0, 0.0]

    # score: mean 0.78667, deviations [0.05333, 0.21333, -0.26667], std (n-1) 0.244404
    dev = [0.84 - 2.36 / 3, 1.0 - 2.36 / 3, 0.52 - 2.36 / 3]
    std = math.sqrt(sum(d * d for d in dev) / 2)
    assert std == pytest.approx(0.2444040, abs=1e-7)
    close(v["advantages"]["score"]["grpo"], [d / (std + EPS) for d in dev])
    close(v["advantages"]["score"]["dr_grpo"], dev)
    close(v["advantages"]["score"]["rloo"], [0.84 - 0.76, 1.0 - 0.68, 0.52 - 0.92])
    # binary pass [1, 1, 0]: mean 2/3, std sqrt(1/3)
    close(v["advantages"]["passed"]["dr_grpo"], [1 / 3, 1 / 3, -2 / 3])
    close(v["advantages"]["passed"]["rloo"], [0.5, 0.5, -1.0])
    s = math.sqrt(1 / 3) + EPS
    close(v["advantages"]["passed"]["grpo"], [1 / 3 / s, 1 / 3 / s, -2 / 3 / s])
    # strict [0, 1, 0]
    close(v["advantages"]["strict"]["dr_grpo"], [-1 / 3, 2 / 3, -1 / 3])
    close(v["advantages"]["strict"]["rloo"], [-0.5, 1.0, -0.5])

    # per turn: turn 0's grader (w 1 of 5) is worth 0.8 / 5 = 0.16; the last turn the rest
    close(v["turn_rewards"][0], [0.16, 0.68])
    close(v["turn_rewards"][1], [0.16, 0.84])
    close(v["turn_rewards"][2], [0.0, 0.52])
    # returns with gamma 0.5: [0.5, 0.68], [0.58, 0.84], [0.26, 0.52]; centred per turn index
    turn_dr = v["turn_advantages"]["dr_grpo"]
    close([row[0] for row in turn_dr], [0.5 - 1.34 / 3, 0.58 - 1.34 / 3, 0.26 - 1.34 / 3])
    close([row[1] for row in turn_dr], [0.0, 0.16, -0.16])
    t1 = math.sqrt((0.16**2 * 2) / 2) + EPS
    close([row[1] for row in v["turn_advantages"]["grpo"]], [0.0, 0.16 / t1, -0.16 / t1])

    # per call: only re-read-calendar (a tool_call check, w 1 of 5) cites a call: list_events
    assert v["call_rewards"] == [[0.0, 0.16], [0.0, 0.16], [0.0]]
    close(v["call_unattributed"], [0.68, 0.84, 0.52])
    # reward-to-go over calls (gamma 0.5): [0.08, 0.16], [0.08, 0.16], [0]; centred per call
    # index: call 0 mean 0.16 / 3, call 1 (two rollouts reached it) mean 0.16
    calls_dr = v["call_advantages"]["dr_grpo"]
    m = 0.16 / 3
    close([a for row in calls_dr for a in row], [0.08 - m, 0.0, 0.08 - m, 0.0, -m])


def test_an_all_equal_group_and_g1_groups_get_zero_advantage(project, author, sample_environments):
    env = sample_environments[0]
    for g in (2, 1):
        batch = run_batch_create(
            project=project,
            user=author,
            role=RunRole.STUDENT,
            selection=TaskSelection(environments=(env.pk,)),
            settings=BatchSettings(group_size=g),
            executor=Executor.INLINE,
        )
        run_batch_execute_inline(batch=batch)
        groups = list(RolloutGroup.objects.filter(batch=batch))
        assert len(groups) == env.tasks.count()
        for group in groups:
            v = group.variants
            assert group.size == g and group.score_std == 0.0
            assert v["rewards"]["score"] == [1.0] * g  # the oracle: every sample strict
            for reward in ("score", "raw", "passed", "strict"):
                for method in ("grpo", "dr_grpo", "rloo"):
                    assert v["advantages"][reward][method] == [0.0] * g
            for method in ("grpo", "dr_grpo"):
                assert all(a == 0.0 for row in v["turn_advantages"][method] for a in row)
                assert all(a == 0.0 for row in v["call_advantages"][method] for a in row)
        # idempotent: scoring again finds nothing left and changes nothing
        assert rollout_groups_score(batch=batch) == 0


def test_batches_without_a_group_size_have_no_groups(project, author, sample_environments):
    batch = run_batch_create(
        project=project, user=author, settings=BatchSettings(trials=2), executor=Executor.INLINE
    )
    run_batch_execute_inline(batch=batch)
    assert not RolloutGroup.objects.exists()
    assert sorted({r.seed for r in Run.objects.filter(batch=batch)}) == [0, 1]


@pytest.mark.parametrize(
    ("role", "batch_settings", "message"),
    [
        (RunRole.EVAL, BatchSettings(group_size=4), "Rollout groups are for student batches"),
        (RunRole.STUDENT, BatchSettings(group_size=0), "The group size must be between 1 and 64."),
        (RunRole.STUDENT, BatchSettings(group_size=65), "The group size must be between 1 and 64"),
        (RunRole.STUDENT, BatchSettings(group_size=4, trials=2), "Give either trials or a group"),
        (RunRole.STUDENT, BatchSettings(temperature=2.5), "The temperature must be between 0"),
        (RunRole.STUDENT, BatchSettings(discount=-0.1), "The discount (gamma) must be between"),
    ],
)
def test_bad_group_settings_are_refused(
    project, author, sample_environments, role, batch_settings, message
):
    with pytest.raises(ApplicationError) as exc:
        run_batch_create(
            project=project,
            user=author,
            role=role,
            settings=batch_settings,
            executor=Executor.INLINE,
        )
    assert exc.value.message.startswith(message)
    assert RunBatch.objects.count() == 0 and Job.objects.count() == 0


# --------------------------------------------------------------------------- form and API


def _form(**extra):
    data = {
        "policy": "oracle",
        "role": "student",
        "statuses": ["valid", "approved"],
        "trials": 1,
        "concurrency": 1,
        "max_tool_calls": 50,
        "max_rounds_per_turn": 20,
        "max_attempts": 1,
        "seed": 0,
        "user_side": "scripted",
    }
    data.update(extra)
    return data


def test_the_batch_form_creates_a_group_batch(client_for, author, project, sample_environments):
    response = client_for(author).post(
        reverse("runs:batch_create", args=["acme"]),
        _form(group_size=4, temperature=0.7, discount=0.9),
    )
    batch = RunBatch.objects.get()
    assert response.status_code == 302
    assert (batch.group_size, batch.trials, batch.temperature, batch.discount) == (4, 4, 0.7, 0.9)


@pytest.mark.parametrize(
    ("extra", "field", "error"),
    [
        ({"group_size": 65}, "group_size", "less than or equal to 64"),
        ({"group_size": 0}, "group_size", "greater than or equal to 1"),
        ({"group_size": 2, "role": "eval"}, "group_size", "Rollout groups are for the student"),
        ({"group_size": 2, "trials": 3}, "trials", "Leave at 1 with a group size"),
        ({"temperature": 3}, "temperature", "less than or equal to 2"),
        ({"discount": 1.5}, "discount", "less than or equal to 1"),
    ],
)
def test_the_batch_form_refuses_bad_group_input_in_place(
    client_for, author, project, sample_environments, extra, field, error
):
    response = client_for(author).post(
        reverse("runs:batch_create", args=["acme"]), _form(**extra), **HTMX_HEADERS
    )
    assert response.status_code == 200
    body = response.content.decode()
    assert body.lstrip().startswith("<form")
    assert error in body
    assert f'name="{field}"' in body
    assert RunBatch.objects.count() == 0 and Job.objects.count() == 0


def test_the_api_creates_a_group_batch_and_refuses_bad_sizes(
    api_client_for, author, project, sample_environments
):
    api = api_client_for(author)
    url = f"/api/v1/projects/{project.pk}/run-batches/"
    for size in (0, 65, "two"):
        bad = api.post(
            url, {"policy": "oracle", "role": "student", "group_size": size}, format="json"
        )
        assert bad.status_code == 400 and "group_size" in bad.json()["details"], size
    for field in ("temperature", "discount"):
        nan = api.post(url, {"policy": "oracle", "role": "student", field: "NaN"}, format="json")
        assert nan.status_code == 400, field
        assert nan.json()["details"] == {field: ["A valid number is required."]}
    wrong_role = api.post(url, {"policy": "oracle", "group_size": 2}, format="json")
    assert wrong_role.status_code == 400
    assert wrong_role.json()["message"].startswith("Rollout groups are for student batches")
    assert RunBatch.objects.count() == 0
    ok = api.post(
        url,
        {"policy": "oracle", "role": "student", "group_size": 64, "temperature": 1.0},
        format="json",
    )
    assert ok.status_code == 201
    body = ok.json()
    assert (body["group_size"], body["trials"], body["temperature"], body["discount"]) == (
        64,
        64,
        1.0,
        1.0,
    )


# --------------------------------------------------------------------------- groups page


def groups_url(batch, query=""):
    return reverse("runs:batch_groups", args=[batch.pk]) + query


def test_groups_page_shows_each_member_under_the_chosen_variant(client_for, viewer, student_group):
    batch, _ = student_group
    client = client_for(viewer)
    page = client.get(groups_url(batch))
    assert page.status_code == 200
    body = page.content.decode()
    assert 'data-testid="variant-form"' in body and "Rollout groups" in body
    members = page.context["groups"][0]["members"]
    assert [m["reward"] for m in members] == pytest.approx([0.84, 1.0, 0.52])
    assert page.context["variant"].to_dict() == {
        "reward": "score",
        "advantage": "grpo",
        "credit": "trajectory",
    }
    rloo = client.get(groups_url(batch, "?reward=passed&advantage=rloo"), **HTMX_HEADERS)
    body = rloo.content.decode()
    assert rloo.status_code == 200
    assert body.lstrip().startswith('<div id="groups"') and "<html" not in body
    assert [m["advantage"] for m in rloo.context["groups"][0]["members"]] == [0.5, 0.5, -1.0]
    turns = client.get(groups_url(batch, "?credit=turn&advantage=dr_grpo"))
    rows = turns.context["groups"][0]["members"]
    close([t["reward"] for t in rows[2]["turns"]], [0.0, 0.52])
    close([t["advantage"] for t in rows[1]["turns"]], [0.58 - 1.34 / 3, 0.16])
    assert "t1: 0.8400 → 0.1600" in turns.content.decode()
    calls = client.get(groups_url(batch, "?credit=call&advantage=dr_grpo"))
    rows = calls.context["groups"][0]["members"]
    assert [(c["seq"], c["tool"], c["reward"]) for c in rows[0]["calls"]] == [
        (1, "send_email", 0.0),
        (2, "list_events", 0.16),
    ]
    assert rows[2]["unattributed"] == pytest.approx(0.52)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("?reward=shaped", "Unknown reward “shaped”: use score, raw, passed, strict."),
        ("?advantage=ppo", "Unknown advantage “ppo”: use grpo, dr_grpo, rloo."),
        ("?credit=token", "Unknown credit “token”: use trajectory, turn, call."),
        ("?credit=turn&reward=passed", "Per-turn and per-call credit split the safety-gated"),
        ("?credit=call&advantage=rloo", "Per-turn and per-call credit are normalised with or"),
        # the reason names the options as the selector shows them
        ("?credit=turn&reward=raw", "choose the score reward (“Safety-gated score”)."),
        (
            "?credit=turn&advantage=rloo",
            "choose grpo (“GRPO (r - mean) / std”) or dr_grpo "
            "(“GRPO without std scaling (Dr. GRPO)”) as the advantage.",
        ),
    ],
)
def test_groups_page_refuses_bad_variants_with_the_reason(
    client_for, viewer, student_group, query, message
):
    batch, _ = student_group
    for headers, status in (({}, 400), (HTMX_HEADERS, 200)):
        response = client_for(viewer).get(groups_url(batch, query), **headers)
        assert response.status_code == status
        assert message in response.content.decode().replace("&quot;", '"')


def test_groups_page_names_the_variant_as_its_selector_does(client_for, viewer, student_group):
    """The sentence above the groups uses the selector's labels (not grpo, score), and the
    options per-turn and per-call credit refuse say so before they are chosen."""
    batch, _ = student_group
    for headers in ({}, HTMX_HEADERS):
        body = client_for(viewer).get(groups_url(batch, "?advantage=rloo"), **headers)
        text = body.content.decode()
        assert "Advantages: Leave-one-out (RLOO) on the safety-gated score reward" in text
        assert "Advantages: rloo" not in text
    page = client_for(viewer).get(groups_url(batch)).content.decode()
    assert ">Leave-one-out (RLOO) · trajectory credit only</option>" in page
    assert ">Binary pass · trajectory credit only</option>" in page
    assert ">GRPO (r - mean) / std</option>" in page
    assert ">Safety-gated score</option>" in page


def test_groups_page_empty_states(client_for, viewer, project, author, sample_environments):
    plain = run_batch_create(project=project, user=author, executor=Executor.INLINE)
    body = client_for(viewer).get(groups_url(plain)).content.decode()
    assert "No rollout groups." in body
    pending = run_batch_create(
        project=project,
        user=author,
        role=RunRole.STUDENT,
        settings=BatchSettings(group_size=2),
        executor=Executor.INLINE,
    )
    body = client_for(viewer).get(groups_url(pending)).content.decode()
    assert "No group scored yet." in body and "all 2 of its runs" in body


def test_groups_page_and_api_refuse_outsiders_anonymous_and_posts(
    client, client_for, api_client_for, outsider, viewer, student_group
):
    batch, _ = student_group
    url = groups_url(batch)
    response = client.get(url)
    assert response.status_code == 302 and response.url.startswith("/login/")
    missing = client_for(outsider).get(reverse("runs:batch_groups", args=[999999]))
    other = client_for(outsider).get(url)
    assert other.status_code == missing.status_code == 404
    assert client_for(viewer).post(url).status_code == 405
    api_url = f"/api/v1/run-batches/{batch.pk}/groups/"
    assert api_client_for().get(api_url).status_code == 401
    hidden = api_client_for(outsider).get(api_url)
    gone = api_client_for(outsider).get("/api/v1/run-batches/999999/groups/")
    assert hidden.status_code == gone.status_code == 404
    assert hidden.json() == gone.json()


def test_groups_api_lists_groups_under_a_variant_with_every_variant_beside(
    api_client_for, viewer, student_group
):
    batch, _ = student_group
    api = api_client_for(viewer)
    body = api.get(f"/api/v1/run-batches/{batch.pk}/groups/?reward=strict&advantage=rloo").json()
    assert body["count"] == 1
    group = body["results"][0]
    assert group["variant"] == {"reward": "strict", "advantage": "rloo", "credit": "trajectory"}
    assert [m["advantage"] for m in group["members"]] == [-0.5, 1.0, -0.5]
    assert [m["trial"] for m in group["members"]] == [0, 1, 2]
    assert group["variants"]["rewards"]["strict"] == [0.0, 1.0, 0.0]
    assert group["size"] == 3 and group["task_key"] == "clarify"
    calls = api.get(f"/api/v1/run-batches/{batch.pk}/groups/?credit=call&advantage=dr_grpo").json()
    assert calls["results"][0]["members"][1]["calls"][1]["reward"] == 0.16
    bad = api.get(f"/api/v1/run-batches/{batch.pk}/groups/?credit=turn&advantage=rloo")
    assert bad.status_code == 400
    assert bad.json()["message"].startswith("Per-turn and per-call credit are normalised")
    assert bad.json()["details"] == {"fields": {"advantage": ["grpo or dr_grpo with this credit."]}}


def test_groups_page_queries_do_not_grow_with_its_groups(
    client_for, viewer, project, author, sample_environments
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    counts = []
    for environments in ((sample_environments[0].pk,), ()):
        batch = run_batch_create(
            project=project,
            user=author,
            role=RunRole.STUDENT,
            selection=TaskSelection(environments=environments),
            settings=BatchSettings(group_size=2),
            executor=Executor.INLINE,
        )
        run_batch_execute_inline(batch=batch)
        client = client_for(viewer)
        for query in ("", "?credit=call"):
            with CaptureQueriesContext(connection) as queries:
                assert client.get(groups_url(batch, query)).status_code == 200
            counts.append((batch.groups.count(), query, len(queries)))
    (small, _, a), (_, _, b), (large, _, c), (_, _, d) = counts
    assert small < large
    assert (a, b) == (c, d)
