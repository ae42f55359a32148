"""LLM synthesis with the real ``openai`` client against the scripted loopback server."""

import copy
import json
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection

from apps.core.models import JobStatus
from apps.environments.models import Environment, EnvironmentStatus
from apps.llm.models import LLMCall
from apps.synthesis.generators import generate_environment
from apps.synthesis.models import SlotStatus, SynthesisAttempt
from apps.synthesis.services import synthesis_run_inline, synthesis_slot_run, synthesis_start
from coworkenv_engine.validation import validate_spec
from tests.llm_server import Reply
from tests.synthesis.conftest import CAPS


def valid_spec(seed=3) -> dict:
    return generate_environment(seed=seed, capabilities=CAPS, tasks_per_environment=2)


def broken_spec() -> tuple[dict, list[dict]]:
    """A schema-valid spec with static errors: a tool bound to a collection that does not
    exist. Returns the spec and the validator's errors."""
    spec = valid_spec()
    spec["tools"][0]["binding"]["collection"] = "nowhere"
    problems = [p for p in validate_spec(spec).to_dict()["problems"] if p["severity"] == "error"]
    assert problems
    return spec, problems


@pytest.fixture
def start_llm(project, author, capabilities, endpoint):
    def start(count=1, **kwargs):
        return synthesis_start(
            project=project,
            user=author,
            capabilities=capabilities,
            count=count,
            generator="llm",
            endpoint=endpoint,
            tasks_per_environment=2,
            seed=1,
            enqueue=False,
            **kwargs,
        )

    return start


@pytest.mark.django_db
def test_valid_first_try_is_one_attempt(start_llm, llm_server):
    llm_server.script(Reply.json(valid_spec(), usage=(9000, 4000)))
    synthesis = start_llm()
    job = synthesis_run_inline(synthesis=synthesis)

    slot = synthesis.slots.get()
    assert job.status == JobStatus.SUCCEEDED
    assert (slot.status, slot.attempts_count, slot.repair_rounds) == (SlotStatus.VALID, 1, 0)
    assert slot.environment.status == EnvironmentStatus.VALID
    assert (slot.tokens_in, slot.tokens_out) == (9000, 4000)
    # 9000 * 2.50 / 1e6 + 4000 * 10 / 1e6
    assert str(slot.cost) == "0.062500"
    assert (slot.model, slot.endpoint_name, slot.prompt_version) == ("loop-large", "loopback", "v1")
    attempt = SynthesisAttempt.objects.get(slot=slot)
    assert attempt.llm_call_ids == [LLMCall.objects.get(job=synthesis.job).pk]
    assert LLMCall.objects.get(job=synthesis.job).purpose == "synthesis.draft"

    [request] = llm_server.chat_requests()
    system, user = request.messages
    assert "coworkenv.environment/v1" in system["content"]
    assert "`clarify-before-acting`" in user["content"]
    assert "## The JSON Schema of the document" in user["content"]
    assert "Tasks: exactly 2" in user["content"]
    assert job.result["tokens_in"] == 9000


@pytest.mark.django_db
def test_invalid_then_repaired_is_two_attempts_and_repair_names_the_problems(start_llm, llm_server):
    spec, problems = broken_spec()
    llm_server.script(Reply.json(spec), Reply.json(valid_spec()))
    synthesis = start_llm()
    synthesis_run_inline(synthesis=synthesis)

    slot = synthesis.slots.get()
    assert (slot.status, slot.attempts_count, slot.repair_rounds) == (SlotStatus.VALID, 2, 1)
    first, second = SynthesisAttempt.objects.filter(slot=slot).order_by("round")
    assert (first.kind, first.valid, first.error_count) == ("draft", False, len(problems))
    assert (second.kind, second.valid) == ("repair", True)

    repair = llm_server.chat_requests()[1]
    assert [m["role"] for m in repair.messages] == ["system", "user", "assistant", "user"]
    assert json.loads(repair.messages[2]["content"]) == spec
    feedback = repair.messages[3]["content"]
    for problem in problems:
        assert f"`{problem['code']}` at `{problem['pointer']}`" in feedback
        assert problem["message"] in feedback
    assert LLMCall.objects.filter(job=synthesis.job, purpose="synthesis.repair").count() == 1
    assert synthesis.job.__class__.objects.get(pk=synthesis.job_id).result["repaired"] == 1


@pytest.mark.django_db
def test_still_invalid_after_the_rounds_is_kept_as_invalid(start_llm, llm_server):
    spec, _ = broken_spec()
    llm_server.script(Reply.json(spec), Reply.json(spec))
    synthesis = start_llm(max_repair_rounds=1)
    job = synthesis_run_inline(synthesis=synthesis)

    slot = synthesis.slots.get()
    assert (slot.status, slot.attempts_count) == (SlotStatus.INVALID, 2)
    assert slot.environment.status == EnvironmentStatus.INVALID
    assert slot.error.startswith("Still invalid after 2 attempts")
    assert job.status == JobStatus.SUCCEEDED
    assert job.message == "1 of 1 finished: 0 valid, 1 invalid, 0 failed."


@pytest.mark.django_db
@pytest.mark.parametrize(
    "bad",
    [
        Reply.text("Sure! Here is the environment you asked for, described in words."),
        Reply.truncated_json(valid_spec(), keep=0.5),
    ],
    ids=["not-json", "truncated"],
)
def test_unusable_answer_is_an_attempt_and_the_next_round_recovers(start_llm, llm_server, bad):
    llm_server.script(bad, Reply.json(valid_spec()))
    synthesis = start_llm()
    synthesis_run_inline(synthesis=synthesis)

    slot = synthesis.slots.get()
    assert (slot.status, slot.attempts_count) == (SlotStatus.VALID, 2)
    first = SynthesisAttempt.objects.get(slot=slot, round=0)
    assert first.document is None and first.valid is None
    assert first.raw_text == bad.content
    assert first.error.startswith("Unusable answer")
    feedback = llm_server.chat_requests()[1].messages[-1]["content"]
    assert feedback.startswith("Your last answer could not be used:")
    assert ("keep it shorter" in feedback) == (bad.finish_reason == "length")


@pytest.mark.django_db
@pytest.mark.parametrize(
    "transient",
    [Reply.rate_limited(retry_after=0.2), Reply.error(500, "boom"), Reply.hanging()],
    ids=["429-retry-after", "500", "hang-past-timeout"],
)
def test_transient_failures_are_retried_by_the_client(start_llm, llm_server, transient):
    llm_server.script(transient, Reply.json(valid_spec()))
    synthesis = start_llm()
    job = synthesis_run_inline(synthesis=synthesis)

    slot = synthesis.slots.get()
    assert (slot.status, slot.attempts_count) == (SlotStatus.VALID, 1)
    assert len(llm_server.chat_requests()) == 2
    calls = LLMCall.objects.filter(job=synthesis.job).order_by("attempt")
    assert [c.status for c in calls] == ["retrying", "ok"]
    assert job.status == JobStatus.SUCCEEDED


@pytest.mark.django_db
def test_endpoint_down_fails_the_slot_clearly_and_the_job_completes(start_llm, llm_server):
    # Slot 1: three 500s (the client's LLM_MAX_ATTEMPTS=3) -> failed. Slot 2: fine.
    llm_server.script(*[Reply.error(500, "overloaded")] * 3, Reply.json(valid_spec()))
    synthesis = start_llm(count=2)
    job = synthesis_run_inline(synthesis=synthesis)

    failed, ok = synthesis.slots.order_by("index")
    assert failed.status == SlotStatus.FAILED
    assert failed.environment is None
    assert failed.error == (
        "Endpoint “loopback” is unavailable after 3 attempts: HTTP 500: overloaded"
    )
    attempt = SynthesisAttempt.objects.get(slot=failed)
    assert attempt.error == failed.error and attempt.document is None
    assert ok.status == SlotStatus.VALID
    assert job.status == JobStatus.SUCCEEDED
    assert job.message == "2 of 2 finished: 1 valid, 0 invalid, 1 failed."
    assert Environment.objects.count() == 1


@pytest.mark.django_db
def test_all_slots_failing_fails_the_job(start_llm, llm_server):
    llm_server.script(Reply.error(401, "bad key"))
    job = synthesis_run_inline(synthesis=start_llm())
    assert job.status == JobStatus.FAILED
    assert job.message == "1 of 1 finished: 0 valid, 0 invalid, 1 failed."


@pytest.mark.django_db(transaction=True)
def test_concurrency_limit_holds_across_parallel_slots(start_llm, llm_server, endpoint):
    assert endpoint.max_concurrency == 2
    # A generous client timeout: on a loaded machine a request abandoned at the fixture's
    # 0.5 s would be retried while the server still works on it, and the server would
    # rightly count three requests in flight.
    type(endpoint).objects.filter(pk=endpoint.pk).update(request_timeout_s=10)
    spec = valid_spec()
    llm_server.latency = 0.3
    llm_server.responder = lambda request: Reply.json(copy.deepcopy(spec))
    synthesis = start_llm(count=6)
    slot_ids = list(synthesis.slots.values_list("pk", flat=True))
    barrier = threading.Barrier(len(slot_ids))

    def run(slot_id):
        try:
            barrier.wait()
            return synthesis_slot_run(slot_id=slot_id)
        finally:
            connection.close()

    with ThreadPoolExecutor(len(slot_ids)) as pool:
        outcomes = list(pool.map(run, slot_ids))

    assert outcomes == ["valid"] * 6
    assert llm_server.max_in_flight == 2
    assert len(llm_server.chat_requests()) == 6
    synthesis.job.refresh_from_db()
    assert synthesis.job.status == JobStatus.SUCCEEDED
    # The same spec six times: the first is original, the five others near-duplicates.
    assert synthesis.slots.filter(duplicate_of__isnull=False).count() >= 5
