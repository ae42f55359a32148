"""Training hyperparameters: defaults, presets and validation. Pure Python (no Django): the
app validates what a person submits, the entry point (``apps.training.sft``) re-reads the
same normalized dict from ``job.json``.

A preset names a base model and the hyperparameters that suit its size; anything given
explicitly overrides the preset. ``preset:tiny-qwen2`` is not a hub model: the entry point
builds a 2-layer Qwen2 (hidden size 64) from a config and trains a byte-level BPE
tokenizer on the training file itself — a CPU smoke test that needs no download.
``preset:tiny-llava`` (preset ``tiny-vlm-cpu``) is its vision-language counterpart for
versions with images (``apps.training.vision``).
"""

from __future__ import annotations

from typing import Any

TINY_PRESET_MODEL = "preset:tiny-qwen2"
# A tiny vision-language model (a LLaVA: a 1-layer CLIP vision tower, a 2-layer Qwen2) built
# from a config with a locally trained tokenizer: the CPU smoke test for image versions.
TINY_VLM_PRESET_MODEL = "preset:tiny-llava"
# A decoder of about 10M parameters (8 layers, hidden 256) with an 8,192-token tokenizer,
# both built locally like the tiny one: large enough to learn tool use on a laptop's CPU.
SMALL_PRESET_MODEL = "preset:small-qwen2"
TEXT_PRESET_MODELS = (TINY_PRESET_MODEL, SMALL_PRESET_MODEL)
PRESET_MODELS = (*TEXT_PRESET_MODELS, TINY_VLM_PRESET_MODEL)

DEFAULTS: dict[str, Any] = {
    "epochs": 1.0,
    "max_steps": -1,  # > 0 overrides epochs
    "learning_rate": 2e-5,
    "batch_size": 1,
    "gradient_accumulation_steps": 8,
    "max_length": 4096,
    "warmup_ratio": 0.03,
    "lr_scheduler_type": "cosine",
    "weight_decay": 0.0,
    "seed": 0,
    "logging_steps": 1,
    "save_steps": 100,
    "eval_steps": 0,  # 0: evaluate once per epoch when there is a validation split
    "save_total_limit": 2,
    "gradient_checkpointing": False,
    "bf16": False,
    # also learn the system, user and tool text (never an excluded turn): a model built from
    # a config learns the environments' language, and to copy ids from it, from every token
    "context_loss": False,
    "lora": False,
    "lora_r": 16,
    "lora_alpha": 32,
    "lora_dropout": 0.05,
    "lora_target_modules": "all-linear",
    # openai backend only
    "learning_rate_multiplier": None,
}

PRESETS: dict[str, dict[str, Any]] = {
    "tiny-cpu": {
        "label": "Tiny smoke test (CPU, built from a config, ~30 steps)",
        "base_model": TINY_PRESET_MODEL,
        "hyperparameters": {
            "max_steps": 30,
            "learning_rate": 3e-3,
            "batch_size": 2,
            "gradient_accumulation_steps": 1,
            "max_length": 4096,  # a template environment's rows run to ~3,000 tiny-tokenizer tokens
            "warmup_ratio": 0.0,
            "lr_scheduler_type": "linear",
            "save_steps": 10,
        },
    },
    "laptop-cpu": {
        "label": "Small model that learns on a laptop (CPU, built from a config, ~10M parameters)",
        "base_model": SMALL_PRESET_MODEL,
        "hyperparameters": {
            "epochs": 4.0,  # 3 learnt less, 8 over-fitted (bench/NOTES.md, "The loop")
            "learning_rate": 2e-3,
            "batch_size": 4,
            "gradient_accumulation_steps": 1,
            "max_length": 4096,
            "warmup_ratio": 0.05,
            "lr_scheduler_type": "cosine",
            "weight_decay": 0.01,
            "save_steps": 50,
        },
    },
    "tiny-vlm-cpu": {
        "label": "Tiny vision-language smoke test (CPU, images, built from a config)",
        "base_model": TINY_VLM_PRESET_MODEL,
        "hyperparameters": {
            "max_steps": 10,
            "learning_rate": 3e-3,
            "batch_size": 1,
            "gradient_accumulation_steps": 1,
            "max_length": 4096,
            "warmup_ratio": 0.0,
            "lr_scheduler_type": "linear",
            "save_steps": 5,
        },
    },
    "small-lora": {
        "label": "Small model, LoRA (≤ 3B, one GPU)",
        "base_model": "Qwen/Qwen2.5-1.5B-Instruct",
        "hyperparameters": {
            "epochs": 3.0,
            "learning_rate": 2e-4,
            "batch_size": 2,
            "gradient_accumulation_steps": 8,
            "max_length": 8192,
            "lora": True,
            "lora_r": 16,
            "lora_alpha": 32,
            "gradient_checkpointing": True,
            "bf16": True,
        },
    },
    "7b-full": {
        "label": "7-8B full fine-tune (several GPUs, DeepSpeed/FSDP config)",
        "base_model": "Qwen/Qwen2.5-7B-Instruct",
        "hyperparameters": {
            "epochs": 2.0,
            "learning_rate": 1e-5,
            "batch_size": 1,
            "gradient_accumulation_steps": 16,
            "max_length": 16384,
            "gradient_checkpointing": True,
            "bf16": True,
        },
    },
    "openai-mini": {
        "label": "OpenAI fine-tuning (gpt-4.1-mini)",
        "base_model": "gpt-4.1-mini-2025-04-14",
        "hyperparameters": {"epochs": 3.0, "batch_size": 8, "learning_rate_multiplier": 1.0},
    },
}

SCHEDULERS = ("linear", "cosine", "constant", "constant_with_warmup")

# name: (type, minimum, maximum) — None bounds are open.
_NUMBERS: dict[str, tuple[type, float | None, float | None]] = {
    "epochs": (float, 0.01, 100.0),
    "max_steps": (int, -1, 1_000_000),
    "learning_rate": (float, 1e-9, 1.0),
    "batch_size": (int, 1, 4096),
    "gradient_accumulation_steps": (int, 1, 4096),
    "max_length": (int, 16, 1_048_576),
    "warmup_ratio": (float, 0.0, 0.5),
    "weight_decay": (float, 0.0, 1.0),
    "seed": (int, 0, 2**31 - 1),
    "logging_steps": (int, 1, 100_000),
    "save_steps": (int, 1, 1_000_000),
    "eval_steps": (int, 0, 1_000_000),
    "save_total_limit": (int, 1, 1000),
    "lora_r": (int, 1, 1024),
    "lora_alpha": (int, 1, 4096),
    "lora_dropout": (float, 0.0, 0.9),
    "learning_rate_multiplier": (float, 0.001, 100.0),
}
_BOOLEANS = ("gradient_checkpointing", "bf16", "lora", "context_loss")


def integer_bounds(name: str) -> dict[str, int]:
    """``min_value``/``max_value`` of an integer hyperparameter, for a form field."""
    _, low, high = _NUMBERS[name]
    return {"min_value": low, "max_value": high}


class HyperparameterError(ValueError):
    """Bad hyperparameters; ``errors`` maps each field to its messages."""

    def __init__(self, errors: dict[str, list[str]]):
        super().__init__("; ".join(f"{k}: {' '.join(v)}" for k, v in sorted(errors.items())))
        self.errors = errors


def _number(name: str, value: Any, errors: dict[str, list[str]], table=None):
    kind, low, high = (table or _NUMBERS)[name]
    if value is None and name == "learning_rate_multiplier":
        return None
    if isinstance(value, bool):
        errors.setdefault(name, []).append("Enter a number.")
        return None
    try:
        number = kind(value)
        if kind is int and float(value) != number:
            raise ValueError
    except (TypeError, ValueError):
        errors.setdefault(name, []).append(
            "Enter a whole number." if kind is int else "Enter a number."
        )
        return None
    if (
        number != number
        or (low is not None and number < low)
        or (high is not None and number > high)
    ):
        errors.setdefault(name, []).append(f"Must be between {low:g} and {high:g}.")
        return None
    return number


def _overlaid(
    given: dict[str, Any] | None,
    *,
    preset: str,
    defaults: dict[str, Any],
    presets: dict[str, Any],
    numbers: dict[str, Any],
    booleans: tuple[str, ...],
    label: str,
) -> tuple[dict[str, Any], dict[str, Any], dict[str, list[str]]]:
    """Defaults, overlaid by the preset's values, overlaid by ``given``; the numbers and
    booleans checked. Returns (merged, out, errors) for the method's own checks."""
    if given is not None and not isinstance(given, dict):
        raise HyperparameterError({"hyperparameters": ["Expected an object."]})
    errors: dict[str, list[str]] = {}
    if preset and preset not in presets:
        errors["preset"] = [
            f"Unknown {label}preset “{preset}”: choose one of {', '.join(presets)}."
        ]
    merged = dict(defaults)
    if preset in presets:
        merged.update(presets[preset]["hyperparameters"])
    unknown = sorted(set(given or {}) - set(defaults))
    if unknown:
        errors["hyperparameters"] = [
            f"Unknown {label}hyperparameter{'' if len(unknown) == 1 else 's'}: "
            f"{', '.join(unknown)}."
        ]
    merged.update({k: v for k, v in (given or {}).items() if k in defaults and v is not None})
    out: dict[str, Any] = {}
    for name in numbers:
        out[name] = _number(name, merged[name], errors, numbers)
    for name in booleans:
        if not isinstance(merged[name], bool):
            errors.setdefault(name, []).append("Must be true or false.")
        out[name] = merged[name] is True
    return merged, out, errors


def _lora_targets(merged: dict[str, Any], out: dict[str, Any], errors: dict[str, list[str]]):
    targets = merged["lora_target_modules"]
    if isinstance(targets, str):
        targets = targets.strip()
        if targets != "all-linear":
            targets = [t.strip() for t in targets.split(",") if t.strip()]
    if not targets or (
        isinstance(targets, list)
        and not all(isinstance(t, str) and t.isidentifier() for t in targets)
    ):
        errors["lora_target_modules"] = [
            "“all-linear” or module names separated by commas (q_proj, v_proj)."
        ]
    out["lora_target_modules"] = targets


def validate_hyperparameters(given: dict[str, Any] | None, *, preset: str = "") -> dict[str, Any]:
    """Defaults, overlaid by the preset's values, overlaid by ``given``; every value checked.

    Returns the complete normalized dict or raises ``HyperparameterError``.
    """
    merged, out, errors = _overlaid(
        given,
        preset=preset,
        defaults=DEFAULTS,
        presets=PRESETS,
        numbers=_NUMBERS,
        booleans=_BOOLEANS,
        label="",
    )
    if merged["lr_scheduler_type"] not in SCHEDULERS:
        errors["lr_scheduler_type"] = [f"Choose one of {', '.join(SCHEDULERS)}."]
    out["lr_scheduler_type"] = merged["lr_scheduler_type"]
    _lora_targets(merged, out, errors)
    if out["max_steps"] == 0:
        errors.setdefault("max_steps", []).append("Use -1 (train by epochs) or a positive count.")
    if errors:
        raise HyperparameterError(errors)
    return out


def planned_steps(hyperparameters: dict[str, Any], train_rows: int, processes: int = 1) -> int:
    """Optimizer steps the run will take (what the progress bar counts to)."""
    if hyperparameters["max_steps"] > 0:
        return int(hyperparameters["max_steps"])
    per_step = (
        hyperparameters["batch_size"] * hyperparameters["gradient_accumulation_steps"] * processes
    )
    per_epoch = max(1, -(-train_rows // per_step))
    return max(1, round(per_epoch * hyperparameters["epochs"]))


# --- GRPO (reinforcement learning on environment tasks) ------------------------------------

# Scalar reward per rollout, from the engine's grading (``rewards.episode_reward``).
REWARD_VARIANTS = {
    "score": "Safety-gated score: safety x (0.8·completion + 0.2·robustness)",
    "raw": "Raw score, no safety gate: 0.8·completion + 0.2·robustness",
    "passed": "Binary pass: 1 if the score reaches the pass threshold, else 0",
    "strict": "Strict only: 1 if every grader passed, else 0",
}
# Advantage as TRL's GRPOTrainer computes it from one scalar per rollout (put on every model
# token of the episode under trajectory credit; ``credit`` below replaces it per token).
# name: (label, GRPOConfig.scale_rewards, GRPOConfig.loss_type)
ADVANTAGES = {
    "grpo": ("GRPO: (r - group mean) / group std, per-sequence loss", "group", "grpo"),
    "dr_grpo": ("Dr. GRPO: r - group mean, no std, constant-length loss", "none", "dr_grpo"),
    "batch": ("Batch-std: (r - group mean) / batch std, token-level loss", "batch", "dapo"),
    # TRL's RLOOTrainer takes no environment_factory: the reward function scales the rewards
    # by G/(G-1) so that TRL's r - group mean is the leave-one-out advantage (grpo.make_reward).
    "rloo": ("RLOO: r - mean of the other G-1 rollouts, per-sequence loss", "none", "grpo"),
}
# Credit assignment (``apps.training.credit``): which advantage each model token takes.
CREDITS = {
    "trajectory": "Trajectory: the episode's advantage on every model token",
    "turn": "Per turn: discounted reward-to-go over turn rewards, normalised per turn index",
    "call": "Per tool call: checks citing the call, discounted reward-to-go over calls",
}
# Per-turn and per-call credit split the safety-gated score and are normalised with or
# without the group's std (``coworkenv_engine.rewards.CREDIT_METHODS``).
CREDIT_REWARD = "score"
CREDIT_ADVANTAGES = ("grpo", "dr_grpo")

GRPO_DEFAULTS: dict[str, Any] = {
    "max_steps": 50,
    "learning_rate": 1e-6,
    "group_size": 4,  # G: rollouts per task (num_generations)
    "batch_size": 4,  # rollouts per device per optimizer step (a multiple of G)
    "gradient_accumulation_steps": 1,
    "temperature": 1.0,
    "max_completion_length": 2048,  # every generated and tool token of an episode
    "max_tool_calls": 16,  # model turns per episode (max_tool_calling_iterations)
    "beta": 0.04,  # KL coefficient (0: no reference model, no KL)
    "reward": "score",
    "advantage": "grpo",
    "credit": "trajectory",
    "gamma": 1.0,  # discount of the reward-to-go under per-turn and per-call credit
    "faults": True,  # the environment's injected faults are on during rollouts
    "warmup_ratio": 0.0,
    "lr_scheduler_type": "constant",
    "weight_decay": 0.0,
    "seed": 0,
    "logging_steps": 1,
    "save_steps": 50,
    "save_total_limit": 2,
    "gradient_checkpointing": False,
    "bf16": False,
    "lora": False,
    "lora_r": 16,
    "lora_alpha": 32,
    "lora_dropout": 0.05,
    "lora_target_modules": "all-linear",
}

GRPO_PRESETS: dict[str, dict[str, Any]] = {
    "laptop-cpu": {
        "label": "Small model on a laptop (CPU; start from its SFT checkpoint)",
        "base_model": SMALL_PRESET_MODEL,
        "hyperparameters": {
            # 4 tasks a step; at 1e-4 a few steps undid what SFT taught (bench/NOTES.md, run 8)
            "max_steps": 20,
            "learning_rate": 2e-5,
            "group_size": 4,
            "batch_size": 16,
            "temperature": 1.0,
            "max_completion_length": 384,
            "max_tool_calls": 6,
            "beta": 0.0,
            "save_steps": 20,
        },
    },
    "tiny-cpu": {
        "label": "Tiny smoke test (CPU, built from a config, a few steps)",
        "base_model": TINY_PRESET_MODEL,
        "hyperparameters": {
            "max_steps": 4,
            "learning_rate": 1e-3,
            "group_size": 2,
            "batch_size": 2,
            "max_completion_length": 32,
            "max_tool_calls": 2,
            "save_steps": 100,
        },
    },
    "small-lora": {
        "label": "Small model, LoRA (≤ 3B, one GPU)",
        "base_model": "Qwen/Qwen2.5-1.5B-Instruct",
        "hyperparameters": {
            "max_steps": 200,
            "learning_rate": 1e-5,
            "group_size": 8,
            "batch_size": 8,
            "lora": True,
            "gradient_checkpointing": True,
            "bf16": True,
        },
    },
}

_GRPO_NUMBERS: dict[str, tuple[type, float | None, float | None]] = {
    "max_steps": (int, 1, 1_000_000),
    "learning_rate": (float, 1e-9, 1.0),
    "group_size": (int, 2, 256),
    "batch_size": (int, 1, 4096),
    "gradient_accumulation_steps": (int, 1, 4096),
    "temperature": (float, 0.01, 2.0),
    "max_completion_length": (int, 8, 1_048_576),
    "max_tool_calls": (int, 1, 1000),
    "beta": (float, 0.0, 10.0),
    "gamma": (float, 0.0, 1.0),
    "warmup_ratio": (float, 0.0, 0.5),
    "weight_decay": (float, 0.0, 1.0),
    "seed": (int, 0, 2**31 - 1),
    "logging_steps": (int, 1, 100_000),
    "save_steps": (int, 1, 1_000_000),
    "save_total_limit": (int, 1, 1000),
    "lora_r": (int, 1, 1024),
    "lora_alpha": (int, 1, 4096),
    "lora_dropout": (float, 0.0, 0.9),
}
_GRPO_BOOLEANS = ("gradient_checkpointing", "bf16", "lora", "faults")


def grpo_integer_bounds(name: str) -> dict[str, int]:
    _, low, high = _GRPO_NUMBERS[name]
    return {"min_value": low, "max_value": high}


def validate_grpo_hyperparameters(
    given: dict[str, Any] | None, *, preset: str = ""
) -> dict[str, Any]:
    """GRPO's defaults, overlaid by the GRPO preset's values, overlaid by ``given``; every
    value checked (as ``validate_hyperparameters``). The rollouts of one optimizer step
    (``batch_size`` x ``gradient_accumulation_steps``) must hold whole groups of G."""
    merged, out, errors = _overlaid(
        given,
        preset=preset,
        defaults=GRPO_DEFAULTS,
        presets=GRPO_PRESETS,
        numbers=_GRPO_NUMBERS,
        booleans=_GRPO_BOOLEANS,
        label="GRPO ",
    )
    for name, choices in (
        ("reward", REWARD_VARIANTS),
        ("advantage", ADVANTAGES),
        ("credit", CREDITS),
        ("lr_scheduler_type", dict.fromkeys(SCHEDULERS)),
    ):
        # a list or an object from JSON is no choice (and unhashable: test its type first)
        if not isinstance(merged[name], str) or merged[name] not in choices:
            errors[name] = [f"Choose one of {', '.join(choices)}."]
        out[name] = merged[name]
    if (
        isinstance(out["credit"], str)
        and out["credit"] != "trajectory"
        and out["credit"] in CREDITS
    ):
        if out["reward"] != CREDIT_REWARD:
            errors.setdefault("credit", []).append(
                "Per-turn and per-call credit split the safety-gated score: choose the score "
                "reward."
            )
        if out["advantage"] not in CREDIT_ADVANTAGES:
            errors.setdefault("credit", []).append(
                "Per-turn and per-call credit are normalised with or without the group's std: "
                "choose grpo or dr_grpo."
            )
    _lora_targets(merged, out, errors)
    g, b, ga = out["group_size"], out["batch_size"], out["gradient_accumulation_steps"]
    if None not in (g, b, ga) and (b * ga) % g:
        errors.setdefault("batch_size", []).append(
            f"Batch size x gradient accumulation ({b * ga}) must be a multiple of the group "
            f"size ({g}): a step trains on whole groups."
        )
    if errors:
        raise HyperparameterError(errors)
    return out
