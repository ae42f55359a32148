from django import forms

from apps.capabilities.models import Capability
from apps.core.safeinput import INT32_MAX
from apps.datasets.models import DESCRIPTION_MAX_LENGTH, MAX_VALIDATION_FRACTION, DatasetKind
from apps.datasets.services import PromptFilter, VersionFilter
from apps.datasets.services.datasets import tokenizer_choices
from apps.datasets.services.prompts import MAX_SEED, MAX_SEEDS, SERVED_STATUSES
from apps.environments.models import Environment


class DatasetForm(forms.Form):
    name = forms.CharField(max_length=120, help_text="Unique in this project.")
    description = forms.CharField(
        required=False,
        max_length=DESCRIPTION_MAX_LENGTH,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="What it is for; it opens the dataset card.",
    )
    tokenizer = forms.ChoiceField(
        required=False,
        help_text="Counts the tokens of each version's rows. The choices are the tokenizers "
        "configured on this server (DATASET_TOKENIZERS); without one, tokens are estimated.",
    )

    def __init__(self, *args, creating: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["tokenizer"].choices = tokenizer_choices()
        if creating:  # a dataset keeps its kind
            self.fields["kind"] = forms.ChoiceField(
                choices=DatasetKind.choices,
                initial=DatasetKind.SFT,
                required=False,
                widget=forms.RadioSelect,
                help_text="SFT versions hold approved demonstrations; RL prompt versions hold "
                "environment tasks and seeds, exported for trainers that roll out themselves "
                "(TRL GRPO, verl, NeMo Gym, verifiers).",
            )

    def clean_kind(self) -> str:
        return self.cleaned_data.get("kind") or DatasetKind.SFT


class VersionForm(forms.Form):
    capabilities = forms.MultipleChoiceField(
        required=False,
        widget=forms.SelectMultiple(attrs={"size": 6}),
        help_text="Demonstrations that exercise any of these (none: all).",
    )
    environments = forms.ModelMultipleChoiceField(
        queryset=Environment.objects.none(),
        required=False,
        widget=forms.SelectMultiple(attrs={"size": 6}),
        help_text="Only these environments (none: all).",
    )
    min_score = forms.FloatField(
        required=False, min_value=0, max_value=1, help_text="The current version's task score."
    )
    min_agreement = forms.FloatField(
        required=False,
        min_value=0,
        max_value=1,
        label="Min reviewer agreement",
        help_text="Pairwise agreement of the reviewers; demonstrations with one reviewer have "
        "none and are left out when this is set.",
    )
    seed = forms.IntegerField(
        initial=0,
        min_value=0,
        max_value=INT32_MAX,
        help_text="Decides the split and the row order.",
    )
    validation_fraction = forms.FloatField(
        initial=0.1,
        min_value=0,
        max_value=MAX_VALIDATION_FRACTION,
        help_text="Share of rows held out, by whole environments.",
    )

    def __init__(self, *args, project, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["capabilities"].choices = [
            (c.slug, f"{c.name} ({c.slug})")
            for c in Capability.objects.filter(project=project, archived_at__isnull=True).order_by(
                "name"
            )
        ]
        self.fields["environments"].queryset = Environment.objects.filter(project=project).order_by(
            "name"
        )

    def service_arguments(self) -> dict:
        data = self.cleaned_data
        return {
            "filters": VersionFilter(
                capabilities=tuple(data["capabilities"]),
                environments=tuple(env.pk for env in data["environments"]),
                min_score=data["min_score"],
                min_agreement=data["min_agreement"],
            ),
            "seed": data["seed"],
            "validation_fraction": data["validation_fraction"],
        }


class PromptVersionForm(forms.Form):
    """A version of an RL prompt dataset: which train tasks, with which seeds."""

    capabilities = forms.MultipleChoiceField(
        required=False,
        widget=forms.SelectMultiple(attrs={"size": 6}),
        help_text="Tasks that exercise any of these (none: all).",
    )
    environments = forms.ModelMultipleChoiceField(
        queryset=Environment.objects.none(),
        required=False,
        widget=forms.SelectMultiple(attrs={"size": 6}),
        help_text="Only these valid or approved environments (none: all of them).",
    )
    seeds = forms.CharField(
        initial="0",
        max_length=800,
        help_text=f"One row per train task and seed: up to {MAX_SEEDS} integers, comma "
        "separated. A trainer resets the task with the row's seed.",
    )

    def __init__(self, *args, project, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["capabilities"].choices = [
            (c.slug, f"{c.name} ({c.slug})")
            for c in Capability.objects.filter(project=project, archived_at__isnull=True).order_by(
                "name"
            )
        ]
        self.fields["environments"].queryset = Environment.objects.filter(
            project=project, status__in=SERVED_STATUSES
        ).order_by("name")

    def clean_seeds(self) -> tuple[int, ...]:
        parts = [p.strip() for p in self.cleaned_data["seeds"].split(",") if p.strip()]
        if not parts:
            raise forms.ValidationError("Give at least one seed.")
        if not all(p.isdigit() and int(p) <= MAX_SEED for p in parts):
            raise forms.ValidationError(f"Seeds are integers from 0 to {MAX_SEED}.")
        seeds = tuple(int(p) for p in parts)
        if len(seeds) > MAX_SEEDS:
            raise forms.ValidationError(f"At most {MAX_SEEDS} seeds.")
        if len(set(seeds)) != len(seeds):
            raise forms.ValidationError("Each seed once.")
        return seeds

    def service_arguments(self) -> dict:
        data = self.cleaned_data
        return {
            "filters": PromptFilter(
                capabilities=tuple(data["capabilities"]),
                environments=tuple(env.pk for env in data["environments"]),
                seeds=data["seeds"],
            )
        }
