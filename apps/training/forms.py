"""Forms of the training pages: launch (presets, folded advanced hyperparameters), command
templates, and the evaluation of a trained model."""

from django import forms

from apps.training.hyperparameters import PRESETS, SCHEDULERS, integer_bounds
from apps.training.models import Backend, TemplateKind

PRESET_CHOICES = [("", "None (set everything below)")] + [
    (key, preset["label"]) for key, preset in PRESETS.items()
]


class LaunchForm(forms.Form):
    """Blank advanced fields take the preset's value (or the default)."""

    name = forms.CharField(max_length=200, required=False)
    dataset_version = forms.ChoiceField(label="Dataset version")
    backend = forms.ChoiceField(choices=Backend.choices, initial=Backend.LOCAL)
    preset = forms.ChoiceField(choices=PRESET_CHOICES, required=False, initial="tiny-cpu")
    base_model = forms.CharField(
        max_length=300,
        required=False,
        help_text="A Hugging Face id, a local path, or preset:tiny-qwen2. Blank: the preset's.",
    )
    eval_on_validation = forms.BooleanField(
        required=False, initial=True, label="Evaluate on the validation split"
    )
    endpoint = forms.ChoiceField(required=False, label="Fine-tuning API (openai backend)")
    command_template = forms.ChoiceField(required=False, label="Command template (command backend)")
    # Advanced (folded): blank means the preset's value.
    epochs = forms.FloatField(required=False)
    max_steps = forms.IntegerField(
        required=False, **integer_bounds("max_steps"), help_text="> 0 overrides epochs."
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

    def __init__(self, *args, versions=(), endpoints=(), templates=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["dataset_version"].choices = [("", "Choose…")] + [
            (str(v.pk), f"{v.dataset.name} v{v.number} ({v.train_rows} train rows)")
            for v in versions
        ]
        self.fields["endpoint"].choices = [("", "—")] + [(str(e.pk), e.name) for e in endpoints]
        self.fields["command_template"].choices = [("", "—")] + [
            (str(t.pk), t.name) for t in templates
        ]

    def hyperparameters(self) -> dict:
        out = {}
        for name in self.ADVANCED:
            value = self.cleaned_data.get(name)
            if value in (None, ""):
                continue
            if name == "lora":
                value = value == "true"
            out[name] = value
        return out


class CommandTemplateForm(forms.Form):
    name = forms.CharField(max_length=80)
    kind = forms.ChoiceField(choices=TemplateKind.choices)
    template = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}))


class EvaluateForm(forms.Form):
    """Where the trained model is served (as the page's vLLM command starts it), and the
    base model's endpoint to compare with."""

    base_url = forms.CharField(
        max_length=500, initial="http://127.0.0.1:8001/v1", label="Served at (base URL)"
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
