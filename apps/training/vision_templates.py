"""Which chat template a vision-language model trains with, checked before any row is encoded.

Its own when it marks generations; CoworkEnv's ChatML vision template for Qwen2-VL /
Qwen2.5-VL; TRL's training variant of a family TRL knows; else refused. A probe conversation
must then give one mask span per assistant message (tool calls inside): a template that
would mis-mask is refused, never used.
"""

from __future__ import annotations

import re
from pathlib import Path

from apps.training.encoding import mask_spans
from apps.training.presets import VISION_TEMPLATE


class VisionTemplateError(ValueError):
    """No chat template of this model can mark the assistant tokens: refused, never guessed."""


GENERATION_MARKER = re.compile(r"\{%-?\s*generation\s*-?%\}")


def has_generation_markers(template: str) -> bool:
    """Whether ``template`` wraps generations in ``{% generation %}`` (not merely mentions
    ``add_generation_prompt``, which every template does)."""
    return GENERATION_MARKER.search(template or "") is not None


def vision_chat_template(processor, name: str = "the model", *, tools: bool = False) -> str:
    """The training template of a vision-language processor, checked on a probe conversation.

    1. The processor's own template when it marks generations (``{% generation %}``).
    2. Qwen2-VL / Qwen2.5-VL (their byte-identical template, as TRL stores it): CoworkEnv's
       ChatML vision template (``chatml_vision_training.jinja``), which also renders tools,
       tool calls and tool results the way Qwen2.5 does (TRL's variant drops tool calls).
    3. TRL's training variant of a template it knows (Qwen3-VL, SmolVLM, Idefics3,
       LLaVA-NeXT, Gemma 3, …: ``trl.chat_template_utils.get_training_chat_template``).
    4. Otherwise ``VisionTemplateError``: add ``{% generation %}`` markers to the model's
       ``chat_template.jinja``.

    The chosen template must then mark one span per assistant message, each holding its
    message's text (and, when the rows call tools, its tool call) and nothing of the other
    turns; one that does not is refused (``VisionTemplateError``) rather than mis-masked.
    """
    own = processor.chat_template or ""
    if isinstance(own, dict):
        own = own.get("default", "")
    if has_generation_markers(own):
        template, origin = own, "its own chat template"
    elif own and own == _trl_vl_template("qwen2_5_vl"):
        template, origin = VISION_TEMPLATE.read_text(), "CoworkEnv's ChatML vision template"
    else:
        from trl.chat_template_utils import get_training_chat_template

        try:
            template = get_training_chat_template(processor) if own else None
        except ValueError:
            template = None
        if not template:
            raise VisionTemplateError(
                f"The chat template of {name} marks no assistant generations "
                "({% generation %}), and neither TRL nor CoworkEnv has a training variant of it "
                "(CoworkEnv's fits Qwen2-VL / Qwen2.5-VL; TRL's Qwen3-VL, SmolVLM, Idefics3, "
                "LLaVA-NeXT, Gemma 3 …): add {% generation %}…{% endgeneration %} around each "
                "assistant message in the model's chat_template.jinja."
            )
        origin = "TRL's training variant of its chat template"
    check_assistant_masks(processor, template, f"{origin} ({name})", tools=tools)
    return template


def _trl_vl_template(stem: str) -> str:
    import trl

    path = Path(trl.__file__).parent / "chat_templates" / f"{stem}.jinja"
    return path.read_text(encoding="utf-8") if path.exists() else ""


PROBE_TOOL = {
    "type": "function",
    "function": {
        "name": "probe_lookup",
        "description": "Probe.",
        "parameters": {"type": "object", "properties": {"key": {"type": "string"}}},
    },
}


def _probe_spans(processor, template: str, messages: list, tools=None) -> list[str]:
    out = processor.apply_chat_template(
        [messages],
        tools=tools,
        chat_template=template,
        tokenize=True,
        return_dict=True,
        return_assistant_tokens_mask=True,
        processor_kwargs={"add_special_tokens": False},
    )
    ids = [int(t) for t in out["input_ids"][0]]
    mask = [int(bit) for bit in out["assistant_masks"][0]]
    return [processor.tokenizer.decode(ids[a:b]) for a, b in mask_spans(mask)]


def check_assistant_masks(processor, template: str, what: str, *, tools: bool = False) -> None:
    """Refuse (``VisionTemplateError``) a template whose assistant mask is not one span per
    assistant message, in order, each with its own text only."""

    def text(value: str) -> list[dict]:
        return [{"type": "text", "text": value}]

    plain = [
        {"role": "user", "content": text("probe question one")},
        {"role": "assistant", "content": text("probe answer one")},
        {"role": "user", "content": text("probe question two")},
        {"role": "assistant", "content": text("probe answer two")},
    ]
    spans = _probe_spans(processor, template, plain)
    wrong = (
        len(spans) != 2
        or "probe answer one" not in spans[0]
        or "probe answer two" not in spans[1]
        or any("question" in span for span in spans)
    )
    if wrong:
        raise VisionTemplateError(
            f"{what} does not mark each assistant message as one generation span "
            f"(a probe of 2 assistant messages gave {len(spans)} spans: {spans!r}); "
            "per-turn weights and assistant-only loss cannot be applied with it."
        )
    if not tools:
        return
    call = {
        "id": "call_probe",
        "type": "function",
        "function": {"name": "probe_lookup", "arguments": {"key": "probe"}},
    }
    with_call = [
        {"role": "user", "content": text("probe question one")},
        {"role": "assistant", "content": text(""), "tool_calls": [call]},
        {"role": "tool", "name": "probe_lookup", "tool_call_id": "call_probe",
         "content": text("probe result")},
        {"role": "assistant", "content": text("probe answer two")},
    ]  # fmt: skip
    spans = _probe_spans(processor, template, with_call, [PROBE_TOOL])
    if len(spans) != 2 or "probe_lookup" not in spans[0] or "probe result" in "".join(spans):
        raise VisionTemplateError(
            f"{what} does not render an assistant message's tool calls inside its generation "
            f"span (probe spans: {spans!r}); the rows call tools, so they cannot be trained "
            "with it: give the model a template that renders tool calls."
        )
