"""What the SFT and GRPO entry points share: the command line, the reporting callback,
checkpoints, and the final save. No Django here."""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import re
import time
from pathlib import Path
from typing import Any

from apps.training.hyperparameters import PRESET_MODELS
from apps.training.reporting import Reporter, reporter_from_config

logger = logging.getLogger("apps.training")

EXIT_FAILED = 1
EXIT_CANCELLED = 3


def sha256_file(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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


def last_checkpoint(directory: Path) -> tuple[str | None, int]:
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
                    if config["base_model"] not in PRESET_MODELS
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
