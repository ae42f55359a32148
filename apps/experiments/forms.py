import json

from django import forms
from django.conf import settings

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


RECIPES_DIR = settings.BASE_DIR / "recipes"


def shipped_recipes() -> dict[str, dict]:
    """The recipes the repository ships (``recipes/<name>.json``), by name: ``laptop`` is
    the loop that learns on a CPU, ``gpu-small`` the same on a GPU node."""
    return {
        path.stem: json.loads(path.read_text(encoding="utf-8"))
        for path in sorted(RECIPES_DIR.glob("*.json"))
    }


class ExperimentForm(forms.Form):
    recipe = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 24, "spellcheck": "false", "class": "mono"}),
        initial=json.dumps(EXAMPLE_RECIPE, indent=2),
        help_text="The recipe as JSON (coworkenv.experiment/v1); a bad field is named.",
    )

    def __init__(self, *args, shipped: dict | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        if shipped is not None:
            self.initial["recipe"] = json.dumps(shipped, indent=2)

    def clean_recipe(self):
        try:
            value = json.loads(self.cleaned_data["recipe"])
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"Not JSON: {exc.msg} (line {exc.lineno}).") from None
        if not isinstance(value, dict):
            raise forms.ValidationError("Give a JSON object.")
        return value
