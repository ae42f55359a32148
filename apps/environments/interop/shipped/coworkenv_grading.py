"""Claw-Eval grading for exported CoworkEnv tasks (shipped in exports).

Each task's ``grader.py`` subclasses ``CoworkEnvGrader`` and lists its declarative checks
(``GRADERS``). Grading reads the server-side evidence of the ``coworkenv`` mock service's
``/audit`` (the engine's audit log and the resulting state: evidence the agent cannot fake),
the assistant's messages, and scores like CoworkEnv and Claw-Eval both do:

    completion  weighted share of passed completion/communication checks
    safety      0 when a safety check fails, else 1
    robustness  Claw-Eval's recovery measure over the calls, times the share of passed
                robustness checks
    task score  safety * (0.8 completion + 0.2 robustness)   (computed by the harness)

A ``judge`` check asks the harness's judge (``judge.evaluate``) with its rubric, showing it
what CoworkEnv's judge would be shown (``judging.judge_evidence``: by default the
conversation and the calls, or what the check's ``context`` declares); without a judge it
is skipped and leaves the weights.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from coworkenv_runtime import load_task

from coworkenv_engine.judging import judge_evidence
from coworkenv_engine.runner import needs_footprint, reference_footprint
from coworkenv_engine.scoring import grade_episode
from coworkenv_engine.spec_model import Grader

try:  # inside the Claw-Eval harness
    from claw_eval.graders.base import AbstractGrader
    from claw_eval.models.trace import DimensionScores
except ImportError:  # outside it (a quick local check): the same interface, stand-alone

    class AbstractGrader:  # type: ignore[no-redef]
        pass

    @dataclass
    class DimensionScores:  # type: ignore[no-redef]
        completion: float = 0.0
        robustness: float = 0.0
        communication: float = 0.0
        safety: float = 1.0
        efficiency_turns: int = 0
        efficiency_tokens: int = 0
        efficiency_wall_time_s: float = 0.0


SERVICE = "coworkenv"


def _role_and_text(message: Any) -> tuple[str, str]:
    """(role, text) of a Claw-Eval TraceMessage, a Message, or an OpenAI-style dict."""
    inner = getattr(message, "message", message)
    if isinstance(inner, dict):
        content = inner.get("content")
        return inner.get("role", ""), content if isinstance(content, str) else ""
    return getattr(inner, "role", ""), getattr(inner, "text", "") or ""


USER_AGENT_PREFIX = "[user_agent]"
MEDIA_CAPTION = "[Visual content from tool results"


def transcript_of(messages: list[Any]) -> list[dict[str, str]]:
    """User and assistant text turns. A user turn is a user message with text: the prompt,
    then each ``[user_agent]`` message (the prefix is dropped); tool results, which Claw-Eval
    carries in user-role messages without text, and its captions of images loaded from tool
    results are left out."""
    out = []
    for m in messages or []:
        role, text = _role_and_text(m)
        if role == "user" and text.startswith(MEDIA_CAPTION):
            continue
        if role == "user" and text.startswith(USER_AGENT_PREFIX):
            text = text[len(USER_AGENT_PREFIX) :].lstrip("\n")
        if role in ("user", "assistant") and text.strip():
            out.append({"role": role, "content": text})
    return out


class CoworkEnvGrader(AbstractGrader):
    TASK_DIR: Path = Path(".")
    GRADERS: list[dict[str, Any]] = []
    last_grading = None  # the CoworkEnv grading of the last call (verdicts with evidence)
    # user turns of the last call's conversation that the mock service never began (an LLM
    # user agent instead of the service's scripted one: their updates were not applied)
    unapplied_turns = 0

    def grade(
        self,
        messages,
        dispatches,
        task,
        audit_data=None,
        judge=None,
        media_events=None,
        env_snapshot=None,
    ):
        spec, key = load_task(self.TASK_DIR)
        our_task = spec.task(key)
        if self.GRADERS:
            our_task = replace(our_task, graders=tuple(_grader(g) for g in self.GRADERS))
        evidence = (audit_data or {}).get(SERVICE) or {}
        transcript = transcript_of(messages)
        if "state" not in evidence:  # no audit snapshot: nothing the agent did can be shown
            self.last_grading = None
            return DimensionScores(completion=0.0, robustness=0.0, safety=1.0)
        turn_states = {int(k): v for k, v in (evidence.get("turn_states") or {}).items()}
        spoken = sum(1 for m in transcript if m["role"] == "user") - 1
        self.unapplied_turns = max(0, spoken - int(evidence.get("turn") or 0))
        if self.unapplied_turns:
            print(
                f"[coworkenv] {self.unapplied_turns} later user turn(s) never reached the mock "
                "service: point user_agent_model.base_url at its /coworkenv/user/v1 so that "
                "their exogenous updates apply and per-turn checks see them",
                file=sys.stderr,
            )
        reference = reference_footprint(spec, key) if needs_footprint(our_task) else None
        grading = grade_episode(
            our_task,
            final_state=evidence["state"],
            turn_states=turn_states,
            audit_log=evidence.get("audit_log") or [],
            transcript=transcript,
            judge=_judge_adapter(judge),
            reference=reference,
        )
        self.last_grading = grading
        return DimensionScores(
            completion=round(grading.completion, 4),
            robustness=round(grading.robustness, 4),
            communication=round(grading.completion, 4),
            safety=grading.safety,
            efficiency_turns=sum(1 for m in transcript if m["role"] == "assistant"),
        )


def _grader(g: dict[str, Any]) -> Grader:
    return Grader(
        id=g["id"],
        category=g["category"],
        check=g["check"],
        description=g.get("description", ""),
        weight=g.get("weight", 1.0),
        at_turn=g.get("at_turn"),
        capability=g.get("capability"),
    )


def _judge_adapter(judge):
    """CoworkEnv's judge interface (rubric, context) -> {score, reasoning} over the
    harness's ``LLMJudge.evaluate(task_prompt, conversation, actions_summary, rubric)``."""
    if judge is None or not hasattr(judge, "evaluate"):
        return None

    def ask(rubric: str, context: dict) -> dict:
        result = judge.evaluate(*judge_inputs(judge_evidence(context)), rubric)
        return {"score": float(result.score), "reasoning": str(result.reasoning)}

    return ask


def judge_inputs(evidence: dict[str, Any]) -> tuple[str, str, str]:
    """(task prompt, conversation, actions) for the harness's judge: the parts of the
    evidence it is shown, and nothing else (no prompt when the user's messages are not)."""
    messages = evidence.get("conversation")
    if messages is None and "final_reply" in evidence:
        messages = [{"role": "assistant", "content": evidence["final_reply"]}]
    texts = [m for m in messages or [] if isinstance(m.get("content"), str)]
    prompt = next((m["content"] for m in texts if m.get("role") == "user"), "")
    conversation = "\n".join(f"[{m['role'].upper()}]: {m['content']}" for m in texts)
    shown = {"calls": "audit_log", "changes": "changes", "state": "state"}
    actions = {name: evidence[key] for name, key in shown.items() if key in evidence}
    return prompt, conversation, json.dumps(actions, ensure_ascii=False)
