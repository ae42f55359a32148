from django import forms

from apps.capabilities.models import Capability
from apps.core.forms import IdModelChoiceField, IdModelMultipleChoiceField
from apps.core.safeinput import INT32_MAX
from apps.environments.models import Environment, EnvironmentStatus, Split
from apps.llm.models import ModelEndpoint
from apps.runs.models import (
    MAX_ATTEMPTS,
    MAX_CONCURRENCY,
    MAX_GROUP_SIZE,
    MAX_TEMPERATURE,
    MAX_TRIALS,
    PolicyKind,
    RunRole,
    UserSide,
)
from apps.runs.services import BatchSettings, TaskSelection
from apps.runs.services.batches import DEFAULT_STATUSES

ORACLE = "oracle"
RUNNABLE_STATUSES = [
    (value, label) for value, label in EnvironmentStatus.choices if value != "archived"
]


class RunBatchForm(forms.Form):
    """Start a batch: which tasks, which policy, how many trials, and the run's bounds."""

    name = forms.CharField(max_length=200, required=False, help_text="Optional; one is made up.")
    policy = forms.ChoiceField(
        help_text="The oracle replays each task's reference solution (no LLM)."
    )
    role = forms.ChoiceField(choices=RunRole.choices, initial=RunRole.EVAL)
    environments = IdModelMultipleChoiceField(
        queryset=Environment.objects.none(),
        required=False,
        help_text="None chosen: every environment with a chosen status.",
        widget=forms.SelectMultiple(attrs={"size": 6}),
    )
    capabilities = forms.MultipleChoiceField(
        required=False,
        help_text="Only tasks that exercise one of these.",
        widget=forms.SelectMultiple(attrs={"size": 6}),
    )
    split = forms.ChoiceField(choices=[("", "Any split"), *Split.choices], required=False)
    statuses = forms.MultipleChoiceField(
        label="Environment status",
        choices=RUNNABLE_STATUSES,
        initial=list(DEFAULT_STATUSES),
        widget=forms.CheckboxSelectMultiple,
    )
    trials = forms.IntegerField(
        min_value=1, max_value=MAX_TRIALS, initial=1, help_text="k: runs per task."
    )
    group_size = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_GROUP_SIZE,
        label="Group size G",
        help_text="Student batches: G samples per task, scored as one rollout group (rewards "
        "and advantages side by side). Leave trials at 1.",
    )
    temperature = forms.FloatField(
        required=False,
        min_value=0.0,
        max_value=MAX_TEMPERATURE,
        label="Temperature T",
        help_text="The agent's sampling temperature; empty: the endpoint's.",
        widget=forms.NumberInput(attrs={"step": "0.05"}),
    )
    discount = forms.FloatField(
        required=False,
        min_value=0.0,
        max_value=1.0,
        initial=1.0,
        label="Discount (gamma)",
        help_text="Of the groups' per-turn and per-call reward-to-go; empty: 1.",
        widget=forms.NumberInput(attrs={"step": "0.05"}),
    )
    concurrency = forms.IntegerField(
        min_value=1, max_value=MAX_CONCURRENCY, initial=4, help_text="Runs in flight at once."
    )
    max_tool_calls = forms.IntegerField(min_value=1, max_value=1000, initial=50)
    max_rounds_per_turn = forms.IntegerField(
        min_value=1, max_value=200, initial=20, help_text="Model answers per user turn."
    )
    max_attempts = forms.IntegerField(
        min_value=1,
        max_value=MAX_ATTEMPTS,
        initial=3,
        help_text="An errored trial (endpoint down) is re-run up to this many attempts.",
    )
    seed = forms.IntegerField(
        initial=0,
        min_value=0,
        max_value=INT32_MAX - MAX_TRIALS,
        help_text="Seeds the injected faults (trial i: seed+i).",
    )
    faults = forms.BooleanField(
        required=False, initial=True, label="Inject the tools' declared faults"
    )
    user_side = forms.ChoiceField(choices=UserSide.choices, initial=UserSide.SCRIPTED)
    simulator_endpoint = IdModelChoiceField(
        queryset=ModelEndpoint.objects.none(),
        required=False,
        label="User simulator endpoint",
        empty_label="—",
        help_text="Plays the task's persona and reveals only what the task allows.",
    )
    judge_endpoint = IdModelChoiceField(
        queryset=ModelEndpoint.objects.none(),
        required=False,
        label="Judge endpoint",
        empty_label="The project's judge",
        help_text="Scores the tasks' judge graders; without any judge they are skipped.",
    )

    def __init__(self, *args, project, **kwargs):
        super().__init__(*args, **kwargs)
        self.project = project
        endpoints = ModelEndpoint.objects.filter(project=project).order_by("name")
        self.endpoints = {str(e.pk): e for e in endpoints}
        self.fields["policy"].choices = [
            (ORACLE, "Oracle (reference solution, no LLM)"),
            *[(pk, f"{e.name} · {e.model}") for pk, e in self.endpoints.items()],
        ]
        self.fields["environments"].queryset = (
            Environment.objects.filter(project=project)
            .exclude(status=EnvironmentStatus.ARCHIVED)
            .order_by("name", "id")
        )
        self.fields["environments"].label_from_instance = lambda env: (
            f"{env.name} ({env.get_status_display().lower()})"
        )
        self.fields["capabilities"].choices = list(
            Capability.objects.filter(project=project, archived_at__isnull=True)
            .order_by("name")
            .values_list("slug", "name")
        )
        self.fields["simulator_endpoint"].queryset = endpoints
        if not self.endpoints:  # only the oracle to choose: say how to run a model
            self.fields[
                "policy"
            ].help_text += " To run a model, add a model endpoint to the project (Endpoints)."
        self.fields["judge_endpoint"].queryset = endpoints

    BOUNDS = (
        "trials",
        "group_size",
        "temperature",
        "discount",
        "concurrency",
        "max_tool_calls",
        "max_rounds_per_turn",
        "max_attempts",
        "seed",
    )

    def bound_fields(self):
        return [self[name] for name in self.BOUNDS]

    def clean(self):
        data = super().clean()
        if data.get("user_side") == UserSide.SIMULATOR and not data.get("simulator_endpoint"):
            self.add_error("simulator_endpoint", "Choose the endpoint that plays the user.")
        if data.get("group_size") is not None:
            if data.get("role") != RunRole.STUDENT:
                self.add_error("group_size", "Rollout groups are for the student role.")
            if data.get("trials") not in (None, 1):
                self.add_error("trials", "Leave at 1 with a group size: G samples are the trials.")
        return data

    def service_arguments(self) -> dict:
        data = self.cleaned_data
        endpoint = self.endpoints.get(data["policy"])
        return {
            "name": data["name"],
            "policy_kind": PolicyKind.ORACLE if endpoint is None else PolicyKind.ENDPOINT,
            "endpoint": endpoint,
            "role": data["role"],
            "selection": TaskSelection(
                environments=tuple(env.pk for env in data["environments"]),
                capabilities=tuple(data["capabilities"]),
                split=data["split"],
                statuses=tuple(data["statuses"]),
            ),
            "settings": BatchSettings(
                trials=data["trials"],
                concurrency=data["concurrency"],
                max_tool_calls=data["max_tool_calls"],
                max_rounds_per_turn=data["max_rounds_per_turn"],
                faults=data["faults"],
                user_side=data["user_side"],
                simulator_endpoint=data.get("simulator_endpoint"),
                judge_endpoint=data.get("judge_endpoint"),
                seed=data["seed"],
                max_attempts=data["max_attempts"],
                group_size=data.get("group_size"),
                temperature=data.get("temperature"),
                discount=data["discount"] if data.get("discount") is not None else 1.0,
            ),
        }
