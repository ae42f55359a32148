"""The LLM judge's prompt and verdict, and a judge over any OpenAI-compatible endpoint.

A ``judge`` check hands its rubric and a context (the conversation, the audit log of tool
calls, the records each call changed) to a ``Judge`` callable. The prompt and the verdict's
shape live here so the app's judge (``apps.llm.judge``: its client, call log and cache) and
the command line's (``coworkenv-env validate --judge URL``) ask the same question.

What the judge is shown is ``judge_evidence(context)``: by default the whole conversation and
the calls with the records they changed; a check that declares a ``context`` (which
messages, whether the calls, the records of which collections) is shown exactly that.

``HttpJudge`` needs nothing but the standard library: it posts the prompt to
``<URL>/chat/completions`` at temperature 0, remembers each answer for the rest of the
validation (the validator grades the same evidence more than once, and a judge must agree
with itself), and raises ``JudgeError`` for an endpoint that fails or answers no verdict —
the engine then fails that check with the error as its evidence.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

VERDICT_SCHEMA = {
    "type": "object",
    "properties": {
        "score": {"type": "number", "minimum": 0, "maximum": 1},
        "reasoning": {"type": "string"},
    },
    "required": ["score", "reasoning"],
    "additionalProperties": False,
}
_GRADER = "You are a strict grader of an AI assistant's work in a simulated workplace. "
_ANSWER = (
    "Answer with one JSON object: "
    '{"score": <a number from 0 to 1: how fully the rubric is met>, '
    '"reasoning": <one short paragraph citing the evidence>}.'
)
JUDGE_SYSTEM = (
    _GRADER + "You get a "
    "rubric, the conversation, and the server-side evidence: the audit log of every tool call "
    "the assistant made with the records each call changed. Trust the evidence over what the "
    "assistant claims: an action it says it took but that is not in the audit log did not "
    "happen. " + _ANSWER
)
JUDGE_SYSTEM_DECLARED = (
    _GRADER + "You get a "
    'rubric and only the evidence its grader declares (listed under "shown"), among: '
    '"conversation" (every message, or the assistant\'s replies), "final_reply" (the '
    'assistant\'s last reply), "audit_log" and "changes" (every tool call the assistant '
    'made, with the records each call changed), "state" (the records of the named '
    "collections as the server holds them at grading). Grade by that evidence alone, and "
    "trust the server's records over what the assistant claims: what they contradict did "
    "not happen. " + _ANSWER
)
DEFAULT_CONTEXT: dict[str, Any] = {"messages": "all", "calls": True, "state": []}
REASONING_MAX = 4000
ANSWER_MAX_BYTES = 1_000_000
_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


class JudgeError(Exception):
    """The judge endpoint failed, or answered no usable verdict."""


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def declared_context(raw: Any) -> dict[str, Any] | None:
    """A judge check's ``context`` with its defaults filled in, or None where it shows the
    judge what it is shown by default (no ``context``, or one that declares the defaults):
    the evidence, and so the app's cached verdicts, stay as they were."""
    if not isinstance(raw, dict):
        return None
    declared = {
        "messages": raw.get("messages", DEFAULT_CONTEXT["messages"]),
        "calls": raw.get("calls", DEFAULT_CONTEXT["calls"]),
        "state": list(dict.fromkeys(raw.get("state") or ())),
    }
    return None if declared == DEFAULT_CONTEXT else declared


def state_of(state: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """The records of the named services (``"email"``) and collections (``"email.sent"``),
    as a copy: ``{service: {collection: [records]}}``."""
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        service, _, collection = name.partition(".")
        held = state.get(service)
        if not isinstance(held, dict):
            continue
        picked = {collection: held.get(collection, [])} if collection else held
        out.setdefault(service, {}).update(picked)
    return json.loads(json.dumps(out, default=str))


def _replies(messages: list[Any]) -> list[dict[str, str]]:
    return [
        {"role": "assistant", "content": m["content"]}
        for m in messages
        if isinstance(m, dict)
        and m.get("role") == "assistant"
        and isinstance(m.get("content"), str)
        and m["content"].strip()
    ]


def judge_evidence(context: dict[str, Any]) -> dict[str, Any]:
    """What the judge reads besides the rubric: by default the conversation and the server's
    records of the calls; for a declared context (``context["declared"]``), that and no more."""
    declared = declared_context(context.get("declared"))
    shown = declared or DEFAULT_CONTEXT
    evidence: dict[str, Any] = {
        "task": context.get("task", ""),
        "scope": context.get("scope", "final"),
    }
    if declared is not None:
        evidence["shown"] = declared
    messages = shown["messages"]
    if messages == "all":
        evidence["conversation"] = context.get("messages") or []
    elif messages == "assistant":
        evidence["conversation"] = _replies(context.get("messages") or [])
    if messages != "none":
        evidence["final_reply"] = context.get("final_reply") or ""
    if shown["calls"]:
        evidence["audit_log"] = context.get("audit") or []
        evidence["changes"] = context.get("changes") or []
    if shown["state"]:
        evidence["state"] = state_of(context.get("state") or {}, shown["state"])
    return evidence


def context_words(declared: dict[str, Any]) -> list[str]:
    """A declared context in words, for pages and exports: ``["messages: final", "no calls",
    "records of crm"]``."""
    words = [f"messages: {declared['messages']}", "calls" if declared["calls"] else "no calls"]
    return words + ([f"records of {', '.join(declared['state'])}"] if declared["state"] else [])


def judge_messages(rubric: str, evidence: dict[str, Any]) -> list[dict[str, str]]:
    system = JUDGE_SYSTEM_DECLARED if "shown" in evidence else JUDGE_SYSTEM
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": canonical({"rubric": rubric, **evidence})},
    ]


def parse_verdict(text: str) -> dict[str, Any]:
    """``{"score", "reasoning"}`` from a judge's answer (its first JSON object, fences and
    prose around it allowed), or ``JudgeError`` saying what is wrong with it."""
    found = _OBJECT.search(text or "")
    try:
        data = json.loads(found.group(0)) if found else None
    except json.JSONDecodeError:
        data = None
    if not isinstance(data, dict):
        raise JudgeError(f"the judge answered no JSON object: {(text or '')[:80]!r}")
    score = data.get("score")
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not 0 <= score <= 1:
        raise JudgeError(f"the score must be a number from 0 to 1, not {canonical(score)[:40]}")
    reasoning = data.get("reasoning")
    if not isinstance(reasoning, str):
        reasoning = "" if reasoning is None else canonical(reasoning)
    return {"score": float(score), "reasoning": reasoning[:REASONING_MAX]}


Opener = Callable[..., Any]


class HttpJudge:
    """The engine's ``Judge`` over an OpenAI-compatible endpoint at ``base_url`` (ending in
    ``/v1`` or wherever its ``/chat/completions`` lives)."""

    def __init__(
        self,
        base_url: str,
        *,
        model: str,
        api_key: str = "",
        timeout: float = 60.0,
        opener: Opener = urllib.request.urlopen,
    ):
        if not re.match(r"^https?://", base_url):
            raise ValueError(f"the judge URL must start with http:// or https://: {base_url!r}")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key = api_key
        self.timeout = timeout
        self.opener = opener
        self.calls = 0
        self._answers: dict[str, dict[str, Any]] = {}

    def __call__(self, rubric: str, context: dict[str, Any]) -> dict[str, Any]:
        messages = judge_messages(rubric, judge_evidence(context))
        key = canonical(messages)
        if key not in self._answers:
            self._answers[key] = {**parse_verdict(self._ask(messages)), "model": self.model}
        return self._answers[key]

    def _ask(self, messages: list[dict[str, str]]) -> str:
        body = json.dumps({"model": self.model, "messages": messages, "temperature": 0})
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.url, data=body.encode(), headers=headers)
        self.calls += 1
        try:
            with self.opener(request, timeout=self.timeout) as response:
                answer = json.loads(response.read(ANSWER_MAX_BYTES))
        except urllib.error.HTTPError as exc:
            raise JudgeError(f"the judge endpoint answered HTTP {exc.code}") from None
        except (OSError, ValueError) as exc:
            raise JudgeError(f"the judge endpoint failed: {type(exc).__name__}: {exc}") from None
        try:
            return answer["choices"][0]["message"]["content"] or ""
        except (KeyError, IndexError, TypeError):
            raise JudgeError("the judge endpoint's answer has no choices[0].message") from None
