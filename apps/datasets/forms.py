from django import forms

from apps.capabilities.models import Capability
from apps.core.safeinput import INT32_MAX
from apps.datasets.models import DESCRIPTION_MAX_LENGTH, MAX_VALIDATION_FRACTION
from apps.datasets.services import VersionFilter
from apps.datasets.services.datasets import tokenizer_choices
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

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["tokenizer"].choices = tokenizer_choices()


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


class RolloutVersionForm(forms.Form):
    """A scored-rollout version: which student batches' groups, under which variant."""

    batches = forms.ModelMultipleChoiceField(
        queryset=RunBatch.objects.none(),
        widget=forms.SelectMultiple(attrs={"size": 8}),
        help_text="Student batches started with a group size; their scored groups.",
    )
    reward = forms.ChoiceField(choices=list(REWARD_LABELS.items()), initial="score")
    advantage = forms.ChoiceField(choices=list(ADVANTAGE_LABELS.items()), initial="grpo")
    credit = forms.ChoiceField(
        choices=list(CREDIT_LABELS.items()),
        initial="trajectory",
        help_text="Per turn and per call take the score reward and grpo or dr_grpo.",
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
