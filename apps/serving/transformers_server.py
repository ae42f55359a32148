"""``transformers serve`` as the app starts it on a CPU worker (no Django here):

    python -m apps.serving.transformers_server MODEL [--tool-call-parser hermes] [serve flags…]
    python -m apps.serving.transformers_server --adapter ADAPTER --merge-into DIR [flags…]

``transformers serve`` loads a model folder, not a PEFT adapter (its config has no
``model_type``), so an adapter is first merged into its base (``peft``'s
``merge_and_unload``) and the merged folder is served (kept: a restart reuses it).

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
from pathlib import Path

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

    def get_response_template(processor, config):
        own = get_template(processor, config)
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


def _take(rest: list[str], flag: str) -> str | None:
    if flag not in rest:
        return None
    at = rest.index(flag)
    value = rest[at + 1] if at + 1 < len(rest) else ""
    del rest[at : at + 2]
    return value


def split_arguments(argv: list[str]) -> tuple[dict, list[str]]:
    """``(this launcher's options, the arguments for transformers serve)``."""
    rest = list(argv)
    parser = _take(rest, "--tool-call-parser")
    if parser not in (None, "hermes"):
        raise SystemExit(f"--tool-call-parser: only hermes is known here, not {parser!r}")
    options = {
        "hermes": parser == "hermes",
        "adapter": _take(rest, "--adapter"),
        "merge_into": _take(rest, "--merge-into"),
    }
    if bool(options["adapter"]) != bool(options["merge_into"]):
        raise SystemExit("--adapter and --merge-into go together.")
    return options, rest


def merge_adapter(adapter: str, into: str) -> str:
    """The adapter merged into its base model (as its ``adapter_config.json`` names it),
    saved with the adapter's tokenizer and chat template to ``into``."""
    target = Path(into)
    if (target / "config.json").exists():
        return into
    from peft import AutoPeftModelForCausalLM
    from transformers import AutoTokenizer

    merged = AutoPeftModelForCausalLM.from_pretrained(adapter).merge_and_unload()
    part = target.with_name(f".{target.name}.part")
    merged.save_pretrained(part)
    AutoTokenizer.from_pretrained(adapter).save_pretrained(part)
    part.replace(target)
    return into


def main(argv: list[str] | None = None) -> None:
    options, rest = split_arguments(sys.argv[1:] if argv is None else argv)
    if options["adapter"]:
        rest = [merge_adapter(options["adapter"], options["merge_into"]), *rest]
    install(hermes=options["hermes"])
    from transformers.cli.transformers import main as transformers_main

    sys.argv = ["transformers", "serve", *rest]
    transformers_main()


if __name__ == "__main__":
    main()
