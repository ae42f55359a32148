import json

from django import forms

EXAMPLE_RECIPE = {
    "name": "Clarify and disambiguate, tiny",
    "capabilities": ["clarify-before-acting", "disambiguate-contacts"],
    "generator": {
        "kind": "template",
        "families": ["meeting-coordination", "support-desk"],
        "horizons": ["short"],
        "count": 2,
        "tasks_per_environment": 3,
        "seed": 1,
    },
    "held_out": {"seeds": 1, "family": "onboarding"},
    "teacher": {"kind": "oracle"},
    "review": {"policy": "approve-strict-passes"},
    "dataset": {"validation_fraction": 0.2, "seed": 0},
    "sft": {"preset": "tiny-cpu"},
    "grpo": {"preset": "tiny-cpu"},
    "evaluation": {"k": 2},
}


class ExperimentForm(forms.Form):
    recipe = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 24, "spellcheck": "false", "class": "mono"}),
        initial=json.dumps(EXAMPLE_RECIPE, indent=2),
        help_text="The recipe as JSON (coworkenv.experiment/v1); a bad field is named.",
    )

    def clean_recipe(self):
        try:
            value = json.loads(self.cleaned_data["recipe"])
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"Not JSON: {exc.msg} (line {exc.lineno}).") from None
        if not isinstance(value, dict):
            raise forms.ValidationError("Give a JSON object.")
        return value
