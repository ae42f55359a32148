"""Validation and judge graders: without a judge they are skipped and the report says the
task is only partially certified; with the project's judge the oracle must pass them."""

import json
from pathlib import Path

import pytest
from django.urls import reverse

from apps.environments.models import EnvironmentStatus
from apps.environments.services import environment_import
from apps.environments.services.validation import environment_validate
from apps.llm.exceptions import LLMUnavailable
from apps.llm.models import JudgeVerdict
from apps.llm.services import project_judge_set
from coworkenv_engine.validation import validate_spec
from tests.llm_server import LoopbackLLMServer, Reply, judge_responder
from tests.runs.test_llm_runs import KEY, make_endpoint

ROOT = Path(__file__).resolve().parents[2]
POINTER = "/tasks/0/graders/6"
RUBRIC = 'The review must be booked at "16:00" and the reply must say the earlier slot "clashed".'


def judged_spec(rubric: str = RUBRIC) -> dict:
    """The sample's first task (valid as it is) with a judge grader added."""
    spec = json.loads((ROOT / "samples" / "acme-ops.json").read_text())
    spec["tasks"] = spec["tasks"][:1]
    spec["tasks"][0]["graders"].append(
        {
            "id": "judged-booking",
            "category": "communication",
            "weight": 1,
            "check": {"kind": "judge", "rubric": rubric, "threshold": 0.75},
        }
    )
    return spec


@pytest.fixture(autouse=True)
def fast_retries(settings, monkeypatch):
    monkeypatch.setenv("COWORKENV_TEST_RUNS_API_KEY", KEY)
    settings.LLM_BACKOFF_BASE_S = 0.01
    settings.LLM_BACKOFF_MAX_S = 0.02
    settings.LLM_MAX_ATTEMPTS = 2
    settings.LLM_MAX_TOTAL_WAIT_S = 5


def certification_warnings(problems) -> list:
    return [p for p in problems if p["code"] == "judge_not_certified"]


def test_engine_without_a_judge_skips_and_warns_partial_certification():
    report = validate_spec(judged_spec()).to_dict()
    assert report["valid"] is True
    assert certification_warnings(report["problems"]) == [
        {
            "code": "judge_not_certified",
            "severity": "warning",
            "pointer": POINTER,
            "message": "Grader 'judged-booking' needs an LLM judge and none was available, so "
            "it was skipped: task 'book-q3-review' is only partially certified.",
            "hint": "Choose the project's LLM judge and validate again to certify it whole.",
        }
    ]


@pytest.mark.django_db
def test_the_warning_is_on_the_validation_tab(client_for, viewer, project, author):
    environment = environment_import(project=project, spec=judged_spec(), user=author)
    environment_validate(environment=environment)
    page = (
        client_for(viewer)
        .get(reverse("environments:tab", args=[environment.pk, "validation"]))
        .content.decode()
    )
    assert 'data-code="judge_not_certified"' in page
    assert "is only partially certified" in page


@pytest.mark.django_db
def test_with_the_project_judge_the_oracle_must_pass_the_judge_grader(project, author):
    environment = environment_import(project=project, spec=judged_spec(), user=author)
    with LoopbackLLMServer(api_key=KEY, responder=judge_responder()) as server:
        judge = make_endpoint(project, server, name="judge", model="loop-judge")
        project_judge_set(project=project, endpoint=judge, user=author)
        report = environment_validate(environment=environment)
        asked = len(server.chat_requests())
        assert asked == JudgeVerdict.objects.count() > 0
        environment_validate(environment=environment)  # same evidence: all from the cache
        assert len(server.chat_requests()) == asked
    assert report.valid is True
    assert certification_warnings(report.problems) == []
    assert report.tasks[0]["oracle_strict"] is True
    environment.refresh_from_db()
    assert environment.status == EnvironmentStatus.VALID


@pytest.mark.django_db
def test_a_judge_the_oracle_fails_makes_the_task_invalid(project, author):
    spec = judged_spec('The reply must quote "the invoice INV-9".')
    environment = environment_import(project=project, spec=spec, user=author)
    with LoopbackLLMServer(api_key=KEY, responder=judge_responder()) as server:
        judge = make_endpoint(project, server, name="judge", model="loop-judge")
        project_judge_set(project=project, endpoint=judge, user=author)
        report = environment_validate(environment=environment)
    assert report.valid is False
    failing = [p for p in report.problems if p["code"] == "oracle_not_strict"]
    assert [p["pointer"] for p in failing] == [POINTER]


@pytest.mark.django_db
def test_a_judge_outage_fails_validation_without_judging_the_spec(project, author):
    environment = environment_import(project=project, spec=judged_spec(), user=author)
    with LoopbackLLMServer(api_key=KEY, responder=lambda r: Reply.error(503, "down")) as down:
        judge = make_endpoint(project, down, name="judge", model="loop-judge")
        project_judge_set(project=project, endpoint=judge, user=author)
        with pytest.raises(LLMUnavailable):
            environment_validate(environment=environment)
    environment.refresh_from_db()
    assert environment.status == EnvironmentStatus.DRAFT
    assert not environment.validation_reports.exists()
