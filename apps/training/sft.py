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

import logging
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from apps.training.encoding import text_counts, tokenize_row, training_chat_template
from apps.training.entry import (
    entry_point,
    finish_training,
    last_checkpoint,
    make_callback,
    sha256_file,
)
from apps.training.eval_rows import evaluation_rows
from apps.training.hyperparameters import (
    TEXT_PRESET_MODELS,
    TINY_VLM_PRESET_MODEL,
    validate_hyperparameters,
)
from apps.training.presets import build_text_preset, build_tiny_vlm_preset
from apps.training.reporting import reporter_from_config
from apps.training.vision import (
    VisionCollator,
    has_images,
    load_vision,
    read_bundle_or_rows,
    summarize_counts,
    tiny_vlm_base,
)

logger = logging.getLogger("apps.training.sft")


# --- data ---------------------------------------------------------------------------------


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


# --- model and tokenizer ------------------------------------------------------------------


# --- reporting from the trainer -----------------------------------------------------------


# --- the run ------------------------------------------------------------------------------


@dataclass
class Data:
    """The job's rows, read from its data files (paths or URLs)."""

    train_path: Path
    eval_path: Path | None
    train_rows: list[dict[str, Any]]
    eval_rows: list[dict[str, Any]]

    @property
    def rows(self) -> list[dict[str, Any]]:
        return self.train_rows + self.eval_rows

    def sha256(self) -> dict[str, str]:
        digests = {"train": sha256_file(self.train_path)}
        if self.eval_path:
            digests["eval"] = sha256_file(self.eval_path)
        return digests


@dataclass
class Prepared:
    """What the trainer is given: the model, its tokenizer or processor, the datasets."""

    tokenizer: Any
    model: Any
    train_dataset: Any
    eval_dataset: Any
    collator: Any = None  # the vision path's: it encodes rows as they are collated
    counts: dict[str, Any] | None = None  # the text path's, known before training


def run(config: dict[str, Any]) -> int:
    import trl
    from accelerate import PartialState

    reporter = reporter_from_config(config)
    state = PartialState()
    hp = validate_hyperparameters(config.get("hyperparameters") or {})
    output_dir = Path(config["output_dir"])
    data = _read_data(config, state, output_dir / "data")
    base = config["base_model"]
    data.eval_rows, note = evaluation_rows(data.train_rows, data.eval_rows, base)
    if note:
        reporter.emit({"type": "log", "line": note})
    vision = has_images(data.rows) or tiny_vlm_base(base)
    if vision and hp.get("context_loss"):
        raise ValueError("context_loss is for text rows: turn it off to train on images.")
    if vision and base in TEXT_PRESET_MODELS:
        raise ValueError(
            f"The rows show images and {base} is a text model: train "
            f"{TINY_VLM_PRESET_MODEL} or a vision-language model on them."
        )
    with state.main_process_first():
        base = _built_preset(base, data.rows, output_dir / "base", hp["seed"])
    prepared = (_prepare_vision if vision else _prepare_text)(base, data, hp)
    checkpoints = output_dir / "checkpoints"
    resume_path, resumed_from = last_checkpoint(checkpoints)
    callback = make_callback(reporter, config.get("supervisor_pid"))
    trainer = trl.SFTTrainer(
        model=prepared.model,
        args=_sft_config(
            hp, checkpoints, has_eval=prepared.eval_dataset is not None, vision=vision
        ),
        train_dataset=prepared.train_dataset,
        eval_dataset=prepared.eval_dataset,
        processing_class=prepared.tokenizer,
        peft_config=_lora_config(hp),
        callbacks=[callback],
        data_collator=prepared.collator,
    )
    data_sha256 = data.sha256()
    if state.is_main_process:
        counts = prepared.counts or {}
        reporter.emit(
            {
                "type": "started",
                "resumed_from_step": resumed_from,
                "total_steps": trainer.args.max_steps if trainer.args.max_steps > 0 else None,
                "data_sha256": data_sha256,
                "train_rows": len(data.train_rows),
                "eval_rows": len(data.eval_rows),
                "excluded_tokens": counts.get("excluded_tokens"),
                "truncated_rows": counts.get("truncated_rows"),
                "dropped_rows": counts.get("dropped_rows"),
                "processes": state.num_processes,
            }
        )
    trainer.train(resume_from_checkpoint=resume_path)
    counts = _vision_counts(prepared.collator, len(data.rows)) if vision else prepared.counts
    return finish_training(
        trainer=trainer,
        tokenizer=prepared.tokenizer,
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


def _read_data(config: dict[str, Any], state, data_dir: Path) -> Data:
    headers = config.get("data_headers") or {}
    with state.main_process_first():
        train_path = fetch_data_file(config["train_file"], data_dir, "train", headers)
        eval_path = (
            fetch_data_file(config["eval_file"], data_dir, "eval", headers)
            if config.get("eval_file")
            else None
        )
    train_rows = read_bundle_or_rows(train_path)
    if not train_rows:
        raise ValueError("The training file has no rows.")
    eval_rows = read_bundle_or_rows(eval_path) if eval_path else []
    return Data(train_path, eval_path, train_rows, eval_rows)


def _built_preset(base: str, rows: list[dict[str, Any]], directory: Path, seed: int) -> str:
    """The base model's path: a preset is built from configs (once, into ``directory``)."""
    if base in TEXT_PRESET_MODELS:
        return str(build_text_preset(rows, directory, seed, model=base))
    if tiny_vlm_base(base):
        return str(build_tiny_vlm_preset(rows, directory, seed))
    return base


def _model_kwargs(hp: dict[str, Any]) -> dict[str, Any]:
    import torch

    return {"dtype": torch.bfloat16} if hp["bf16"] and torch.cuda.is_available() else {}


def _prepare_vision(base: str, data: Data, hp: dict[str, Any]) -> Prepared:
    """Rows are encoded batch by batch (images are read then): the datasets hold indexes."""
    import datasets

    rows = data.rows
    calls_tools = any(m.get("tool_calls") for row in rows for m in row["messages"])
    processor, model, template = load_vision(base, _model_kwargs(hp), tools=calls_tools)
    train_count = len(data.train_rows)
    collator = VisionCollator(
        processor,
        template,
        rows,
        max_length=hp["max_length"],
        splits=[range(train_count), range(train_count, len(rows))],
    )
    eval_indexes = [{"index": i} for i in range(train_count, len(rows))]
    return Prepared(
        tokenizer=processor,
        model=model,
        train_dataset=datasets.Dataset.from_list([{"index": i} for i in range(train_count)]),
        eval_dataset=datasets.Dataset.from_list(eval_indexes) if eval_indexes else None,
        collator=collator,
    )


def _prepare_text(base: str, data: Data, hp: dict[str, Any]) -> Prepared:
    import datasets
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(base)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    template = training_chat_template(tokenizer)

    def tokenized(rows):
        return [
            tokenize_row(tokenizer, template, row, context_loss=hp.get("context_loss", False))
            for row in rows
        ]

    def dataset(encoded):
        pairs = [{"input_ids": t["input_ids"], "labels": t["labels"]} for t in encoded]
        return datasets.Dataset.from_list(pairs)

    train, evaluation = tokenized(data.train_rows), tokenized(data.eval_rows)
    limit = hp["max_length"]
    if limit and all(all(x == -100 for x in t["labels"][:limit]) for t in train):
        raise ValueError(
            f"Every training row ends before its first trained token at max_length={limit} "
            "(the prompt and tools fill it): raise max_length."
        )
    return Prepared(
        tokenizer=tokenizer,
        model=transformers.AutoModelForCausalLM.from_pretrained(base, **_model_kwargs(hp)),
        train_dataset=dataset(train),
        eval_dataset=dataset(evaluation) if evaluation else None,
        counts=text_counts(train + evaluation, hp["max_length"]),
    )


def _sft_config(hp: dict[str, Any], checkpoints: Path, *, has_eval: bool, vision: bool):
    import torch
    import trl

    use_cuda = torch.cuda.is_available()
    return trl.SFTConfig(
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
        eval_strategy="steps" if has_eval else "no",
        eval_steps=(hp["eval_steps"] or hp["save_steps"]) if has_eval else None,
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


def _lora_config(hp: dict[str, Any]):
    if not hp["lora"]:
        return None
    from peft import LoraConfig

    return LoraConfig(
        r=hp["lora_r"],
        lora_alpha=hp["lora_alpha"],
        lora_dropout=hp["lora_dropout"],
        target_modules=hp["lora_target_modules"],
        task_type="CAUSAL_LM",
    )


def _vision_counts(collator, rows: int) -> dict[str, Any]:
    """Each process counted the rows it collated: merged, then summarized."""
    from accelerate.utils import gather_object

    merged: dict[int, tuple[int, bool, str]] = {}
    for counted in gather_object([collator.counted]):
        merged.update(counted)
    return summarize_counts(merged, rows)


def main(argv: list[str] | None = None) -> int:
    return entry_point(run, argv, prog="python -m apps.training.sft", description=__doc__)


if __name__ == "__main__":
    sys.exit(main())
