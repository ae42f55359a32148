"""``transformers serve`` as the app starts it on a CPU worker (no Django here):

    python -m apps.serving.transformers_server MODEL [--tool-call-parser hermes] [serve flags…]

Two things are changed in transformers 5.x's server, both about tool calls, nothing else:

- **A reply that is not a valid tool call is text.** The server parses the assistant's
  ``<tool_call>…</tool_call>`` regions as JSON with the model type's response template
  (``transformers.cli.serving.utils._RESPONSE_TEMPLATE_FALLBACKS``: Qwen2/2.5/3 among
  them); a region that is not JSON makes it raise, and the request ends in a 500. Here the
  parse error gives the reply back as its text (``finish_reason`` ``stop``/``length``),
  which is what vLLM's hermes parser does too.
- **``--tool-call-parser hermes``** gives a model whose type has no response template (a
  Llama or Mistral fine-tuned on the Hermes format) the Qwen template's parsing: Hermes and
  Qwen2.5 share ``<tool_call>{"name", "arguments"}</tool_call>`` in ChatML turns. Only a
  model whose chat template writes ``<tool_call>`` gets it; others stay unparsed (text).
"""

from __future__ import annotations

import sys

HERMES_MODEL_TYPE = "qwen2"  # the fallback template whose tool calls are Hermes'


def _tolerant(parse):
    def parse_assistant_message(
        processor, model, generated_ids, input_ids, cleaned_content="", tools=None
    ):
        try:
            return parse(
                processor,
                model,
                generated_ids,
                input_ids=input_ids,
                cleaned_content=cleaned_content,
                tools=tools,
            )
        except ValueError:  # a <tool_call> region that is not JSON: the reply is text
            return cleaned_content, None, None

    return parse_assistant_message


def _with_hermes(get_template, fallbacks: dict):
    hermes = next(value for types, value in fallbacks.items() if HERMES_MODEL_TYPE in types)

    def get_response_template(processor, model):
        own = get_template(processor, model)
        if own is not None:
            return own
        tokenizer = getattr(processor, "tokenizer", processor)
        return hermes if "<tool_call>" in str(tokenizer.chat_template or "") else None

    return get_response_template


def install(*, hermes: bool) -> None:
    """Patch the server's module-level functions (before it starts)."""
    from transformers.cli.serving import chat_completion, utils

    chat_completion.parse_assistant_message = _tolerant(utils.parse_assistant_message)
    if hermes:
        utils.get_response_template = _with_hermes(
            utils.get_response_template, utils._RESPONSE_TEMPLATE_FALLBACKS
        )


def split_arguments(argv: list[str]) -> tuple[bool, list[str]]:
    """``(hermes?, the arguments for transformers serve)``."""
    rest = list(argv)
    hermes = False
    if "--tool-call-parser" in rest:
        at = rest.index("--tool-call-parser")
        parser = rest[at + 1] if at + 1 < len(rest) else ""
        if parser != "hermes":
            raise SystemExit(f"--tool-call-parser: only hermes is known here, not {parser!r}")
        hermes = True
        del rest[at : at + 2]
    return hermes, rest


def main(argv: list[str] | None = None) -> None:
    hermes, rest = split_arguments(sys.argv[1:] if argv is None else argv)
    install(hermes=hermes)
    from transformers.cli.transformers import main as transformers_main

    sys.argv = ["transformers", "serve", *rest]
    transformers_main()


if __name__ == "__main__":
    main()
