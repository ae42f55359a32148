from django import forms

from apps.capabilities.models import Capability
from apps.core.forms import IdModelChoiceField, IdModelMultipleChoiceField
from apps.llm.models import ModelEndpoint
from apps.synthesis.generators import TEMPLATE_FAMILY_CHOICES
from apps.synthesis.models import (
    MAX_ENVIRONMENTS_PER_JOB,
    MAX_REPAIR_ROUNDS,
    MAX_TASKS_PER_ENVIRONMENT,
    MAX_TURNS,
    SCENARIO_HINT_MAX_LENGTH,
    Difficulty,
    Generator,
    Horizon,
)
from coworkenv_engine import library


class SynthesisForm(forms.Form):
    capabilities = IdModelMultipleChoiceField(
        queryset=Capability.objects.none(),
        widget=forms.SelectMultiple(attrs={"size": 8}),
        help_text="Task i of each environment exercises capability i (round-robin).",
    )
    services = forms.MultipleChoiceField(
        choices=[(kind.name, kind.title) for kind in library.KINDS.values()],
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Standard services every environment includes (none: the generator chooses).",
    )
    count = forms.IntegerField(
        label="Environments", min_value=1, max_value=MAX_ENVIRONMENTS_PER_JOB, initial=2
    )
    tasks_per_environment = forms.IntegerField(
        min_value=1, max_value=MAX_TASKS_PER_ENVIRONMENT, initial=3
    )
    turns_min = forms.IntegerField(label="Turns from", min_value=1, max_value=MAX_TURNS, initial=1)
    turns_max = forms.IntegerField(label="Turns to", min_value=1, max_value=MAX_TURNS, initial=3)
    difficulty = forms.ChoiceField(choices=Difficulty.choices, initial=Difficulty.MEDIUM)
    horizon = forms.ChoiceField(
        choices=Horizon.choices,
        initial=Horizon.SHORT,
        help_text="Template generator: how many tasks are multi-day projects (their length "
        "comes from the horizon; the turn range bounds the short tasks).",
    )
    family = forms.ChoiceField(
        choices=[("", "Any (the seed chooses)"), *TEMPLATE_FAMILY_CHOICES],
        required=False,
        initial="",
        help_text="Template generator: the scenario family. Receipts: images the agent must "
        "view (no services; at most 8 tasks).",
    )
    generator = forms.ChoiceField(
        choices=Generator.choices,
        initial=Generator.TEMPLATE,
        widget=forms.RadioSelect,
        help_text="Template: seeded, offline, no LLM. LLM: drafts and repairs with an endpoint.",
    )
    endpoint = IdModelChoiceField(
        queryset=ModelEndpoint.objects.none(),
        required=False,
        empty_label="—",
        help_text="The model that drafts and repairs.",
    )
    max_repair_rounds = forms.IntegerField(
        min_value=0,
        max_value=MAX_REPAIR_ROUNDS,
        initial=3,
        help_text="How often a draft that fails validation is sent back with its problems.",
    )
    domain_hint = forms.CharField(
        max_length=200, required=False, help_text="e.g. “legal operations”."
    )
    scenario_hint = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}),
        required=False,
        max_length=SCENARIO_HINT_MAX_LENGTH,
        help_text="A sentence about the workplace to imagine.",
    )
    seed = forms.IntegerField(
        required=False, min_value=0, max_value=2**31 - 1, help_text="Blank: a random seed."
    )

    def __init__(self, *args, project, prefill=None, **kwargs):
        """``prefill``: a query string's ``capability`` slugs, chosen in an unbound form
        (the coverage page's "Synthesize" links); other projects' slugs are ignored."""
        super().__init__(*args, **kwargs)
        capabilities = Capability.objects.filter(
            project=project, archived_at__isnull=True
        ).order_by("group", "name")
        self.fields["capabilities"].queryset = capabilities
        self.fields["endpoint"].queryset = ModelEndpoint.objects.filter(project=project)
        slugs = prefill.getlist("capability") if prefill is not None else []
        if slugs and not self.is_bound:
            chosen = capabilities.filter(slug__in=slugs[:50]).values_list("pk", flat=True)
            self.initial["capabilities"] = list(chosen)

    def clean(self):
        data = super().clean()
        low, high = data.get("turns_min"), data.get("turns_max")
        if low is not None and high is not None and low > high:
            self.add_error("turns_max", "Must be at least “Turns from”.")
        if data.get("generator") == Generator.LLM and not data.get("endpoint"):
            self.add_error("endpoint", "Choose the model endpoint the LLM generator uses.")
        if data.get("generator") == Generator.LLM and data.get("family"):
            self.add_error("family", "A family is chosen for the template generator only.")
        return data

    def service_kwargs(self) -> dict:
        data = self.cleaned_data
        return {
            "capabilities": list(data["capabilities"]),
            "services": list(data["services"]),
            "count": data["count"],
            "tasks_per_environment": data["tasks_per_environment"],
            "turns": (data["turns_min"], data["turns_max"]),
            "difficulty": data["difficulty"],
            "horizon": data["horizon"],
            "family": data["family"],
            "generator": data["generator"],
            "endpoint": data["endpoint"],
            "max_repair_rounds": data["max_repair_rounds"],
            "domain_hint": data["domain_hint"],
            "scenario_hint": data["scenario_hint"],
            "seed": data["seed"],
        }
