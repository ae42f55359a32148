from django import forms

from apps.capabilities.models import Capability
from apps.core.forms import IdModelMultipleChoiceField
from apps.core.safeinput import INT32_MAX
from apps.datasets.models import (
    DESCRIPTION_MAX_LENGTH,
    MAX_TOKENS_LIMIT,
    MAX_VALIDATION_FRACTION,
    DatasetKind,
    LongTrajectories,
)
from apps.datasets.services import PromptFilter, VersionFilter
from apps.datasets.services.datasets import tokenizer_choices
from apps.datasets.services.prompts import MAX_SEED, MAX_SEEDS, SERVED_STATUSES
from apps.environments.models import Environment
from apps.runs.models import RunBatch, RunRole
from apps.runs.rollouts import ADVANTAGE_LABELS, CREDIT_LABELS, REWARD_LABELS


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
                help_text="What every version of the dataset holds (fixed once created). SFT: "
                "approved demonstrations; RL prompts: environment tasks and seeds, exported for "
                "trainers that roll out themselves (TRL GRPO, verl, NeMo Gym, verifiers); scored "
                "rollouts: the graded runs of student rollout groups with their rewards and "
                "advantages, for offline RL.",
            )

    def clean_kind(self) -> str:
        return self.cleaned_data.get("kind") or DatasetKind.SFT


class VersionForm(forms.Form):
    capabilities = forms.MultipleChoiceField(
        required=False,
        widget=forms.SelectMultiple(attrs={"size": 6}),
        help_text="Demonstrations that exercise any of these (none: all).",
    )
    environments = IdModelMultipleChoiceField(
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
    max_tokens = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_TOKENS_LIMIT,
        label="Maximum length (tokens)",
        help_text="The longest row the exports may hold, counted with the dataset's tokenizer "
        "(else estimated). Blank: no limit.",
    )
    long_trajectories = forms.ChoiceField(
        required=False,
        choices=LongTrajectories.choices,
        initial=LongTrajectories.SPLIT,
        label="Longer trajectories",
        help_text="Split: one row per turn, the history before it as context (not trained on) "
        "and the turn's assistant steps as targets. Drop: leave them out.",
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
            "max_tokens": data["max_tokens"],
            "long_trajectories": data["long_trajectories"] or LongTrajectories.SPLIT,
        }


class RolloutVersionForm(forms.Form):
    """A scored-rollout version: which student batches' groups, under which variant."""

    batches = IdModelMultipleChoiceField(
        queryset=RunBatch.objects.none(),
        widget=forms.SelectMultiple(attrs={"size": 8}),
        help_text="Student batches started with a group size; their scored groups.",
    )
    reward = forms.ChoiceField(choices=list(REWARD_LABELS.items()), initial="score")
    advantage = forms.ChoiceField(choices=list(ADVANTAGE_LABELS.items()), initial="grpo")
    credit = forms.ChoiceField(
        choices=list(CREDIT_LABELS.items()),
        initial="trajectory",
        help_text=f"Per turn and per call take the reward “{REWARD_LABELS['score']}” and the "
        f"advantage “{ADVANTAGE_LABELS['grpo']}” or “{ADVANTAGE_LABELS['dr_grpo']}”.",
    )

    def __init__(self, *args, project, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["batches"].queryset = RunBatch.objects.filter(
            project=project, role=RunRole.STUDENT, group_size__isnull=False
        ).order_by("-created_at", "-id")
        self.fields["batches"].label_from_instance = lambda b: (
            f"#{b.pk} {b.name} (G={b.group_size}, {b.policy_label})"
        )

    def service_arguments(self) -> dict:
        from apps.runs.rollouts import Variant

        data = self.cleaned_data
        return {
            "batches": [batch.pk for batch in data["batches"]],
            "variant": Variant.parse(data["reward"], data["advantage"], data["credit"]),
        }


class PromptVersionForm(forms.Form):
    """A version of an RL prompt dataset: which train tasks, with which seeds."""

    capabilities = forms.MultipleChoiceField(
        required=False,
        widget=forms.SelectMultiple(attrs={"size": 6}),
        help_text="Tasks that exercise any of these (none: all).",
    )
    environments = IdModelMultipleChoiceField(
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
