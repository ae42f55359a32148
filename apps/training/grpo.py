"""The GRPO entry point: reinforcement learning on CoworkEnv tasks, the environment in the loop.

    python -m apps.training.grpo --config job.json
    accelerate launch [--config_file fsdp.yaml] -m apps.training.grpo --config job.json

No Django here (like ``apps.training.sft``): a cluster node needs the ``train`` extra, the
engine and this package. ``job.json``::

    {"method": "grpo",
     "base_model": "Qwen/Qwen2.5-1.5B-Instruct" | "/models/local" | "preset:tiny-qwen2",
     "environments": [{"name": "Acme ops", "spec_file": "envs/1.json"}, …],
     "split": "train" | "eval" | "",                       # "" = every task
     "env_server": null | {"url": "http://host:8000", "token": "…"},   # optional, see below
     "output_dir": "…",
     "hyperparameters": {…apps.training.hyperparameters.GRPO_DEFAULTS…},
     "report": {"events_file": "…"} | {"callback_url": "…", "callback_secret": "…"},
     "supervisor_pid": null | int}

What it does: TRL's ``GRPOTrainer`` with one environment class per CoworkEnv spec
(``engine.trl_env.environment_class``: the spec's tools as methods, ``reply_to_user`` to end a
turn) as its ``environment_factory`` — several environments through TRL's dict factory and
an ``environment`` column. One dataset row per task (x ``group_size`` rollouts at
``temperature``); the engine grades each finished rollout and the reward function turns the
grading into the chosen scalar (``reward``: score | raw | passed | strict, see
``engine.rewards.episode_reward``). The ``advantage`` choice maps onto TRL's options
(``hyperparameters.ADVANTAGES``): grpo → ``scale_rewards="group"``, ``loss_type="grpo"``;
dr_grpo → ``"none"``, ``"dr_grpo"``; batch → ``"batch"``, ``"dapo"``; rloo → ``"none"``,
``"grpo"`` with the rewards handed to TRL multiplied by G/(G-1), which turns TRL's
r - group mean into RLOO's leave-one-out advantage exactly. The ``credit`` choice says
which advantage each model token takes (``apps.training.credit``): ``trajectory`` is TRL's
own (one scalar per rollout on every model token of the episode); ``turn`` (reward-to-go of
the engine's turn rewards with discount ``gamma``, normalised per turn index across the group)
and ``call`` (each tool call credited by the checks whose evidence cites it, reward-to-go over
the calls) run a ``GRPOTrainer`` subclass that hands TRL's loss a (B, T) advantage tensor
(score reward, grpo or dr_grpo: std-scaled or not).

With ``env_server`` the episodes run on a CoworkEnv environment server (OpenEnv's WebSocket
session protocol, ``python -m coworkenv_engine serve specs… --token …``) instead of in
this process: each rollout holds one session; the spec files still give the tools' schemas
(the server must serve the same specs, by name).

Metrics per logged step, reported like the SFT loss: ``reward`` (mean of the chosen reward,
before any RLOO scaling), ``reward_std`` (TRL's, over the whole batch, of the rewards it saw:
x G/(G-1) for rloo), ``group_reward_std`` (mean std within groups of G: 0 means no learning
signal), ``pass_rate`` and ``strict_rate`` (share of rollouts whose grading passed / was
strict), ``score`` (mean engine score, whatever the reward), ``kl`` (when ``beta`` > 0),
``completion_length`` (mean tokens per episode), ``loss``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import sys
from pathlib import Path
from typing import Any

from apps.training.credit import recording_class, trainer_class
from apps.training.entry import (
    entry_point,
    finish_training,
    last_checkpoint,
    make_callback,
    sha256_file,
)
from apps.training.hyperparameters import (
    ADVANTAGES,
    TEXT_PRESET_MODELS,
    validate_grpo_hyperparameters,
)
from apps.training.presets import build_text_preset
from apps.training.reporting import reporter_from_config
from coworkenv_engine.rewards import episode_reward, sample_std
from coworkenv_engine.session import EpisodeSession
from coworkenv_engine.spec import load_spec
from coworkenv_engine.trl_env import OVER, coworkenv_reward, environment_class

logger = logging.getLogger("apps.training.grpo")

# TRL's log key -> the event's (and TrainingMetric's) field.
RL_METRICS = {
    "reward_mean": "reward",  # the chosen reward, before any RLOO scaling
    "reward_std": "reward_std",
    "group_reward_std": "group_reward_std",
    "pass_rate": "pass_rate",
    "strict_rate": "strict_rate",
    "score": "score",
    "kl": "kl",
    "completions/mean_length": "completion_length",
}


# --- environments and tasks -----------------------------------------------------------------


def load_environments(config: dict[str, Any]) -> dict[str, Any]:
    """``{name: EnvironmentSpec}`` from the config's spec files, in order."""
    specs = {}
    for entry in config.get("environments") or []:
        document = json.loads(Path(entry["spec_file"]).read_text(encoding="utf-8"))
        specs[entry["name"]] = load_spec(document)
    if not specs:
        raise ValueError("The config names no environment to train on.")
    return specs


def task_dataset_rows(specs: dict[str, Any], split: str) -> list[dict[str, Any]]:
    """One row per task of the split: its prompt as a student batch and the SFT rows show it
    (the system prompt, then the first user message, so ``reset`` adds nothing to it), the
    environment's name (TRL's dict factory routes on it) and the task key."""
    rows = [
        {
            "prompt": EpisodeSession(spec, task.key, 0, faults=False).start()["messages"],
            "environment": name,
            "task_key": task.key,
            "seed": 0,
        }
        for name, spec in specs.items()
        for task in spec.tasks
        if not split or task.split == split
    ]
    if not rows:
        raise ValueError(f"The environments have no {split or 'any'} task to train on.")
    return rows


def tokenizer_rows(specs: dict[str, Any]) -> list[dict[str, Any]]:
    """Text the tiny preset's tokenizer is trained on: each task's prompts and reference
    replies with its environment's tools (the preset has no vocabulary of its own)."""
    rows = []
    for spec in specs.values():
        tools = spec.openai_tools()
        for task in spec.tasks:
            messages = [{"role": "system", "content": task.system_prompt()}]
            for turn in task.turns:
                messages.append({"role": "user", "content": turn.message})
            for step in task.reference_solution:
                for call in step.calls:
                    messages.append(
                        {"role": "assistant", "content": json.dumps(call.arguments)[:2000]}
                    )
                if step.reply:
                    messages.append({"role": "assistant", "content": step.reply})
            rows.append({"messages": messages, "tools": tools})
    return rows


# --- episodes on an environment server -------------------------------------------------------


class EnvServerError(RuntimeError):
    """The environment server answered with an error frame."""


def ws_url(url: str, token: str | None) -> str:
    """``http(s)://host:port[/prefix]`` -> the session socket, the token as the path prefix
    OpenEnv clients use (``…/t/<token>/ws``)."""
    base = url.rstrip("/")
    if base.startswith("https://"):
        base = "wss://" + base[len("https://") :]
    elif base.startswith("http://"):
        base = "ws://" + base[len("http://") :]
    elif not base.startswith(("ws://", "wss://")):
        raise ValueError(f"The environment server URL must be http(s):// or ws(s)://: {url!r}")
    return f"{base}/t/{token}/ws" if token else f"{base}/ws"


def remote_environment_class(spec, *, url: str, token: str | None = None, faults: bool = True):
    """``environment_class(spec)`` whose episodes run on an environment server: the same tool
    methods (from the spec's schemas) and the same reward hook, but every reset and step is a
    message on this instance's WebSocket session (opened at the first reset, kept for the
    instance's life: TRL pools instances and resets them)."""
    from websockets.sync.client import connect

    local = environment_class(spec, faults=faults)
    address = ws_url(url, token)

    class Remote(local):
        def __init__(self) -> None:
            super().__init__()
            self._stack = contextlib.ExitStack()
            self._socket = None
            self._done = False
            self._score: float | None = None

        def _send(self, message: dict[str, Any]) -> dict[str, Any]:
            if self._socket is None:
                self._socket = self._stack.enter_context(
                    connect(address, max_size=16 * 2**20, open_timeout=30)
                )
            self._socket.send(json.dumps(message))
            frame = json.loads(self._socket.recv(timeout=120))
            if frame.get("type") != "observation":
                data = frame.get("data") or {}
                raise EnvServerError(f"{data.get('code', 'ERROR')}: {data.get('message', frame)}")
            wire = frame["data"]
            obs = dict(wire["observation"])
            obs["done"], obs["reward"] = wire["done"], wire["reward"]
            return obs

        def reset(
            self, task_key: str | None = None, seed: int | None = 0, prompt: Any = None, **row: Any
        ) -> str | None:
            """Start an episode of ``task_key`` on the server; returns what the in-process
            class returns (None when the row's ``prompt`` already holds the task's)."""
            key = task_key or self.spec.tasks[0].key
            data = {"environment": self.spec.name, "task_key": key, "seed": int(seed or 0)}
            data |= {"faults": self.faults, "evidence": True}  # call credit reads evidence
            obs = self._send({"type": "reset", "data": data})
            self.grading, self.turn_rewards = None, []
            self._done, self._score = False, None
            return self._prompt_text(obs, prompt)

        def _step(self, reply: str | None, calls) -> dict[str, Any]:
            action = {
                "tool_calls": [{"name": c.name, "arguments": c.arguments} for c in calls],
                "reply": reply,
            }
            obs = self._send({"type": "step", "data": action})
            if obs["done"]:
                self._done, self._score = True, obs["reward"]
                self.grading, self.turn_rewards = obs["grading"], obs["turn_rewards"]
            return obs

        def _act(self, reply: str | None, calls) -> str:
            if self._done:
                return OVER
            obs = self._step(reply, calls)
            if calls:  # text, or TRL's content blocks when the server sent images
                return self._tool_response(obs["tool_results"])
            return OVER if obs["done"] else obs["user_message"]

        def _finish(self, final_reply: str) -> float | None:
            if not self._done:
                self._step(final_reply, [])
                while not self._done:  # turns the rollout never reached: empty replies
                    self._step("", [])
            return self._score

        def _close(self) -> None:
            self._stack.close()
            self._socket = None

    Remote.__name__ = Remote.__qualname__ = local.__name__ + "_remote"
    return Remote


# --- the reward -----------------------------------------------------------------------------


def make_reward(variant: str, group_size: int, *, scale: float = 1.0):
    """TRL reward function: finishes each rollout's episode with its last message (the engine
    grades it) and returns ``episode_reward(grading, variant)`` x ``scale``; logs the mean
    reward (unscaled), the pass and strict rates, the mean score and the reward's standard
    deviation within each group of G.

    ``scale`` = G/(G-1) with TRL's ``scale_rewards="none"`` makes TRL's advantage
    r' - mean(r') = G/(G-1)·(r - μ) = r - mean of the other G-1 rollouts: RLOO exactly."""

    def reward(completions, environments, log_metric=None, **kwargs) -> list[float | None]:
        scores = coworkenv_reward(completions, environments)
        out: list[float | None] = []
        for score, env in zip(scores, environments, strict=True):
            grading = getattr(env, "grading", None)
            scored = score is not None and grading is not None
            out.append(episode_reward(grading, variant) if scored else None)
        if log_metric is not None:
            chosen = [r for r in out if r is not None]
            if chosen:
                log_metric("reward_mean", math.fsum(chosen) / len(chosen))
            graded = [env.grading for env in environments if getattr(env, "grading", None)]
            if graded:
                log_metric("pass_rate", sum(1.0 for g in graded if g["passed"]) / len(graded))
                log_metric("strict_rate", sum(1.0 for g in graded if g["strict"]) / len(graded))
                log_metric("score", math.fsum(g["score"] for g in graded) / len(graded))
            if len(out) % group_size == 0:  # this process's rollouts hold whole groups
                for start in range(0, len(out), group_size):
                    group = [r for r in out[start : start + group_size] if r is not None]
                    if len(group) > 1:
                        log_metric("group_reward_std", sample_std(group))
        return [r * scale if r is not None and scale != 1.0 else r for r in out]

    reward.__name__ = f"coworkenv_{variant}"
    return reward


def reward_scale(hp: dict[str, Any]) -> float:
    """G/(G-1) for RLOO (see ``make_reward``), else 1."""
    g = hp["group_size"]
    return g / (g - 1) if hp["advantage"] == "rloo" else 1.0


# --- the run --------------------------------------------------------------------------------


def grpo_config(hp: dict[str, Any], output_dir: Path, *, use_cuda: bool):
    import trl

    _, scale_rewards, loss_type = ADVANTAGES[hp["advantage"]]
    return trl.GRPOConfig(
        output_dir=str(output_dir),
        max_steps=hp["max_steps"],
        learning_rate=hp["learning_rate"],
        per_device_train_batch_size=hp["batch_size"],
        gradient_accumulation_steps=hp["gradient_accumulation_steps"],
        num_generations=hp["group_size"],
        temperature=hp["temperature"],
        max_completion_length=hp["max_completion_length"],
        max_tool_calling_iterations=hp["max_tool_calls"],
        beta=hp["beta"],
        scale_rewards=scale_rewards,
        loss_type=loss_type,
        warmup_steps=float(hp["warmup_ratio"]),
        lr_scheduler_type=hp["lr_scheduler_type"],
        weight_decay=hp["weight_decay"],
        seed=hp["seed"],
        logging_steps=hp["logging_steps"],
        save_steps=hp["save_steps"],
        save_total_limit=hp["save_total_limit"],
        gradient_checkpointing=hp["gradient_checkpointing"],
        bf16=hp["bf16"] and use_cuda,
        use_cpu=not use_cuda,
        report_to=[],
        disable_tqdm=True,
        log_completions=False,
    )


def run(config: dict[str, Any]) -> int:
    import datasets
    import torch
    import transformers
    from accelerate import PartialState

    reporter = reporter_from_config(config)
    state = PartialState()
    hp = validate_grpo_hyperparameters(config.get("hyperparameters") or {})
    output_dir = Path(config["output_dir"])
    specs = load_environments(config)
    split = config.get("split") or ""
    rows = task_dataset_rows(specs, split)

    base = config["base_model"]
    with state.main_process_first():
        if base in TEXT_PRESET_MODELS:
            texts = tokenizer_rows(specs)
            base = str(build_text_preset(texts, output_dir / "base", hp["seed"], model=base))
    tokenizer = transformers.AutoTokenizer.from_pretrained(base, padding_side="left")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token

    server = config.get("env_server") or {}
    if server.get("url"):
        factories = {
            name: remote_environment_class(
                spec, url=server["url"], token=server.get("token"), faults=hp["faults"]
            )
            for name, spec in specs.items()
        }
    else:
        factories = {
            name: environment_class(spec, faults=hp["faults"]) for name, spec in specs.items()
        }
    if hp["credit"] != "trajectory":  # each tool call's turn and engine index, for credit
        factories = {name: recording_class(cls) for name, cls in factories.items()}
    use_cuda = torch.cuda.is_available()
    checkpoints = output_dir / "checkpoints"
    resume_path, resumed_from = last_checkpoint(checkpoints)
    model_kwargs: dict[str, Any] = {}
    if hp["bf16"] and use_cuda:
        model_kwargs["dtype"] = torch.bfloat16
    model = transformers.AutoModelForCausalLM.from_pretrained(base, **model_kwargs)
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
    callback = make_callback(reporter, config.get("supervisor_pid"), RL_METRICS)
    trainer_cls = trainer_class(hp["credit"], gamma=hp["gamma"], scale=hp["advantage"] == "grpo")
    trainer = trainer_cls(
        model=model,
        reward_funcs=[make_reward(hp["reward"], hp["group_size"], scale=reward_scale(hp))],
        args=grpo_config(hp, checkpoints, use_cuda=use_cuda),
        train_dataset=datasets.Dataset.from_list(rows),
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=[callback],
        environment_factory=factories,
    )
    spec_sha256 = {
        entry["name"]: sha256_file(entry["spec_file"]) for entry in config["environments"]
    }
    if state.is_main_process:
        reporter.emit(
            {
                "type": "started",
                "resumed_from_step": resumed_from,
                "total_steps": hp["max_steps"],
                "data_sha256": spec_sha256,
                "train_rows": len(rows),
                "processes": state.num_processes,
            }
        )
    trainer.train(resume_from_checkpoint=resume_path)
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
        data_sha256=spec_sha256,
        what="GRPO steps",
    )


def main(argv: list[str] | None = None) -> int:
    return entry_point(run, argv, prog="python -m apps.training.grpo", description=__doc__)


if __name__ == "__main__":
    sys.exit(main())
