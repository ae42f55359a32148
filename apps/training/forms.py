"""Forms of the training pages: launch (presets, folded advanced hyperparameters), command
templates, and the evaluation of a trained model."""

from django import forms

from apps.training.hyperparameters import (
    ADVANTAGES,
    CREDITS,
    GRPO_DEFAULTS,
    PRESETS,
    REWARD_VARIANTS,
    SCHEDULERS,
    TEXT_PRESET_MODELS,
    grpo_integer_bounds,
    integer_bounds,
)
from apps.training.models import Backend, TrainingMethod

# The tiny smoke tests: a text model, and its vision-language counterpart for versions with
# images. The form swaps one for the other as the chosen version asks.
TEXT_PRESET, VISION_PRESET = "tiny-cpu", "tiny-vlm-cpu"
IMAGES_NEED_VISION = (
    "This version's rows show images and this preset trains a text model built from a "
    "config: choose the tiny vision-language preset, or name a vision-language base model."
)

PRESET_CHOICES = [("", "None (set everything below)")] + [
    (key, preset["label"]) for key, preset in PRESETS.items()
]


class VersionSelect(forms.Select):
    """The dataset version select; an option whose version holds images says so
    (``data-images``), for the script that swaps the tiny presets."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.with_images: set[str] = set()

    def create_option(self, name, value, *args, **kwargs):
        option = super().create_option(name, value, *args, **kwargs)
        if str(value) in self.with_images:
            option["attrs"]["data-images"] = "true"
        return option


def _short_choices(labels: dict[str, str]) -> list[tuple[str, str]]:
    """``"Name: what it does"`` → the option ``Name`` (what fits a select's width)."""
    return [(key, label.split(":", 1)[0]) for key, label in labels.items()]


def _legend(labels: dict[str, str]) -> str:
    """Every option's whole label, for the help text under the select (which wraps)."""
    return " ".join(label if label.endswith(".") else f"{label}." for label in labels.values())


class LaunchForm(forms.Form):
    """Blank advanced fields take the preset's value (or the default). ``sft`` needs a dataset
    version; ``grpo`` needs environments (and takes the GRPO fields)."""

    name = forms.CharField(max_length=200, required=False)
    method = forms.ChoiceField(
        choices=TrainingMethod.choices, initial=TrainingMethod.SFT, required=False
    )
    dataset_version = forms.ChoiceField(
        label="Dataset version (SFT)",
        required=False,
        widget=VersionSelect(attrs={"data-swap-preset": f"{TEXT_PRESET}|{VISION_PRESET}"}),
    )
    # GRPO: the environments whose tasks are rolled out, and how rewards become advantages.
    environments = forms.MultipleChoiceField(
        required=False, label="Environments (GRPO)", widget=forms.CheckboxSelectMultiple
    )
    task_split = forms.ChoiceField(
        required=False,
        initial="train",
        choices=[("train", "Train tasks"), ("eval", "Eval tasks"), ("", "Every task")],
        label="Tasks",
    )
    group_size = forms.IntegerField(
        required=False,
        **grpo_integer_bounds("group_size"),
        label="Group size G",
        help_text=f"Rollouts per task. Blank: the preset's ({GRPO_DEFAULTS['group_size']}).",
    )
    temperature = forms.FloatField(
        required=False, min_value=0.01, max_value=2.0, help_text="Sampling temperature."
    )
    # A select cannot wrap: the options say the name, the help under it what each one does.
    reward = forms.ChoiceField(
        required=False,
        choices=[("", "Preset's (safety-gated score)"), *_short_choices(REWARD_VARIANTS)],
        label="Reward",
        help_text=_legend(REWARD_VARIANTS),
    )
    advantage = forms.ChoiceField(
        required=False,
        choices=[
            ("", "Preset's (GRPO)"),
            *_short_choices({k: v[0] for k, v in ADVANTAGES.items()}),
        ],
        label="Advantage",
        help_text=_legend({k: v[0] for k, v in ADVANTAGES.items()}),
    )
    credit = forms.ChoiceField(
        required=False,
        choices=[("", "Preset's (trajectory)"), *_short_choices(CREDITS)],
        label="Credit assignment",
        help_text=_legend(CREDITS) + " Per turn and per call: score reward, GRPO or Dr. GRPO.",
    )
    gamma = forms.FloatField(
        required=False,
        min_value=0.0,
        max_value=1.0,
        label="Discount \N{GREEK SMALL LETTER GAMMA}",
        help_text="Reward-to-go over turns or calls. Blank: 1.",
    )
    beta = forms.FloatField(
        required=False,
        min_value=0.0,
        max_value=10.0,
        label="KL coefficient β",
        help_text="0: no reference model and no KL.",
    )
    max_completion_length = forms.IntegerField(
        required=False,
        **grpo_integer_bounds("max_completion_length"),
        label="Max episode tokens",
        help_text="Every generated and tool token of an episode.",
    )
    max_tool_calls = forms.IntegerField(
        required=False, **grpo_integer_bounds("max_tool_calls"), label="Max model turns"
    )
    backend = forms.ChoiceField(choices=Backend.choices, initial=Backend.LOCAL)
    preset = forms.ChoiceField(choices=PRESET_CHOICES, required=False, initial=TEXT_PRESET)
    base_model = forms.CharField(
        max_length=300,
        required=False,
        help_text="A Hugging Face id, a local path, or preset:tiny-qwen2 (preset:tiny-llava: a "
        "tiny vision-language model, for versions with images). Blank: the preset's.",
    )
    eval_on_validation = forms.BooleanField(
        required=False, initial=True, label="Evaluate on the validation split"
    )
    endpoint = forms.ChoiceField(required=False, label="Fine-tuning API (openai backend)")
    command_template = forms.ChoiceField(
        required=False, label="Command template (command backend, the operator's)"
    )
    # Advanced (folded): blank means the preset's value.
    epochs = forms.FloatField(required=False)
    max_steps = forms.IntegerField(
        required=False,
        **integer_bounds("max_steps"),
        help_text="SFT: > 0 overrides epochs. GRPO: optimizer steps.",
    )
    learning_rate = forms.FloatField(required=False)
    batch_size = forms.IntegerField(
        required=False, **integer_bounds("batch_size"), label="Batch size per device"
    )
    gradient_accumulation_steps = forms.IntegerField(
        required=False, **integer_bounds("gradient_accumulation_steps")
    )
    max_length = forms.IntegerField(
        required=False, **integer_bounds("max_length"), label="Max length (tokens)"
    )
    warmup_ratio = forms.FloatField(required=False)
    lr_scheduler_type = forms.ChoiceField(
        required=False, choices=[("", "Preset's")] + [(s, s) for s in SCHEDULERS]
    )
    seed = forms.IntegerField(required=False, **integer_bounds("seed"))
    save_steps = forms.IntegerField(
        required=False, **integer_bounds("save_steps"), label="Checkpoint every N steps"
    )
    lora = forms.ChoiceField(
        required=False,
        choices=[("", "Preset's"), ("true", "LoRA"), ("false", "Full fine-tune")],
        label="LoRA",
    )
    lora_r = forms.IntegerField(required=False, **integer_bounds("lora_r"), label="LoRA rank")
    lora_alpha = forms.IntegerField(
        required=False, **integer_bounds("lora_alpha"), label="LoRA alpha"
    )
    lora_target_modules = forms.CharField(required=False, label="LoRA target modules")
    learning_rate_multiplier = forms.FloatField(required=False, label="LR multiplier (openai)")

    GRPO = (
        "group_size",
        "temperature",
        "reward",
        "advantage",
        "credit",
        "gamma",
        "beta",
        "max_completion_length",
        "max_tool_calls",
    )

    ADVANCED = (
        "epochs",
        "max_steps",
        "learning_rate",
        "batch_size",
        "gradient_accumulation_steps",
        "max_length",
        "warmup_ratio",
        "lr_scheduler_type",
        "seed",
        "save_steps",
        "lora",
        "lora_r",
        "lora_alpha",
        "lora_target_modules",
        "learning_rate_multiplier",
    )

    def __init__(
        self,
        *args,
        versions=(),
        endpoints=(),
        templates=(),
        environments=(),
        with_images=(),
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        # Versions whose rows show images: the tiny text preset cannot train on them.
        self.with_images = {str(pk) for pk in with_images}
        self.fields["dataset_version"].widget.with_images = self.with_images
        if str(self.initial.get("dataset_version", "")) in self.with_images:
            self.initial.setdefault("preset", VISION_PRESET)
        self.fields["environments"].choices = [
            (str(e.pk), f"{e.name} ({e.get_status_display().lower()})") for e in environments
        ]
        self.fields["dataset_version"].choices = [("", "Choose…")] + [
            (str(v.pk), f"{v.dataset.name} v{v.number} ({v.train_rows} train rows)")
            for v in versions
        ]
        self.fields["endpoint"].choices = [("", "—")] + [(str(e.pk), e.name) for e in endpoints]
        self.fields["command_template"].choices = [("", "—")] + [
            (t.name, t.name) for t in templates
        ]
        for template in templates:  # one field per declared parameter, shared by name
            for parameter in template.parameters.values():
                field = self.fields.setdefault(
                    f"param_{parameter.name}",
                    forms.CharField(required=False, max_length=500, label=parameter.label),
                )
                field.help_text = " · ".join(
                    filter(None, [field.help_text, f"{template.name}: {_describe(parameter)}"])
                )

    def parameter_fields(self) -> list:
        return [self[name] for name in self.fields if name.startswith("param_")]

    def command_parameters(self) -> dict:
        """The filled-in parameter fields, by parameter name (the service checks them
        against the chosen template)."""
        return {
            name.removeprefix("param_"): value
            for name, value in self.cleaned_data.items()
            if name.startswith("param_") and value not in (None, "")
        }

    def clean_method(self) -> str:
        return self.cleaned_data.get("method") or TrainingMethod.SFT

    def clean(self):
        data = super().clean()
        preset_model = PRESETS.get(data.get("preset") or "", {}).get("base_model")
        text_model = (data.get("base_model") or preset_model) in TEXT_PRESET_MODELS
        if (
            data.get("method") == TrainingMethod.SFT
            and data.get("backend") != Backend.OPENAI
            and data.get("dataset_version") in self.with_images
            and text_model
        ):
            self.add_error("preset", IMAGES_NEED_VISION)
        return data

    def hyperparameters(self) -> dict:
        """The filled-in hyperparameters of the chosen method. A field the method has no use
        for (epochs for GRPO, group size for SFT) is passed on too, so the service refuses it
        by name rather than ignore it."""
        grpo = self.cleaned_data.get("method") == TrainingMethod.GRPO
        names = self.ADVANCED + self.GRPO if grpo else self.ADVANCED
        out = {}
        for name in names:
            value = self.cleaned_data.get(name)
            if value in (None, ""):
                continue
            if name == "lora":
                value = value == "true"
            out[name] = value
        if not grpo:
            for name in self.GRPO:
                if self.cleaned_data.get(name) not in (None, ""):
                    out[name] = self.cleaned_data[name]
        return out


def _describe(parameter) -> str:
    """A parameter's type and bounds in a few words, for its field's help."""
    if parameter.type == "choice":
        text = " | ".join(parameter.choices)
    elif parameter.type in ("integer", "number"):
        bounds = [f">= {parameter.min:g}" if parameter.min is not None else ""]
        bounds.append(f"<= {parameter.max:g}" if parameter.max is not None else "")
        text = " ".join([parameter.type, *filter(None, bounds)])
    else:
        text = "text"
    if parameter.required:
        text += ", required"
    if parameter.default is not None:
        text += f", default {parameter.default}"
    return f"{text}{'. ' + parameter.help if parameter.help else ''}"


class EvaluateForm(forms.Form):
    """Where the trained model is served (as the page's vLLM command starts it), and the
    base model's endpoint to compare with."""

    base_url = forms.CharField(
        max_length=500,
        required=False,
        initial="http://127.0.0.1:8001/v1",
        label="Served at (base URL; blank: the model's server started here)",
    )
    api_key_env = forms.CharField(max_length=100, required=False, label="API key variable")
    base_endpoint = forms.ChoiceField(
        required=False, label="Base model endpoint (for before/after)"
    )
    trials = forms.IntegerField(min_value=1, max_value=20, initial=3)

    def __init__(self, *args, endpoints=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["base_endpoint"].choices = [("", "—")] + [
            (str(e.pk), f"{e.name} ({e.model})") for e in endpoints
        ]
