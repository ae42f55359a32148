"""The LLM side of a run: an engine ``Policy`` backed by a model endpoint, and an LLM user
simulator for the turns after the first.

Both go through the one LLM client (``apps.llm.client.llm_chat``): retries, the endpoint's
shared concurrency limit and the call log come from there. An ``LLMError`` that escapes
(the endpoint stayed unavailable after its retries) ends the run as ``errored``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal

from apps.environments.engine.policies import PolicyAction, PolicyView, ToolCall
from apps.environments.engine.runner import UserTurnView
from apps.llm.client import CallLogBuffer, LLMResult, llm_chat

AGENT_PURPOSE = "run.agent"
USER_PURPOSE = "run.user"


@dataclass
class LLMUsage:
    """Tokens, cost and latency of every model request made for one run."""

    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost: Decimal = field(default_factory=lambda: Decimal("0"))
    latency_ms: int = 0

    def add(self, result: LLMResult) -> None:
        self.calls += 1
        self.tokens_in += result.tokens_in
        self.tokens_out += result.tokens_out
        self.cost += result.cost
        self.latency_ms += result.latency_ms


class LLMAgentPolicy:
    """The agent: every ``act`` sends the conversation and the environment's tools to the
    endpoint and turns its answer into tool calls (several = parallel calls, executed in
    order by the runner) or a reply (which ends the turn)."""

    def __init__(
        self,
        *,
        endpoint,
        job=None,
        usage: LLMUsage | None = None,
        before_call: Callable[[], None] | None = None,
        call_log: CallLogBuffer | None = None,
    ):
        self.endpoint = endpoint
        self.job = job
        self.usage = usage if usage is not None else LLMUsage()
        self.before_call = before_call
        self.call_log = call_log
        self.name = f"llm:{endpoint.model}"

    def act(self, view: PolicyView) -> PolicyAction:
        if self.before_call is not None:
            self.before_call()
        result = llm_chat(
            endpoint=self.endpoint,
            messages=view.messages,
            tools=view.tools or None,
            purpose=AGENT_PURPOSE,
            job=self.job,
            call_log=self.call_log,
        )
        self.usage.add(result)
        calls = [
            ToolCall(name=call["name"], arguments=call["arguments"], id=call.get("id") or None)
            for call in result.tool_calls
        ]
        return PolicyAction(reply=result.content, tool_calls=calls)


USER_SYSTEM = """You play the user of an AI assistant at work, in a simulation. Stay in role.

Who you are: {persona}

What you want to say in your next message (say it in your own words, briefly):
{scripted}

Facts you may reveal, but only when the assistant asks for them:
{reveals}

Rules: never reveal anything that is not in the lines above; if the assistant asks for
something you were not given, say you do not know. Never do the assistant's work and never
invent facts. Answer with the user's message only: no quotes, no role names."""


def conversation_text(messages: list[dict]) -> str:
    """The user/assistant exchange as plain text (tool traffic left out: the user never sees
    it)."""
    lines = []
    for message in messages:
        role, content = message.get("role"), message.get("content")
        if role in ("user", "assistant") and content:
            lines.append(f"{role.upper()}: {content}")
    return "\n\n".join(lines)


class LLMUserSimulator:
    """A simulated user for turns after the first: it answers the agent within the task's
    persona and the facts it ``reveals_when_asked``, steered by the turn's scripted message."""

    def __init__(
        self,
        *,
        endpoint,
        job=None,
        usage: LLMUsage | None = None,
        before_call: Callable[[], None] | None = None,
        call_log: CallLogBuffer | None = None,
    ):
        self.endpoint = endpoint
        self.job = job
        self.usage = usage if usage is not None else LLMUsage()
        self.before_call = before_call
        self.call_log = call_log

    def messages(self, view: UserTurnView) -> list[dict]:
        reveals = view.task.user.reveals_when_asked
        system = USER_SYSTEM.format(
            persona=view.task.user.persona or "a colleague who delegates work to the assistant",
            scripted=view.scripted or "(nothing new: react to what the assistant said)",
            reveals="\n".join(f"- {fact}" for fact in reveals) if reveals else "- (none)",
        )
        transcript = conversation_text(view.messages) or "(nothing yet)"
        return [
            {"role": "system", "content": system},
            {
                "role": "user",
                "content": f"The conversation so far:\n\n{transcript}\n\nWrite your next message.",
            },
        ]

    def __call__(self, view: UserTurnView) -> str:
        if self.before_call is not None:
            self.before_call()
        result = llm_chat(
            endpoint=self.endpoint,
            messages=self.messages(view),
            purpose=USER_PURPOSE,
            job=self.job,
            call_log=self.call_log,
        )
        self.usage.add(result)
        text = (result.content or "").strip()
        return text or view.scripted
