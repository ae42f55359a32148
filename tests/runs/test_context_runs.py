"""A run whose conversation outgrows the model's context: the real ``openai`` client against
the loopback server, the request compacted (summarized by the model), the trajectory whole,
the grading unchanged, and the compaction shown in the viewer."""

import pytest
from django.urls import reverse

from apps.core.exceptions import ApplicationError
from apps.llm.models import ContextStrategy, LLMCall
from apps.llm.services import endpoint_create
from apps.runs.agent import COMPACT_PURPOSE
from apps.runs.context import SUMMARY_HEADER, TokenEstimator
from apps.runs.models import Run, RunStatus
from tests.llm_server import LoopbackLLMServer, Reply
from tests.runs.conftest import import_valid
from tests.runs.test_llm_runs import ANSWER, KEY, KEY_ENV, SEND, clarify_spec, run_one

pytestmark = pytest.mark.django_db

LONG_QUESTION = (
    "Before I send anything: which budget do you mean, and what is the figure? "
    + "I looked at your calendar for this week to see what is planned around it. " * 12
)
SUMMARY = "The user wants a budget figure emailed to Dana; I asked which figure."


@pytest.fixture(autouse=True)
def quick(settings, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    settings.LLM_BACKOFF_BASE_S = 0.01
    settings.LLM_MAX_ATTEMPTS = 1


def script(*, with_summary: bool) -> list[Reply]:
    # prompt_tokens 0: the endpoint reports no count, so the estimate keeps its default ratio
    usage = (0, 10)
    replies = [
        Reply(
            tool_calls=[{"id": "call_look", "name": "list_events", "arguments": {}}], usage=usage
        ),
        Reply.text(LONG_QUESTION, usage=usage),
        Reply(
            tool_calls=[
                {"id": "call_send", "name": "send_email", "arguments": SEND},
                {"id": "call_cal", "name": "list_events", "arguments": {}},
            ],
            usage=usage,
        ),
        Reply.text("Sent. Careful: the dentist moved to 16:30.", usage=usage),
    ]
    if with_summary:
        replies.insert(2, Reply.text(SUMMARY, usage=usage))
    return replies


def endpoint(project, server, name, **fields):
    return endpoint_create(
        project=project,
        name=name,
        base_url=server.base_url,
        model="loop-teacher",
        api_key_env=KEY_ENV,
        temperature=0.0,
        max_tokens=100,
        request_timeout_s=5,
        **fields,
    )


def test_a_compacted_run_keeps_its_trajectory_and_grade_and_shows_the_compaction(
    project, author, client
):
    environment = import_valid(project, author, clarify_spec())
    with LoopbackLLMServer(api_key=KEY) as server:
        server.script(*script(with_summary=False))
        whole = Run.objects.get(
            batch=run_one(project, author, environment, endpoint(project, server, "whole"))
        )
        first_of_turn_1 = server.chat_requests()[2].body
        server.reset()

        # room for the second turn's first request only once the first turn is summarized
        estimator = TokenEstimator()
        needed = estimator.estimate(first_of_turn_1["messages"], first_of_turn_1["tools"])
        budget = needed - 10
        context_tokens = int(budget / 0.9) + 1 + 100
        small = endpoint(
            project,
            server,
            "small",
            context_tokens=context_tokens,
            context_strategy=ContextStrategy.SUMMARIZE,
        )
        server.script(*script(with_summary=True))
        run = Run.objects.get(batch=run_one(project, author, environment, small))
        requests = [r.body for r in server.chat_requests()]

    assert whole.status == run.status == RunStatus.SUCCEEDED
    assert whole.context_events == []
    # the trajectory is whole and the grade the same: graders see everything
    assert run.transcript == whole.transcript
    assert (run.score, run.passed, run.strict) == (whole.score, whole.passed, whole.strict)
    assert [v["status"] for v in run.verdicts] == [v["status"] for v in whole.verdicts]

    # request 3 asked for the summary; request 4 sent it instead of the first turn
    assert "USER: Email Dana" in requests[2]["messages"][1]["content"]
    assert LONG_QUESTION.strip()[:60] in requests[2]["messages"][1]["content"]
    system = whole.transcript[0]
    assert requests[3]["messages"] == [
        system,
        {"role": "user", "content": SUMMARY_HEADER + SUMMARY},
        {"role": "user", "content": ANSWER},
    ]
    assert estimator.estimate(requests[3]["messages"], requests[3]["tools"]) <= budget
    # the summary is reused for the rest of the turn
    assert requests[4]["messages"][:3] == requests[3]["messages"]
    assert LLMCall.objects.filter(purpose=COMPACT_PURPOSE, endpoint=small).count() == 1

    [event] = [e for e in run.context_events if "summary" in e]
    assert event == {
        "call": 3,
        "strategy": ContextStrategy.SUMMARIZE,
        "tokens_before": needed,
        "summarized_messages": 4,
        "summary": SUMMARY,
        "tokens_after": event["tokens_after"],
        "budget": budget,
        "turn": 1,
        "messages": 6,
    }
    assert event["tokens_after"] <= budget

    client.force_login(author)
    page = client.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert 'data-testid="context-compaction"' in page
    assert "4 earlier messages summarized" in page
    assert SUMMARY in page
    assert (
        'data-testid="context-compaction"'
        not in client.get(reverse("runs:detail", args=[whole.pk])).content.decode()
    )


def test_a_turn_that_cannot_fit_ends_the_run_with_a_clear_error_and_no_retry(project, author):
    environment = import_valid(project, author, clarify_spec())
    with LoopbackLLMServer(api_key=KEY) as server:
        tiny = endpoint(project, server, "tiny", context_tokens=120)
        run = Run.objects.get(batch=run_one(project, author, environment, tiny))
        assert server.chat_requests() == []  # nothing too long was ever sent
    assert run.status == RunStatus.ERRORED
    assert run.retryable is False
    assert "even after compaction" in run.error
    assert "raise its context length or lower its max tokens" in run.error
    assert run.context_events[0]["call"] == 1


def test_the_context_length_must_leave_room_for_the_answer(project):
    with pytest.raises(ApplicationError) as refused:
        endpoint_create(
            project=project,
            name="cramped",
            base_url="https://api.example.com/v1",
            model="m",
            max_tokens=4096,
            context_tokens=4096,
        )
    assert "must exceed max tokens" in refused.value.extra["fields"]["context_tokens"][0]


def test_the_endpoint_page_says_how_its_context_is_managed(project, author, client):
    client.force_login(author)
    unknown = endpoint_create(
        project=project, name="unknown", base_url="https://api.example.com/v1", model="m"
    )
    managed = endpoint_create(
        project=project,
        name="managed",
        base_url="https://api.example.com/v1",
        model="m",
        max_tokens=1000,
        context_tokens=32768,
        keep_tool_results=1,
    )
    page = client.get(reverse("llm:endpoint_detail", args=[managed.pk])).content.decode()
    assert (
        "32,768 tokens; when full: drop old tool results, then old turns "
        "(last 1 tool result kept whole)"
    ) in page
    page = client.get(reverse("llm:endpoint_detail", args=[unknown.pk])).content.decode()
    assert "unknown: requests are sent whole" in page
