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

from apps.environments.attachments import attachment_data_url
from apps.llm.call_log import CallLogBuffer
from apps.llm.client import LLMResult, llm_chat
from apps.runs.context import ContextManager, summary_request
from coworkenv_engine.attachments import Attachment, lift_tool_images, url_sha256
from coworkenv_engine.policies import PolicyAction, PolicyView, ToolCall
from coworkenv_engine.runner import UserTurnView

AGENT_PURPOSE = "run.agent"
USER_PURPOSE = "run.user"
COMPACT_PURPOSE = "run.compact"


@dataclass
class LLMUsage:
    """Tokens, cost and latency of every model request made for one run."""

    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost: Decimal = field(default_factory=lambda: Decimal("0"))
    latency_ms: int = 0
    context_events: list[dict] = field(default_factory=list)

    def add(self, result: LLMResult) -> None:
        self.calls += 1
        self.tokens_in += result.tokens_in
        self.tokens_out += result.tokens_out
        self.cost += result.cost
        self.latency_ms += result.latency_ms


ImageURL = Callable[[Attachment], "str | None"]


def model_messages(messages: list[dict], spec, image_url: ImageURL) -> list[dict]:
    """The transcript as a model is sent it. A view tool's result is stored as content parts
    whose images are ``attachment:sha256:<hex>`` URLs; the Chat Completions API takes images
    in user messages only, so each tool message keeps its text and, after the results of one
    assistant step, a user message carries their images as ``image_url`` parts with
    ``data:`` URLs (an image whose file is gone becomes a note saying so)."""

    def parts(url: str, call_id: str) -> list[dict]:
        sha = url_sha256(url)
        attachment = spec.attachment(sha) if sha else None
        data = image_url(attachment) if attachment is not None else None
        label = attachment.name if attachment is not None else "an image"
        if data is None:
            return [{"type": "text", "text": f"[{label} from {call_id}: unavailable]"}]
        return [
            {"type": "text", "text": f"{label} (the result of {call_id}):"},
            {"type": "image_url", "image_url": {"url": data}},
        ]

    return lift_tool_images(messages, parts)


class LLMAgentPolicy:
    """The agent: every ``act`` sends the conversation and the environment's tools to the
    endpoint and turns its answer into tool calls (several = parallel calls, executed in
    order by the runner) or a reply (which ends the turn). Images that view tools returned
    are sent as ``image_url`` parts (``model_messages``), read from attachment storage."""

    def __init__(
        self,
        *,
        endpoint,
        job=None,
        usage: LLMUsage | None = None,
        before_call: Callable[[], None] | None = None,
        image_url: ImageURL = attachment_data_url,
        temperature: float | None = None,
        call_log: CallLogBuffer | None = None,
    ):
        self.endpoint = endpoint
        self.job = job
        self.usage = usage if usage is not None else LLMUsage()
        self.before_call = before_call
        self.image_url = image_url
        self.temperature = temperature  # None: the endpoint's
        self.call_log = call_log
        self.name = f"llm:{endpoint.model}"
        self.requests = 0
        self.context = None
        if endpoint.context_tokens:
            self.context = ContextManager(
                context_tokens=endpoint.context_tokens,
                max_output_tokens=endpoint.max_tokens,
                strategy=endpoint.context_strategy,
                keep_tool_results=endpoint.keep_tool_results,
                summarize=self._summarize,
                events=self.usage.context_events,
            )

    def _summarize(self, messages: list[dict]) -> str:
        """The earlier turns in a few hundred words, by the agent's own model."""
        if self.before_call is not None:
            self.before_call()
        result = llm_chat(
            endpoint=self.endpoint,
            messages=summary_request(messages),
            purpose=COMPACT_PURPOSE,
            job=self.job,
            call_log=self.call_log,
        )
        self.usage.add(result)
        return result.content or ""

    def act(self, view: PolicyView) -> PolicyAction:
        self.requests += 1
        tools = view.tools or None
        messages = view.messages
        if self.context is not None:
            compacted = len(self.context.events)
            messages = self.context.fit(view.messages, tools, call=self.requests)
            for event in self.context.events[compacted:]:
                event["turn"] = view.turn
                event["messages"] = len(view.messages)
        if self.before_call is not None:
            self.before_call()
        result = llm_chat(
            endpoint=self.endpoint,
            # images travel as data: URLs only on the wire; the estimator sees the references
            messages=model_messages(messages, view.spec, self.image_url),
            tools=tools,
            purpose=AGENT_PURPOSE,
            job=self.job,
            temperature=self.temperature,
            call_log=self.call_log,
        )
        self.usage.add(result)
        if self.context is not None:
            self.context.estimator.observe(messages, tools, result.tokens_in)
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
