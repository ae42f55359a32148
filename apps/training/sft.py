"""The one training entry point every backend runs:

    python -m apps.training.sft --config job.json
    accelerate launch [--config_file fsdp.yaml] -m apps.training.sft --config job.json

No Django here: a cluster node needs only the ``train`` extra and this package. ``job.json``::

    {"base_model": "Qwen/Qwen2.5-1.5B-Instruct" | "/models/local" | "preset:tiny-qwen2",
     "train_file": "data/train.jsonl" | "https://…/data/train",   # TRL rows (messages + tools)
     "eval_file": null | path | URL,
     "data_headers": {"Authorization": "Bearer …"},              # for URL data files
     "output_dir": "…",
     "hyperparameters": {…apps.training.hyperparameters…},
     "report": {"events_file": "…"} | {"callback_url": "…", "callback_secret": "…"},
     "supervisor_pid": null | int}                                # stop if that process dies

What it does: TRL's ``SFTTrainer`` on assistant tokens only, with a training-ready chat
template (TRL's own, with ``{% generation %}`` markers), **honouring per-turn weights**: an
assistant message with ``"weight": 0`` (a turn a reviewer excluded) is masked out of the
labels, so it contributes no loss (TRL's ``assistant_only_loss`` alone would train on it).
The rows are tokenized here (``tokenize_row``) and handed to the trainer as
``input_ids``/``labels``. LoRA through ``peft`` when asked. Checkpoints go to
``output_dir/checkpoints``; a rerun resumes from the last one (the step count continues).
The final model (or adapter) and its tokenizer go to ``output_dir/final``.

Rows with images (a version whose demonstrations show images: its ``trl`` rows with an
``images`` column, or its TRL bundle zip) train a vision-language model instead
(``apps.training.vision``: ``preset:tiny-llava`` or a hub VLM, the same per-turn weights);
``preset:tiny-qwen2`` refuses them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import re
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from apps.training.eval_rows import evaluation_rows
from apps.training.hyperparameters import (
    TINY_PRESET_MODEL,
    TINY_VLM_PRESET_MODEL,
    validate_hyperparameters,
)
from apps.training.reporting import Reporter, reporter_from_config
from apps.training.vision import (
    VisionCollator,
    build_tiny_vlm_preset,
    has_images,
    load_vision,
    read_bundle_or_rows,
    summarize_counts,
    tiny_vlm_base,
)

logger = logging.getLogger("apps.training.sft")

EXIT_FAILED = 1
EXIT_CANCELLED = 3
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


class WeightMaskError(ValueError):
    """The chat template's assistant spans do not line up with the assistant messages."""


# --- data ---------------------------------------------------------------------------------


def sha256_file(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch_data_file(location: str, directory: Path, name: str, headers: dict | None) -> Path:
    """A local path as is; an http(s) URL downloaded once into ``directory``."""
    if not location.startswith(("http://", "https://")):
        return Path(location)
    target = directory / f"{name}.jsonl"
    if target.exists():
        return target
    directory.mkdir(parents=True, exist_ok=True)
    request = urllib.request.Request(location, headers=headers or {})
    temp = target.with_suffix(".part")
    with urllib.request.urlopen(request, timeout=120) as response, open(temp, "wb") as out:
        while block := response.read(1 << 20):
            out.write(block)
    temp.replace(target)
    return target


def read_rows(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _tools_of(row: dict[str, Any]):
    tools = row.get("tools")
    return json.loads(tools) if isinstance(tools, str) else tools


def _spans(mask: list[int]) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    start = None
    for index, bit in enumerate([*mask, 0]):
        if bit and start is None:
            start = index
        elif not bit and start is not None:
            spans.append((start, index))
            start = None
    return spans


def weighted_spans(mask: list[int], messages: list[dict[str, Any]]) -> list[tuple[int, int, Any]]:
    """``(start, end, weight)`` of each assistant span of ``mask``: the i-th span takes the
    i-th assistant message's ``weight`` (1 when it has none); ``WeightMaskError`` when the
    spans and the assistant messages are not one to one."""
    weights = [m.get("weight", 1) for m in messages if m.get("role") == "assistant"]
    spans = _spans(mask)
    if len(spans) != len(weights):
        raise WeightMaskError(
            f"The chat template marks {len(spans)} assistant spans for {len(weights)} assistant "
            "messages; per-turn weights cannot be applied with it."
        )
    return [(start, end, weight) for (start, end), weight in zip(spans, weights, strict=True)]


def tokenize_row(tokenizer, chat_template: str, row: dict[str, Any]) -> dict[str, Any]:
    """``input_ids`` and ``labels`` of one TRL row: assistant tokens are labels, except the
    tokens of assistant messages whose ``weight`` is 0, which are -100 like the prompt.

    The template's ``{% generation %}`` blocks give one contiguous span per assistant message,
    in order; the i-th span takes the i-th assistant message's weight. A template whose spans
    do not match the assistant messages one to one raises ``WeightMaskError`` rather than
    guess. Also returns ``trained_tokens`` and ``excluded_tokens`` (the counts).
    """
    messages = [{k: v for k, v in message.items() if k != "weight"} for message in row["messages"]]
    out = tokenizer.apply_chat_template(
        messages,
        tools=_tools_of(row),
        chat_template=chat_template,
        tokenize=True,
        return_dict=True,
        return_assistant_tokens_mask=True,
    )
    input_ids = list(out["input_ids"])
    labels = [-100] * len(input_ids)
    trained = excluded = 0
    for start, end, weight in weighted_spans(list(out["assistant_masks"]), row["messages"]):
        if weight:
            labels[start:end] = input_ids[start:end]
            trained += end - start
        else:
            excluded += end - start
    return {
        "input_ids": input_ids,
        "labels": labels,
        "trained_tokens": trained,
        "excluded_tokens": excluded,
    }


# --- model and tokenizer ------------------------------------------------------------------


def _trl_template(name: str) -> str:
    import trl

    return (Path(trl.__file__).parent / "chat_templates" / f"{name}.jinja").read_text()


def build_tiny_preset(rows: list[dict[str, Any]], directory: Path, seed: int) -> Path:
    """A 2-layer Qwen2 (hidden 64) and a byte-level BPE tokenizer trained on ``rows`` (the
    job's train and eval files), with
    Qwen2.5's chat template, saved to ``directory`` (reused when it exists: a resumed run
    must see the same vocabulary)."""
    if (directory / "config.json").exists():
        return directory
    import transformers

    def texts():
        for row in rows:
            yield (
                row.get("tools")
                if isinstance(row.get("tools"), str)
                else json.dumps(row.get("tools"))
            )
            for message in row["messages"]:
                yield json.dumps(message, ensure_ascii=False)

    tokenizer = train_bpe_tokenizer(texts(), SPECIAL_TOKENS)
    tokenizer.chat_template = _trl_template("qwen2_5")
    return save_tiny_model(
        transformers.Qwen2ForCausalLM, tiny_qwen2_config(tokenizer), seed, tokenizer, directory
    )


def train_bpe_tokenizer(texts, special_tokens: list[str]):
    """A byte-level BPE tokenizer (2000 tokens) trained on ``texts``, ChatML's end of turn as
    its EOS and ``<|endoftext|>`` as its padding (the tiny presets')."""
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(
        texts,
        trainers.BpeTrainer(
            vocab_size=2000,
            special_tokens=special_tokens,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        ),
    )
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )


def tiny_qwen2_config(tokenizer):
    """The tiny presets' language model: a 2-layer Qwen2, hidden 64, over ``tokenizer``."""
    import transformers

    return transformers.Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=32768,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )


def save_tiny_model(model_class, config, seed: int, tokenizer, directory: Path, saver=None):
    """``model_class(config)`` initialised from ``seed``, stopping and padding as ``tokenizer``
    does, saved to ``directory`` with ``saver`` (its tokenizer or processor)."""
    import torch

    torch.manual_seed(seed)
    model = model_class(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    directory.mkdir(parents=True, exist_ok=True)
    (saver or tokenizer).save_pretrained(directory)
    model.save_pretrained(directory)
    return directory


def training_chat_template(tokenizer) -> str:
    """The tokenizer's template if it already marks generations, else TRL's training
    variant of it (TRL ships one for the common families)."""
    from trl.chat_template_utils import get_training_chat_template

    template = tokenizer.chat_template
    if not template:
        raise ValueError("The tokenizer has no chat template.")
    patched = get_training_chat_template(tokenizer)
    return patched or template


# --- reporting from the trainer -----------------------------------------------------------


def _process_alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie — killed, not yet reaped — counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return True


def _memory() -> dict[str, float]:
    """Peak memory so far: the GPU's (this process) when there is one, and the process's RSS."""
    import resource

    import torch

    out = {"max_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 3)}
    if torch.cuda.is_available():
        out["max_gpu_memory_gb"] = round(torch.cuda.max_memory_allocated() / 2**30, 3)
    return out


BASE_METRICS = {
    "loss": "loss",
    "eval_loss": "eval_loss",
    "learning_rate": "learning_rate",
    "grad_norm": "grad_norm",
}


def make_callback(
    reporter: Reporter, supervisor_pid: int | None, extra_metrics: dict[str, str] | None = None
):
    """``extra_metrics``: more of the trainer's log keys to report, ``{log key: event key}``
    (the GRPO entry point's reward, KL, pass rate…)."""
    from transformers import TrainerCallback

    metrics = {**BASE_METRICS, **(extra_metrics or {})}

    class ReportingCallback(TrainerCallback):
        """Writes metrics as they happen; stops at a cancel or when the supervisor died."""

        def __init__(self):
            self.last_tokens = None
            self.last_time = None
            self.stop_reason = ""

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not state.is_world_process_zero or not logs:
                return
            event: dict[str, Any] = {"type": "metrics", "step": state.global_step}
            if state.epoch is not None:
                event["epoch"] = round(float(state.epoch), 4)
            for source, target in metrics.items():
                if logs.get(source) is not None:
                    event[target] = float(logs[source])
            tokens = logs.get("num_tokens")
            now = time.monotonic()
            if tokens is not None:
                if self.last_tokens is not None and now > self.last_time:
                    event["tokens_per_second"] = (tokens - self.last_tokens) / (
                        now - self.last_time
                    )
                self.last_tokens, self.last_time = tokens, now
            if set(event) & set(metrics.values()):
                event.update(_memory())
                reporter.emit(event)

        def on_save(self, args, state, control, **kwargs):
            if state.is_world_process_zero:
                path = Path(args.output_dir) / f"checkpoint-{state.global_step}"
                reporter.emit({"type": "checkpoint", "step": state.global_step, "path": str(path)})

        def on_step_end(self, args, state, control, **kwargs):
            if supervisor_pid and not _process_alive(supervisor_pid):
                self.stop_reason = "supervisor"
                control.should_training_stop = True
                control.should_save = False
            elif reporter.cancel_requested:
                self.stop_reason = "cancelled"
                control.should_training_stop = True
                control.should_save = False

    return ReportingCallback()


# --- the run ------------------------------------------------------------------------------


def _last_checkpoint(directory: Path) -> tuple[str | None, int]:
    if not directory.is_dir():
        return None, 0
    steps = []
    for child in directory.iterdir():
        match = re.fullmatch(r"checkpoint-(\d+)", child.name)
        if match and (child / "trainer_state.json").exists():
            steps.append((int(match.group(1)), child))
    if not steps:
        return None, 0
    step, path = max(steps)
    return str(path), step


def run(config: dict[str, Any]) -> int:
    import datasets
    import torch
    import transformers
    import trl
    from accelerate import PartialState

    reporter = reporter_from_config(config)
    state = PartialState()
    hp = validate_hyperparameters(config.get("hyperparameters") or {})
    output_dir = Path(config["output_dir"])
    data_dir = output_dir / "data"
    headers = config.get("data_headers") or {}
    with state.main_process_first():
        train_path = fetch_data_file(config["train_file"], data_dir, "train", headers)
        eval_path = (
            fetch_data_file(config["eval_file"], data_dir, "eval", headers)
            if config.get("eval_file")
            else None
        )
    train_rows = read_bundle_or_rows(train_path)
    eval_rows = read_bundle_or_rows(eval_path) if eval_path else []
    if not train_rows:
        raise ValueError("The training file has no rows.")

    base = config["base_model"]
    eval_rows, note = evaluation_rows(train_rows, eval_rows, base)
    if note:
        reporter.emit({"type": "log", "line": note})
    vision = has_images(train_rows + eval_rows) or tiny_vlm_base(base)
    if vision and base == TINY_PRESET_MODEL:
        raise ValueError(
            f"The rows show images and {TINY_PRESET_MODEL} is a text model: train "
            f"{TINY_VLM_PRESET_MODEL} or a vision-language model on them."
        )
    model_kwargs: dict[str, Any] = {}
    if hp["bf16"] and torch.cuda.is_available():
        model_kwargs["dtype"] = torch.bfloat16
    collator = None
    with state.main_process_first():
        if base == TINY_PRESET_MODEL:
            base = str(build_tiny_preset(train_rows + eval_rows, output_dir / "base", hp["seed"]))
        elif tiny_vlm_base(base):
            base = str(
                build_tiny_vlm_preset(train_rows + eval_rows, output_dir / "base", hp["seed"])
            )
    counts: dict[str, Any] | None = None  # the vision path counts as it collates
    if vision:
        # Rows are encoded batch by batch (images are read then): the datasets hold indexes.
        rows = train_rows + eval_rows
        calls_tools = any(m.get("tool_calls") for row in rows for m in row["messages"])
        tokenizer, model, template = load_vision(base, model_kwargs, tools=calls_tools)
        collator = VisionCollator(
            tokenizer,
            template,
            rows,
            max_length=hp["max_length"],
            splits=[range(len(train_rows)), range(len(train_rows), len(rows))],
        )
        train_dataset = datasets.Dataset.from_list([{"index": i} for i in range(len(train_rows))])
        eval_dataset = (
            datasets.Dataset.from_list(
                [{"index": len(train_rows) + i} for i in range(len(eval_rows))]
            )
            if eval_rows
            else None
        )
    else:
        tokenizer = transformers.AutoTokenizer.from_pretrained(base)
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        template = training_chat_template(tokenizer)

        def prepare(rows):
            tokenized = [tokenize_row(tokenizer, template, row) for row in rows]
            return datasets.Dataset.from_list(
                [{"input_ids": t["input_ids"], "labels": t["labels"]} for t in tokenized]
            ), tokenized

        train_dataset, tokenized = prepare(train_rows)
        eval_dataset, eval_tokenized = prepare(eval_rows) if eval_rows else (None, [])
        counts = text_counts(tokenized + eval_tokenized, hp["max_length"])
        model = transformers.AutoModelForCausalLM.from_pretrained(base, **model_kwargs)

    checkpoints = output_dir / "checkpoints"
    resume_path, resumed_from = _last_checkpoint(checkpoints)
    use_cuda = torch.cuda.is_available()
    args = trl.SFTConfig(
        output_dir=str(checkpoints),
        num_train_epochs=hp["epochs"],
        max_steps=hp["max_steps"],
        learning_rate=hp["learning_rate"],
        per_device_train_batch_size=hp["batch_size"],
        per_device_eval_batch_size=hp["batch_size"],
        gradient_accumulation_steps=hp["gradient_accumulation_steps"],
        max_length=hp["max_length"],
        warmup_steps=float(hp["warmup_ratio"]),
        lr_scheduler_type=hp["lr_scheduler_type"],
        weight_decay=hp["weight_decay"],
        seed=hp["seed"],
        logging_steps=hp["logging_steps"],
        save_steps=hp["save_steps"],
        save_total_limit=hp["save_total_limit"],
        eval_strategy="steps" if eval_dataset is not None else "no",
        eval_steps=(hp["eval_steps"] or hp["save_steps"]) if eval_dataset is not None else None,
        gradient_checkpointing=hp["gradient_checkpointing"],
        bf16=hp["bf16"] and use_cuda,
        use_cpu=not use_cuda,
        report_to=[],
        disable_tqdm=True,
        dataset_num_proc=None,
        # the vision path's datasets are row indexes its collator encodes
        remove_unused_columns=not vision,
        dataset_kwargs={"skip_prepare_dataset": True} if vision else None,
    )
    peft_config = None
    if hp["lora"]:
        from peft import LoraConfig

        peft_config = LoraConfig(
            r=hp["lora_r"],
            lora_alpha=hp["lora_alpha"],
            lora_dropout=hp["lora_dropout"],
            target_modules=hp["lora_target_modules"],
            task_type="CAUSAL_LM",
        )
    callback = make_callback(reporter, config.get("supervisor_pid"))
    trainer = trl.SFTTrainer(
        model=model,
        args=args,
        train_dataset=train_dataset,
        eval_dataset=eval_dataset,
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=[callback],
        data_collator=collator,
    )
    data_sha256 = {"train": sha256_file(train_path)}
    if eval_path:
        data_sha256["eval"] = sha256_file(eval_path)
    if state.is_main_process:
        reporter.emit(
            {
                "type": "started",
                "resumed_from_step": resumed_from,
                "total_steps": trainer.args.max_steps if trainer.args.max_steps > 0 else None,
                "data_sha256": data_sha256,
                "train_rows": len(train_rows),
                "eval_rows": len(eval_rows),
                "excluded_tokens": counts["excluded_tokens"] if counts else None,
                "truncated_rows": counts["truncated_rows"] if counts else None,
                "dropped_rows": counts["dropped_rows"] if counts else None,
                "processes": state.num_processes,
            }
        )
    trainer.train(resume_from_checkpoint=resume_path)
    if vision:
        from accelerate.utils import gather_object

        merged: dict[int, tuple[int, bool, str]] = {}
        for counted in gather_object([collator.counted]):
            merged.update(counted)
        counts = summarize_counts(merged, len(train_rows) + len(eval_rows))
    return finish_training(
        trainer=trainer,
        tokenizer=tokenizer,
        callback=callback,
        reporter=reporter,
        state=state,
        output_dir=output_dir,
        config=config,
        base=base,
        lora=hp["lora"],
        data_sha256=data_sha256,
        what="steps",
        data=counts,
    )


def text_counts(tokenized: list[dict[str, Any]], max_length: int | None) -> dict[str, Any]:
    """What the text path reports at start, in the vision path's terms: tokens of weight-0
    turns, rows longer than ``max_length`` (TRL cuts them, keeping the start) and rows left
    without a trained token (TRL drops them)."""
    limit = max_length or None
    truncated = sum(1 for t in tokenized if limit and len(t["input_ids"]) > limit)
    dropped = sum(1 for t in tokenized if all(x == -100 for x in t["labels"][:limit]))
    return {
        "rows": len(tokenized),
        "counted_rows": len(tokenized),
        "excluded_tokens": sum(t["excluded_tokens"] for t in tokenized),
        "truncated_rows": truncated,
        "dropped_rows": dropped,
        "dropped": {"no_trained_tokens": dropped} if dropped else {},
    }


def finish_training(
    *, trainer, tokenizer, callback, reporter, state, output_dir, config, base, lora,
    data_sha256, what: str, data: dict | None = None,
) -> int:  # fmt: skip
    """After ``trainer.train``: report a stop (cancelled, or the supervisor gone), or save the
    final model with its (serving) chat template and report it. Shared by SFT and GRPO.
    ``data``: the rows' counts (``text_counts``, ``vision.summarize_counts``), reported in the
    ``finished`` event and as a log line."""
    if data and state.is_main_process:
        reporter.emit({"type": "log", "line": describe_counts(data)})
    if callback.stop_reason:
        if state.is_main_process:
            if callback.stop_reason == "cancelled":
                reporter.emit(
                    {
                        "type": "finished",
                        "status": "cancelled",
                        "message": "Cancelled.",
                        "data": data,
                    }
                )
            else:
                reporter.emit({"type": "log", "line": "The supervising worker is gone; stopping."})
        return EXIT_CANCELLED
    final = output_dir / "final"
    trainer.save_model(str(final))
    if state.is_main_process:
        tokenizer.save_pretrained(str(final))
        reporter.emit(
            {
                "type": "finished",
                "status": "succeeded",
                "message": f"Trained {trainer.state.global_step} {what}.",
                "artifacts": {
                    "final": str(final),
                    "kind": "adapter" if lora else "full",
                    "base_model": config["base_model"]
                    if config["base_model"] != TINY_PRESET_MODEL
                    else base,
                    "steps": trainer.state.global_step,
                    "data_sha256": data_sha256,
                },
                "data": data,
            }
        )
    return 0


def describe_counts(data: dict) -> str:
    dropped = ", ".join(f"{n} {reason.replace('_', ' ')}" for reason, n in data["dropped"].items())
    return (
        f"data: {data['counted_rows']} of {data['rows']} rows encoded; "
        f"{data['excluded_tokens']} tokens of weight-0 turns excluded; "
        f"{data['truncated_rows']} rows truncated; {data['dropped_rows']} dropped"
        + (f" ({dropped})" if dropped else "")
    )


def main(argv: list[str] | None = None) -> int:
    return entry_point(run, argv, prog="python -m apps.training.sft", description=__doc__)


def entry_point(run_config, argv, *, prog: str, description: str | None) -> int:
    """``--config job.json`` → ``run_config(config)``; a crash is reported as the job's
    ``finished`` event (failed, with its type and message) and exits ``EXIT_FAILED``."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--config", required=True, help="Path to job.json.")
    options = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    config = json.loads(Path(options.config).read_text())
    try:
        return run_config(config)
    except Exception as exc:
        logger.exception("Training failed")
        try:
            reporter_from_config(config).emit(
                {"type": "finished", "status": "failed", "message": f"{type(exc).__name__}: {exc}"}
            )
        except Exception:
            logger.exception("Could not report the failure")
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
