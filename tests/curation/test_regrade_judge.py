"""Re-grading demonstrations with judge graders: the project's judge answers from its cache
when the evidence is unchanged (no LLM call); a judge outage leaves the demonstration as it
was and lists it as not replayable, never as failed."""

import pytest

from apps.core.models import Job
from apps.curation.models import Demonstration
from apps.curation.services import regrade_job_start
from apps.curation.tasks import regrade_demonstrations_task
from apps.llm.models import JudgeVerdict
from apps.llm.services import project_judge_set
from apps.runs.models import Executor, PolicyKind, RunRole
from apps.runs.services import (
    BatchSettings,
    TaskSelection,
    run_batch_create,
    run_batch_execute_inline,
)
from tests.llm_server import LoopbackLLMServer, Reply, judge_responder
from tests.runs.conftest import import_valid
from tests.runs.test_judge import judged_spec
from tests.runs.test_llm_runs import KEY, make_endpoint

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fast_retries(settings, monkeypatch):
    monkeypatch.setenv("COWORKENV_TEST_RUNS_API_KEY", KEY)
    settings.LLM_BACKOFF_BASE_S = 0.01
    settings.LLM_BACKOFF_MAX_S = 0.02
    settings.LLM_MAX_ATTEMPTS = 2
    settings.LLM_MAX_TOTAL_WAIT_S = 5


def judged_demonstration(project, author, server) -> Demonstration:
    spec = judged_spec()
    spec["tasks"][0]["split"] = "train"  # teacher batches offer train tasks only
    environment = import_valid(project, author, spec)
    judge = make_endpoint(project, server, name="judge", model="loop-judge")
    project_judge_set(project=project, endpoint=judge, user=author)
    batch = run_batch_create(
        project=project,
        user=author,
        policy_kind=PolicyKind.ORACLE,
        role=RunRole.TEACHER,
        selection=TaskSelection(environments=(environment.pk,)),
        settings=BatchSettings(),
        executor=Executor.INLINE,
    )
    run_batch_execute_inline(batch=batch)
    return Demonstration.objects.get(project=project)


def judge_evidence_of(demo: Demonstration) -> dict:
    demo.current_version.refresh_from_db()
    verdicts = demo.current_version.grading["verdicts"]
    return next(v for v in verdicts if v["grader_id"] == "judged-handoff")["evidence"]


def test_regrade_reuses_the_cached_verdict_without_an_llm_call(project, author):
    with LoopbackLLMServer(api_key=KEY, responder=judge_responder()) as server:
        demo = judged_demonstration(project, author, server)
        assert len(server.chat_requests()) == 1
        job = regrade_job_start(project=project, user=author, only_stale=False)
        regrade_demonstrations_task(job.pk)
        assert len(server.chat_requests()) == 1
    job.refresh_from_db()
    assert job.result["failed"] == []
    evidence = judge_evidence_of(demo)
    assert (evidence["score"], evidence["cached"]) == (1.0, True)
    assert JudgeVerdict.objects.get().hits == 1


def test_a_judge_outage_during_regrade_changes_nothing(project, author):
    with LoopbackLLMServer(api_key=KEY, responder=judge_responder()) as server:
        demo = judged_demonstration(project, author, server)
        JudgeVerdict.objects.all().delete()
        server.responder = lambda request: Reply.error(503, "judge down")
        before = demo.current_version.grading
        job = regrade_job_start(project=project, user=author, only_stale=False)
        regrade_demonstrations_task(job.pk)
    job = Job.objects.get(pk=job.pk)
    (failure,) = job.result["failed"]
    assert failure["demonstration"] == demo.pk
    assert failure["error"].startswith("The judge could not score it: ")
    assert "judge down" in failure["error"]
    demo.current_version.refresh_from_db()
    assert demo.current_version.grading == before
