"""LLM-judge graders in runs: the project's (or the batch's) judge endpoint scores the
rubric through the real ``openai`` client against the loopback server's deterministic judge;
verdicts are cached by (rubric, evidence, model); an outage errors the run, never fails it."""

import copy

import pytest
from django.urls import reverse

from apps.core.exceptions import ApplicationError
from apps.core.leases import Heartbeat
from apps.core.models import Job
from apps.llm.models import JudgeVerdict, LLMCall
from apps.llm.services import endpoint_delete, project_judge_set
from apps.runs.agent import LLMUsage
from apps.runs.models import Executor, PolicyKind, Run, RunBatch, RunStatus
from apps.runs.services import (
    BatchSettings,
    TaskSelection,
    run_batch_create,
    run_batch_execute_inline,
)
from apps.runs.services.execution import run_claim
from apps.runs.services.playing import RunCancelled, play_run
from tests.conftest import HTMX_HEADERS
from tests.llm_server import LoopbackLLMServer, Reply, judge_responder
from tests.runs.conftest import import_valid
from tests.runs.test_llm_runs import KEY, clarify_spec, make_endpoint

pytestmark = pytest.mark.django_db

RUBRIC = (
    'The email must go to "dana@acme.test" and the reply must warn that the dentist moved '
    'to "16:30".'
)
JUDGE_GRADER = {
    "id": "judged-handoff",
    "category": "communication",
    "weight": 1,
    "check": {"kind": "judge", "rubric": RUBRIC, "threshold": 0.75},
}


def judged_spec(rubric: str = RUBRIC) -> dict:
    spec = clarify_spec()
    grader = copy.deepcopy(JUDGE_GRADER)
    grader["check"]["rubric"] = rubric
    spec["tasks"][0]["graders"].append(grader)
    return spec


@pytest.fixture(autouse=True)
def fast_retries(settings, monkeypatch):
    monkeypatch.setenv("COWORKENV_TEST_RUNS_API_KEY", KEY)
    settings.LLM_BACKOFF_BASE_S = 0.01
    settings.LLM_BACKOFF_MAX_S = 0.02
    settings.LLM_MAX_ATTEMPTS = 2
    settings.LLM_MAX_TOTAL_WAIT_S = 5
    settings.LLM_SLOT_WAIT_S = 5


@pytest.fixture
def judge_server():
    with LoopbackLLMServer(api_key=KEY, responder=judge_responder()) as server:
        yield server


def oracle_batch(project, author, environment, **settings):
    batch = run_batch_create(
        project=project,
        user=author,
        policy_kind=PolicyKind.ORACLE,
        selection=TaskSelection(environments=(environment.pk,)),
        settings=BatchSettings(**settings),
        executor=Executor.INLINE,
    )
    return run_batch_execute_inline(batch=batch)


def judge_verdict_of(run: Run) -> dict:
    return next(v for v in run.verdicts if v["grader_id"] == "judged-handoff")


def test_loopback_judge_scores_the_rubric_and_the_second_grading_is_a_cache_hit(
    project, author, judge_server
):
    environment = import_valid(project, author, judged_spec())
    judge = make_endpoint(project, judge_server, name="judge", model="loop-judge")
    project_judge_set(project=project, endpoint=judge, user=author)

    batch = oracle_batch(project, author, environment)
    assert (batch.judge_endpoint_id, batch.judge_model) == (judge.pk, "loop-judge")
    run = Run.objects.get(batch=batch)
    assert run.status == RunStatus.SUCCEEDED
    verdict = judge_verdict_of(run)
    assert verdict["status"] == "passed"
    assert verdict["evidence"] == {
        "score": 1.0,
        "threshold": 0.75,
        "reasoning": "Found: dana@acme.test, 16:30. Missing: nothing.",
        "cached": False,
        "model": "loop-judge",
    }
    assert run.passed is True and run.score == 1.0
    assert run.llm_calls == 1  # the judge's call counts in the run's usage
    (request,) = judge_server.chat_requests()
    prompt = request.messages[-1]["content"]
    assert RUBRIC.replace('"', '\\"') in prompt
    assert '"changes":[{"diff":' in prompt  # the server-side diffs, not the agent's word
    assert request.body["temperature"] == 0
    call = LLMCall.objects.get()
    assert (call.purpose, call.status, call.job_id) == ("judge.grade", "ok", batch.job_id)

    again = oracle_batch(project, author, environment)
    rerun = Run.objects.get(batch=again)
    assert judge_verdict_of(rerun)["evidence"]["cached"] is True
    assert judge_verdict_of(rerun)["evidence"]["score"] == 1.0
    assert rerun.llm_calls == 0
    assert len(judge_server.chat_requests()) == 1  # no second LLM call
    row = JudgeVerdict.objects.get()
    assert (row.score, row.hits, row.model, row.llm_call_id) == (1.0, 1, "loop-judge", call.pk)


def test_a_rubric_the_run_misses_fails_the_judge_grader(project, author, judge_server):
    rubric = 'The reply must mention "Dana" and "the invoice INV-9".'
    environment = import_valid(project, author, judged_spec(rubric))
    judge = make_endpoint(project, judge_server, name="judge", model="loop-judge")
    project_judge_set(project=project, endpoint=judge, user=author)
    run = Run.objects.get(batch=oracle_batch(project, author, environment))
    verdict = judge_verdict_of(run)
    assert verdict["status"] == "failed"
    assert verdict["evidence"]["score"] == 0.5
    assert verdict["evidence"]["reasoning"] == "Found: Dana. Missing: the invoice INV-9."
    assert run.status == RunStatus.SUCCEEDED and run.strict is False


def test_judge_outage_errors_the_run_and_it_is_re_run_never_failed(project, author):
    with LoopbackLLMServer(
        api_key=KEY, responder=lambda request: Reply.error(503, "judge down")
    ) as down:
        environment = import_valid(project, author, judged_spec())
        judge = make_endpoint(project, down, name="judge", model="loop-judge")
        project_judge_set(project=project, endpoint=judge, user=author)
        batch = oracle_batch(project, author, environment, max_attempts=2)
        runs = list(Run.objects.filter(batch=batch).order_by("attempt"))
        assert [(r.attempt, r.status, r.retryable) for r in runs] == [
            (1, RunStatus.ERRORED, True),
            (2, RunStatus.ERRORED, True),
        ]
        assert all(r.passed is None and r.score is None and r.verdicts == [] for r in runs)
        assert "judge down" in runs[0].error
        assert len(down.chat_requests()) == 4  # two attempts of the client's two tries each
    assert JudgeVerdict.objects.count() == 0
    batch.job.refresh_from_db()
    assert batch.job.message == "0 of 1 trial graded, 0 passed; 1 errored after 2 attempts."


def test_a_score_out_of_range_is_an_error_not_a_verdict(project, author):
    with LoopbackLLMServer(api_key=KEY) as server:
        server.script(Reply.json({"score": 7, "reasoning": "great"}))
        environment = import_valid(project, author, judged_spec())
        judge = make_endpoint(project, server, name="judge", model="loop-judge")
        project_judge_set(project=project, endpoint=judge, user=author)
        batch = oracle_batch(project, author, environment, max_attempts=1)
    run = Run.objects.get(batch=batch)
    assert (run.status, run.passed) == (RunStatus.ERRORED, None)
    assert "the score must be a number from 0 to 1, not 7" in run.error
    assert JudgeVerdict.objects.count() == 0


def test_without_a_judge_the_judge_grader_is_skipped(project, author):
    environment = import_valid(project, author, judged_spec())
    batch = oracle_batch(project, author, environment)
    assert (batch.judge_endpoint_id, batch.judge_model) == (None, "")
    verdict = judge_verdict_of(Run.objects.get(batch=batch))
    assert (verdict["status"], verdict["evidence"]) == (
        "skipped",
        {"reason": "no judge configured"},
    )


def test_the_batch_judge_overrides_the_project_judge(project, author, judge_server):
    environment = import_valid(project, author, judged_spec())
    project_judge = make_endpoint(project, judge_server, name="judge", model="loop-judge")
    project_judge_set(project=project, endpoint=project_judge, user=author)
    other = make_endpoint(project, judge_server, name="judge-2", model="loop-judge-2")
    batch = oracle_batch(project, author, environment, judge_endpoint=other)
    assert batch.judge_model == "loop-judge-2"
    evidence = judge_verdict_of(Run.objects.get(batch=batch))["evidence"]
    assert (evidence["model"], evidence["cached"]) == ("loop-judge-2", False)
    assert judge_server.chat_requests()[0].body["model"] == "loop-judge-2"


def test_a_judge_of_another_project_is_refused(project, other_project, author, judge_server):

    environment = import_valid(project, author, judged_spec())
    foreign = make_endpoint(other_project, judge_server, name="theirs", model="x")
    with pytest.raises(ApplicationError, match="judge's endpoint belongs to another project"):
        oracle_batch(project, author, environment, judge_endpoint=foreign)
    assert not project.run_batches.exists()


def test_batch_api_takes_a_judge_and_refuses_an_unknown_one(
    api_client_for, project, author, judge_server
):
    environment = import_valid(project, author, judged_spec())
    judge = make_endpoint(project, judge_server, name="judge", model="loop-judge")
    url = f"/api/v1/projects/{project.pk}/run-batches/"
    body = {"policy": "oracle", "environments": [environment.pk], "judge_endpoint": 999999}
    response = api_client_for(author).post(url, body, format="json")
    assert response.status_code == 400
    assert response.json()["details"]["fields"] == {"judge_endpoint": ["Not found."]}
    assert not project.run_batches.exists()
    body["judge_endpoint"] = judge.pk
    response = api_client_for(author).post(url, body, format="json")
    assert response.status_code == 201
    assert (response.json()["judge_endpoint"], response.json()["judge_model"]) == (
        judge.pk,
        "loop-judge",
    )


def test_viewer_panel_shows_the_reasoning_escaped_and_the_cache_hit(
    client_for, viewer, project, author
):
    with LoopbackLLMServer(api_key=KEY) as server:
        server.script(Reply.json({"score": 0.9, "reasoning": "<script>alert(1)</script> ok"}))
        environment = import_valid(project, author, judged_spec())
        judge = make_endpoint(project, server, name="judge", model="loop-judge")
        project_judge_set(project=project, endpoint=judge, user=author)
        first = Run.objects.get(batch=oracle_batch(project, author, environment))
        second = Run.objects.get(batch=oracle_batch(project, author, environment))
    page = client_for(viewer).get(reverse("runs:detail", args=[first.pk])).content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt; ok" in page
    assert "<script>alert(1)" not in page
    assert page.count('data-testid="judge-verdict"') == 1
    assert 'data-testid="judge-cached"' not in page
    page = client_for(viewer).get(reverse("runs:detail", args=[second.pk])).content.decode()
    assert page.count('data-testid="judge-cached"') == 1


BATCH_FORM = {
    "policy": "oracle",
    "role": "eval",
    "statuses": ["valid", "approved"],
    "trials": 1,
    "concurrency": 1,
    "max_tool_calls": 30,
    "max_rounds_per_turn": 10,
    "max_attempts": 1,
    "seed": 0,
    "user_side": "scripted",
}


def test_batch_form_takes_a_judge_and_the_batch_page_names_it(
    client_for, author, project, judge_server, django_capture_on_commit_callbacks, monkeypatch
):

    monkeypatch.setattr("apps.runs.tasks.execute_run_task.delay", lambda pk: None)
    environment = import_valid(project, author, judged_spec())
    judge = make_endpoint(project, judge_server, name="judge", model="loop-judge")
    client = client_for(author)
    form = client.get(reverse("runs:batch_create", args=[project.slug])).content.decode()
    assert '<option value="" selected>The project&#x27;s judge</option>' in form
    assert f'<option value="{judge.pk}">judge</option>' in form
    bad = client.post(
        reverse("runs:batch_create", args=[project.slug]),
        {**BATCH_FORM, "environments": [environment.pk], "judge_endpoint": 999999},
        **HTMX_HEADERS,
    )
    assert bad.status_code == 200
    assert bad.content.decode().lstrip().startswith("<form")
    assert "Select a valid choice" in bad.content.decode()
    assert not RunBatch.objects.exists()
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("runs:batch_create", args=[project.slug]),
            {**BATCH_FORM, "environments": [environment.pk], "judge_endpoint": judge.pk},
            **HTMX_HEADERS,
        )
    batch = RunBatch.objects.get()
    assert response["HX-Redirect"] == f"/runs/batches/{batch.pk}/"
    assert (batch.judge_endpoint_id, batch.judge_model) == (judge.pk, "loop-judge")
    page = client.get(reverse("runs:batch_detail", args=[batch.pk])).content.decode()
    assert '<dd data-testid="batch-judge">loop-judge (judge)</dd>' in page


def test_cancelling_while_the_judge_is_due_cancels_the_run(project, author, judge_server):

    environment = import_valid(project, author, judged_spec())
    judge = make_endpoint(project, judge_server, name="judge", model="loop-judge")
    project_judge_set(project=project, endpoint=judge, user=author)
    batch = run_batch_create(
        project=project,
        user=author,
        policy_kind=PolicyKind.ORACLE,
        selection=TaskSelection(environments=(environment.pk,)),
        executor=Executor.INLINE,
    )
    Job.objects.filter(pk=batch.job_id).update(cancel_requested=True)

    run = run_claim(run_id=Run.objects.get(batch=batch).pk)
    with pytest.raises(RunCancelled):
        play_run(run, LLMUsage(), Heartbeat(lambda: True))
    assert judge_server.chat_requests() == []


def test_a_deleted_judge_endpoint_makes_the_run_unavailable(project, author, judge_server):

    environment = import_valid(project, author, judged_spec())
    judge = make_endpoint(project, judge_server, name="judge", model="loop-judge")
    project_judge_set(project=project, endpoint=judge, user=author)
    batch = run_batch_create(
        project=project,
        user=author,
        policy_kind=PolicyKind.ORACLE,
        selection=TaskSelection(environments=(environment.pk,)),
        executor=Executor.INLINE,
    )
    endpoint_delete(endpoint=judge)
    run_batch_execute_inline(batch=batch)
    run = Run.objects.get(batch=batch)
    assert (run.status, run.retryable, run.error) == (
        RunStatus.ERRORED,
        False,
        "The batch's judge endpoint was deleted.",
    )
