"""Staged drafting of long tasks (apps/synthesis/services/staged.py) with the real ``openai``
client against the loopback server: outline, one request per turn, graders, then the whole
document; a fault in a turn is repaired by that turn's own request, never by a new outline."""

import copy
import json

import pytest

from apps.llm.models import LLMCall
from apps.synthesis.generators import generate_environment
from apps.synthesis.models import SlotStatus, SynthesisAttempt
from apps.synthesis.services import synthesis_run_inline, synthesis_start
from apps.synthesis.services.staged import drafts_in_stages
from apps.synthesis.staged_document import FINAL, OUTLINE, graders_step, owner_of, turn_step
from coworkenv_engine.validation import validate_spec
from tests.llm_server import Reply
from tests.synthesis.conftest import CAPS


def long_environment() -> dict:
    document = generate_environment(
        seed=3, capabilities=CAPS[:1], tasks_per_environment=1, turns=(5, 6), difficulty="hard"
    )
    assert validate_spec(document).valid
    return document


def staged_answers(document: dict) -> tuple[dict, list[dict], dict]:
    """What a model following the stage prompts would answer for ``document``."""
    outline = copy.deepcopy(document)
    task = outline["tasks"][0]
    turns = task.pop("turns")
    reference = {step["turn"]: step for step in task.pop("reference_solution")}
    graders = {"graders": task.pop("graders")}
    if "scoring" in task:
        graders["scoring"] = task.pop("scoring")
    task["outline"] = [
        {"time": turn.get("time"), "summary": f"Turn {k}: {turn['message'][:60]}"}
        for k, turn in enumerate(turns)
    ]
    answers = []
    for k, turn in enumerate(turns):
        step = reference.get(k, {})
        answer = {**turn, "calls": step.get("calls", [])}
        if "reply" in step:
            answer["reply"] = step["reply"]
        answers.append(answer)
    return outline, answers, graders


@pytest.fixture
def start_long(project, author, capabilities, endpoint):
    def start(**kwargs):
        return synthesis_start(
            project=project,
            user=author,
            capabilities=capabilities[:1],
            count=1,
            generator="llm",
            endpoint=endpoint,
            tasks_per_environment=1,
            turns=(5, 6),
            seed=1,
            enqueue=False,
            **kwargs,
        )

    return start


@pytest.mark.django_db
def test_a_fault_in_turn_one_is_repaired_by_its_own_request_not_a_new_outline(
    start_long, llm_server
):
    document = long_environment()
    outline, turns, graders = staged_answers(document)
    broken = {**turns[1], "calls": [{"tool": "no_such_tool", "arguments": {}}, *turns[1]["calls"]]}
    llm_server.script(
        Reply.json(outline),
        Reply.json(turns[0]),
        Reply.json(broken),
        Reply.json(turns[1]),
        *[Reply.json(turn) for turn in turns[2:]],
        Reply.json(graders),
    )
    synthesis = start_long()
    assert drafts_in_stages(synthesis)

    synthesis_run_inline(synthesis=synthesis)

    slot = synthesis.slots.get()
    assert slot.status == SlotStatus.VALID, slot.error
    requests = llm_server.chat_requests()
    assert len(requests) == 1 + len(turns) + 1 + 1
    # one outline: the repair of turn 1 did not ask for the environment again
    assert sum("this is stage 1, the outline" in r.messages[1]["content"] for r in requests) == 1
    repair = requests[3].messages
    assert "## Stage 2: write turn 1 of task" in repair[1]["content"]
    feedback = repair[-1]["content"]
    assert "`/tasks/0/reference_solution/" in feedback
    assert "no_such_tool" in feedback
    purposes = list(
        LLMCall.objects.filter(job=synthesis.job).order_by("pk").values_list("purpose", flat=True)
    )
    assert purposes == [
        "synthesis.outline",
        "synthesis.turn",
        "synthesis.turn",
        "synthesis.turn.repair",
        *["synthesis.turn"] * (len(turns) - 2),
        "synthesis.graders",
    ]
    steps = [
        (a.report or {}).get("step")
        for a in SynthesisAttempt.objects.filter(slot=slot).order_by("round")
    ]
    assert steps == [
        OUTLINE,
        turn_step(0, 0),
        turn_step(0, 1),
        turn_step(0, 1),
        *[turn_step(0, k) for k in range(2, len(turns))],
        graders_step(0),
        FINAL,
    ]
    final = SynthesisAttempt.objects.filter(slot=slot).order_by("round").last()
    assert final.valid and final.document == document  # the staging marks are gone
    assert slot.environment is not None and slot.environment.status == "valid"


@pytest.mark.django_db
def test_an_answer_of_the_wrong_shape_is_a_problem_for_its_repair(start_long, llm_server):
    document = long_environment()
    outline, turns, graders = staged_answers(document)
    no_outline = copy.deepcopy(outline)
    del no_outline["tasks"][0]["outline"]
    llm_server.script(
        Reply.json(no_outline),
        Reply.json(outline),
        *[Reply.json(turn) for turn in turns],
        Reply.json(graders),
    )
    synthesis = start_long()
    synthesis_run_inline(synthesis=synthesis)

    slot = synthesis.slots.get()
    assert slot.status == SlotStatus.VALID, slot.error
    first = SynthesisAttempt.objects.filter(slot=slot).order_by("round").first()
    assert first.report["problems"][0]["code"] == "staged_answer_shape"
    assert first.report["problems"][0]["pointer"] == "/tasks/0/outline"
    assert "`/tasks/0/outline`" in llm_server.chat_requests()[1].messages[-1]["content"]


def test_problems_go_to_the_step_that_wrote_them():
    document = {
        "tasks": [
            {"reference_solution": [{"turn": 0, "calls": []}, {"turn": 3, "calls": []}]},
        ]
    }
    assert owner_of("/services/email/inbox/0", document) == OUTLINE
    assert owner_of("/tools/2/binding", document) == OUTLINE
    assert owner_of("/tasks/0/system", document) == OUTLINE
    assert owner_of("/tasks/0/turns/4/updates/0", document) == turn_step(0, 4)
    assert owner_of("/tasks/0/reference_solution/1/calls/0", document) == turn_step(0, 3)
    assert owner_of("/tasks/0/graders/2/check", document) == graders_step(0)
    assert owner_of("/tasks/0", document) == graders_step(0)


@pytest.mark.django_db
def test_short_tasks_are_still_drafted_in_one_request(project, author, capabilities, endpoint):
    synthesis = synthesis_start(
        project=project,
        user=author,
        capabilities=capabilities,
        count=1,
        generator="llm",
        endpoint=endpoint,
        turns=(1, 3),
        enqueue=False,
    )
    assert not drafts_in_stages(synthesis)
    assert json.dumps(synthesis.turns_max) == "3"


@pytest.mark.django_db
def test_a_long_horizon_llm_job_is_staged_with_five_to_twelve_turns(
    project, author, capabilities, endpoint, llm_server
):
    synthesis = synthesis_start(
        project=project,
        user=author,
        capabilities=capabilities,
        count=1,
        generator="llm",
        endpoint=endpoint,
        turns=(1, 3),
        horizon="long",
        max_repair_rounds=0,
        enqueue=False,
    )
    assert drafts_in_stages(synthesis)
    llm_server.script(Reply.text("not json"))
    synthesis_run_inline(synthesis=synthesis)
    [request] = llm_server.chat_requests()
    outline = request.messages[1]["content"]
    assert "each with 5 to 12 user turns" in outline
    assert "a list of 5 to 12 entries, one per user turn" in outline
    slot = synthesis.slots.get()
    assert slot.status == SlotStatus.FAILED
    assert SynthesisAttempt.objects.get(slot=slot).report["step"] == OUTLINE
