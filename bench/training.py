"""Training benchmark: the training entry point on a dataset of oracle demonstrations.

    python bench/training.py [--base-model preset:tiny-qwen2] [--steps 20] [--lora]
        [--batch-size 2] [--grad-accum 1] [--max-length 1024] [--rows 200]
        [--launcher accelerate|python] [--processes N] [--bf16]

No Django, no database: the rows are the three sample environments' oracle transcripts in
the TRL export format (the same ``trl_row`` the dataset exports use), repeated with worded
variants up to ``--rows``; one of every five has its first assistant turn excluded (weight
0). The script writes a ``job.json`` and runs ``python -m apps.training.sft`` (through
``accelerate launch`` by default), exactly as the local backend does, then prints from the
trainer's own events: steps, wall time of the training loop, tokens/s (mean and median of
the logged intervals), the loss at the start and end, peak process RSS and, on a GPU, peak
GPU memory. On a GPU machine without a hub, pass a local model folder as ``--base-model``
(e.g. a Qwen2.5-0.5B-Instruct snapshot) and ``--lora --bf16``.

Nothing asserts on time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def rows(count: int) -> list[dict]:
    from apps.datasets.formats import normalize_messages, normalize_tools, trl_row
    from coworkenv_engine import policies, runner

    base = []
    for path in sorted((ROOT / "samples").glob("*.json")):
        doc = json.loads(path.read_text())
        for task in doc["tasks"]:
            result = runner.run_task(
                doc, task["key"], policies.OraclePolicy(), seed=0, faults=False
            )
            base.append((normalize_messages(result.transcript), normalize_tools(result.tools)))
    out = []
    for index in range(count):
        messages, tools = base[index % len(base)]
        messages = json.loads(json.dumps(messages))
        if index >= len(base):
            messages[-1]["content"] = f"{messages[-1].get('content') or ''} (take {index})"
        if index % 5 == 4:
            first = next(m for m in messages if m["role"] == "assistant")
            first["weight"] = 0
        out.append(trl_row(messages, tools))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-model", default="preset:tiny-qwen2")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rows", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--grad-accum", type=int, default=1)
    parser.add_argument("--max-length", type=int, default=1024)
    parser.add_argument("--learning-rate", type=float, default=None)
    parser.add_argument("--lora", action="store_true")
    parser.add_argument("--bf16", action="store_true")
    parser.add_argument("--launcher", choices=["accelerate", "python"], default="accelerate")
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--keep", action="store_true", help="Keep the output folder.")
    options = parser.parse_args()
    try:
        import torch
        import trl  # noqa: F401
    except ImportError:
        print("The train extra is not installed (pip install '.[train]'); skipped.")
        return 0

    out = Path(tempfile.mkdtemp(prefix="coworkenv-bench-training-"))
    data = rows(options.rows)
    train = out / "train.jsonl"
    train.write_text("".join(json.dumps(r) + "\n" for r in data))
    tiny = options.base_model == "preset:tiny-qwen2"
    hp = {
        "max_steps": options.steps,
        "batch_size": options.batch_size,
        "gradient_accumulation_steps": options.grad_accum,
        "max_length": options.max_length,
        "learning_rate": options.learning_rate
        or (3e-3 if tiny else 2e-4 if options.lora else 1e-5),
        "warmup_ratio": 0.0,
        "lr_scheduler_type": "linear",
        "save_steps": max(options.steps, 1),
        "lora": options.lora,
        "bf16": options.bf16,
        "gradient_checkpointing": not tiny,
    }
    events = out / "events.jsonl"
    config = {
        "base_model": options.base_model,
        "train_file": str(train),
        "eval_file": None,
        "output_dir": str(out / "run"),
        "hyperparameters": hp,
        "report": {"events_file": str(events)},
    }
    (out / "job.json").write_text(json.dumps(config, indent=2))
    entry = ["-m", "apps.training.sft", "--config", str(out / "job.json")]
    if options.launcher == "python":
        command = [sys.executable, *entry]
    else:
        command = [sys.executable, "-m", "accelerate.commands.launch"]
        command += ["--num_processes", str(options.processes), "--num_machines", "1"]
        command += ["--mixed_precision", "bf16" if options.bf16 else "no", "--dynamo_backend", "no"]
        if not torch.cuda.is_available():
            command.append("--cpu")
        elif options.processes > 1:
            command.append("--multi_gpu")
        command += entry
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none (CPU)"
    print(
        f"base {options.base_model} · {len(data)} rows · {options.steps} steps · "
        f"batch {options.batch_size}x{options.grad_accum}x{options.processes} · max length "
        f"{options.max_length} · {'LoRA' if options.lora else 'full'} · GPU {gpu}"
    )
    started = time.monotonic()
    result = subprocess.run(
        command,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
    )
    wall = time.monotonic() - started
    reported = (
        [json.loads(line) for line in events.read_text().splitlines()] if events.exists() else []
    )
    finished = next((e for e in reported if e["type"] == "finished"), {})
    if result.returncode != 0 or finished.get("status") != "succeeded":
        print(result.stdout[-3000:], result.stderr[-3000:])
        print(f"FAILED: {finished.get('message', result.returncode)}")
        return 1
    metrics = [e for e in reported if e["type"] == "metrics" and e.get("loss") is not None]
    rates = [e["tokens_per_second"] for e in metrics if e.get("tokens_per_second")]
    loop = metrics[-1]["time"] - metrics[0]["time"] if len(metrics) > 1 else float("nan")
    started_event = next(e for e in reported if e["type"] == "started")
    print(f"process wall time            {wall:8.1f} s (start-up, tokenization, saving included)")
    print(f"training loop (steps 1..{metrics[-1]['step']})  {loop:8.1f} s")
    if rates:
        print(
            f"tokens/s                     {statistics.mean(rates):8.0f} mean, "
            f"{statistics.median(rates):.0f} median over {len(rates)} logged steps"
        )
    print(f"loss                         {metrics[0]['loss']:8.3f} -> {metrics[-1]['loss']:.3f}")
    print(f"excluded (weight-0) tokens   {started_event.get('excluded_tokens')}")
    print(f"peak RSS                     {max(e.get('max_rss_gb', 0) for e in metrics):8.2f} GiB")
    if any("max_gpu_memory_gb" in e for e in metrics):
        peak = max(e.get("max_gpu_memory_gb", 0) for e in metrics)
        print(f"peak GPU memory (allocated)  {peak:8.2f} GiB")
    if not options.keep:
        import shutil

        shutil.rmtree(out, ignore_errors=True)
    else:
        print(f"kept {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
