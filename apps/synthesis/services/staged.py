"""Staged LLM drafting for long tasks: outline → one turn at a time → graders.

A single request does not scale to tasks with 5 to 12 turns and dozens of reference calls: the
answer outgrows ``max_tokens`` and one fault sends the whole document back for repair. A job
whose tasks have ``STAGED_FROM_TURNS`` or more turns is drafted in steps, each checked and
repaired on its own before the next is built on it:

1. ``outline`` — the environment (scenario, services and records, tools, each task's key,
   prompt, persona…) with, per task, an outline of its turns (time + what the turn asks and
   leaves behind) instead of turns, reference solution and graders;
2. ``turn:<task>:<k>`` — turn k of a task: message, time, exogenous updates, the reference
   calls and reply of that turn;
3. ``graders:<task>`` — the task's graders (and scoring);
4. ``final`` — the whole document, validated as any draft (dynamic checks included).

The working document is a complete environment at every step (placeholders stand for what
is not written yet; ``metadata.staged`` of each task holds its outline and progress), so each
step is validated statically and only the problems whose JSON pointer falls in what that step
wrote are sent back to it. Problems of the final validation go to the step that owns their
pointer: a fault in turn 2 is repaired by a turn-2 request, never by redrafting the outline.
Every answer and every final validation is a stored ``SynthesisAttempt`` (``report.step``
names the step), so a worker that dies resumes at the step it was on.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from django.conf import settings

from apps.environments.attachments import attachment_bytes
from apps.llm.client import llm_chat, parse_json_answer
from apps.llm.exceptions import LLMError
from apps.synthesis.models import Generator, SynthesisAttempt, SynthesisJob, SynthesisSlot
from apps.synthesis.services.drafting import Answer, _avoid_names, capability_context
from apps.synthesis.services.prompts import _render, render_draft, render_system
from apps.synthesis.staged_document import (
    FINAL,
    OUTLINE,
    StepRefused,
    apply_graders,
    apply_outline,
    apply_turn,
    current_of,
    errors_of,
    finished_document,
    next_step,
    owner_of,
    staged_meta,
    task_at,
)
from coworkenv_engine.validation import validate_spec

STAGED_FROM_TURNS = 5
MAX_DOCUMENT_CHARS_IN_PROMPT = 120_000
OBJECT_SCHEMA = {"type": "object"}


# the turns per task a horizon asks of an LLM draft (the template generator's own mixes are in
# generators/long_horizon.py); a job's own range counts when it asks for more
HORIZON_TURNS = {"medium": (3, 6), "long": (5, 12)}


def staged_turns(synthesis: SynthesisJob) -> tuple[int, int]:
    low, high = HORIZON_TURNS.get(synthesis.horizon, (1, 1))
    return max(low, synthesis.turns_min), max(high, synthesis.turns_max)


def drafts_in_stages(synthesis: SynthesisJob) -> bool:
    """LLM jobs with long tasks: 5+ turns asked for, or a medium or long horizon."""
    return synthesis.generator == Generator.LLM and (
        synthesis.turns_max >= STAGED_FROM_TURNS or synthesis.horizon in HORIZON_TURNS
    )


# ----------------------------------------------------------------------------- applying


# ----------------------------------------------------------------------------- requests


def _document_text(document: dict) -> str:
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False)[
        :MAX_DOCUMENT_CHARS_IN_PROMPT
    ]


def step_request(synthesis: SynthesisJob, slot: SynthesisSlot, step: str, document: dict | None):
    version = synthesis.prompt_version
    turns = staged_turns(synthesis)
    if step == OUTLINE:
        draft = render_draft(
            version,
            capabilities=capability_context(synthesis),
            services=list(synthesis.services),
            tasks_per_environment=synthesis.tasks_per_environment,
            turns=turns,
            difficulty=synthesis.difficulty,
            domain_hint=synthesis.domain_hint,
            scenario_hint=synthesis.scenario_hint,
            index=slot.index,
            count=synthesis.count,
            seed=slot.seed,
            avoid_names=_avoid_names(synthesis, slot),
        )
        text = (
            draft
            + "\n"
            + _render(
                version,
                "stage_outline.md",
                {
                    "turns_min": turns[0],
                    "turns_max": turns[1],
                },
            )
        )
    elif step.startswith("turn:"):
        _, task_index, turn = step.split(":")
        task = task_at(document, int(task_index))
        outline = staged_meta(task).get("outline") or []
        text = _render(
            version,
            "stage_turn.md",
            {
                "turn": int(turn),
                "turn_human": int(turn) + 1,
                "turn_count": len(outline),
                "task_key": task.get("key", ""),
                "document": _document_text(document),
                "outline": json.dumps(outline[int(turn)], ensure_ascii=False),
            },
        )
    else:
        task = task_at(document, int(step.split(":")[1]))
        text = _render(
            version,
            "stage_graders.md",
            {"task_key": task.get("key", ""), "document": _document_text(document)},
        )
    return [
        {"role": "system", "content": render_system(version)},
        {"role": "user", "content": text},
    ]


def repair_request(
    synthesis: SynthesisJob,
    slot: SynthesisSlot,
    step: str,
    document: dict | None,
    *,
    problems: list[dict],
    round_: int,
    parse_error: str = "",
    previous_text: str = "",
) -> list[dict]:
    """The step's request again, then what it wrote and what is wrong with it."""
    messages = step_request(synthesis, slot, step, document)
    if previous_text:
        current = previous_text[:MAX_DOCUMENT_CHARS_IN_PROMPT]
    else:
        current = "" if document is None else _document_text(current_of(step, document))
    repair = _render(
        synthesis.prompt_version,
        "stage_repair.md",
        {
            "parse_error": parse_error,
            "problems": problems[:40],
            "round": round_,
            "max_rounds": synthesis.max_repair_rounds,
            "current": current,
        },
    )
    return [*messages, {"role": "user", "content": repair}]


# ----------------------------------------------------------------------------- the loop


@dataclass
class Plan:
    """What to do next, read from the stored attempts."""

    step: str
    document: dict | None  # the working document the step starts from
    repair: bool = False
    problems: list | None = None
    parse_error: str = ""
    repairs_done: int = 0
    previous_text: str = ""  # the answer, when it could not be applied to the document


def plan(attempts: list[SynthesisAttempt], max_repairs: int) -> Plan | None:
    """The next step, or None when the slot is done (valid, or out of repairs)."""
    if not attempts:
        return Plan(OUTLINE, None)
    last = attempts[-1]
    report = last.report or {}
    step = report.get("step", OUTLINE)
    base = report.get("base")  # the document the step started from
    document = last.document
    repairs = sum(1 for a in attempts if (a.report or {}).get("step") == step) - 1
    if step == FINAL:
        if last.valid:
            return None
        errors = [p for p in report.get("problems", []) if p.get("severity") == "error"]
        owners = [owner_of(p.get("pointer", ""), document) for p in errors]
        repairable = [o for o in owners if o != OUTLINE]
        if not repairable or len(owners) != len(repairable):
            return None  # the outline itself is wrong: staging cannot repair it
        target = repairable[0]
        done = sum(
            1
            for a in attempts
            if (a.report or {}).get("step") == target and (a.report or {}).get("repair")
        )
        if done >= max_repairs:
            return None
        return Plan(
            target,
            document,
            repair=True,
            problems=[p for p, o in zip(errors, owners, strict=True) if o == target],
            repairs_done=done,
        )
    if last.valid:
        return Plan(next_step(document), document)
    if repairs >= max_repairs:
        return None
    if document is None or report.get("refused"):
        return Plan(
            step,
            base,
            repair=True,
            parse_error=report.get("parse_error", ""),
            problems=[p for p in report.get("problems", []) if p.get("severity") == "error"],
            repairs_done=repairs,
            previous_text=last.raw_text,
        )
    return Plan(
        step,
        document,
        repair=True,
        problems=[p for p in report.get("problems", []) if p.get("severity") == "error"],
        repairs_done=repairs,
    )


def run_step(synthesis: SynthesisJob, slot: SynthesisSlot, next_: Plan) -> Answer:
    """One LLM request for a step (or its repair); its answer applied to the working document
    and validated statically, with only that step's problems kept. ``Answer.report`` carries
    ``step`` and ``base`` so that a resumed worker knows where it was."""
    if synthesis.endpoint is None:
        raise LLMError(
            "The job's model endpoint was deleted; start a new job with another endpoint."
        )
    base = next_.document
    if next_.repair:
        messages = repair_request(
            synthesis,
            slot,
            next_.step,
            next_.document,
            problems=next_.problems or [],
            round_=next_.repairs_done + 1,
            parse_error=next_.parse_error,
            previous_text=next_.previous_text,
        )
    else:
        messages = step_request(synthesis, slot, next_.step, base)
    result = llm_chat(
        endpoint=synthesis.endpoint,
        messages=messages,
        purpose=f"synthesis.{next_.step.partition(':')[0]}" + (".repair" if next_.repair else ""),
        job=synthesis.job,
        response_schema=OBJECT_SCHEMA,
        schema_name="stage_answer",
        describe_schema=False,
    )
    answer = Answer(
        tokens_in=result.tokens_in,
        tokens_out=result.tokens_out,
        latency_ms=result.latency_ms,
        cost=result.cost,
        call_ids=[result.call_id],
        model=result.model,
    )
    step_base = base
    try:
        parsed = parse_json_answer(result)
        document = _apply(next_.step, step_base, parsed)
    except StepRefused as exc:
        answer.raw_text = (result.content or "")[:200_000]
        answer.report = {
            "valid": False,
            "problems": [exc.problem],
            "tasks": [],
            "step": next_.step,
            "repair": next_.repair,
            "refused": True,
            "base": step_base,
        }
        return answer
    except LLMError as exc:  # no JSON object in the answer
        answer.raw_text = (result.content or "")[:200_000]
        answer.error = exc.message
        answer.report = {
            "valid": False,
            "problems": [],
            "tasks": [],
            "step": next_.step,
            "repair": next_.repair,
            "parse_error": exc.message,
            "base": step_base,
        }
        return answer
    started = time.monotonic()
    report = validate_spec(document, dynamic=False).to_dict()
    answer.validation_ms = round((time.monotonic() - started) * 1000)
    errors = errors_of(report, next_.step, document)
    answer.document = document
    answer.report = {
        "valid": not errors,
        "problems": errors,
        "tasks": [],
        "step": next_.step,
        "repair": next_.repair,
    }
    return answer


def _apply(step: str, document: dict | None, parsed: dict) -> dict:
    if step == OUTLINE:
        return apply_outline(parsed)
    if step.startswith("turn:"):
        _, task_index, turn = step.split(":")
        return apply_turn(document, int(task_index), int(turn), parsed)
    return apply_graders(document, int(step.split(":")[1]), parsed)


def final_check(document: dict) -> Answer:
    finished = finished_document(document)
    started = time.monotonic()
    report = validate_spec(
        finished, attachments=attachment_bytes, time_budget=settings.VALIDATION_TIME_BUDGET_S
    ).to_dict()
    answer = Answer(document=finished, model="")
    answer.validation_ms = round((time.monotonic() - started) * 1000)
    answer.report = {**report, "step": FINAL}
    # the staging marks go back on for a repair round (next_step needs none: all written)
    answer.document = document if not report["valid"] else finished
    return answer
