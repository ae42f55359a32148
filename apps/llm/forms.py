from django import forms

from apps.llm.models import ModelEndpoint
from apps.llm.services import EDITABLE_FIELDS


class ModelEndpointForm(forms.ModelForm):
    class Meta:
        model = ModelEndpoint
        fields = list(EDITABLE_FIELDS)
        labels = {"base_url": "Base URL"}
        widgets = {
            "base_url": forms.URLInput(attrs={"placeholder": "https://api.openai.com/v1"}),
            "model": forms.TextInput(attrs={"placeholder": "gpt-4.1-mini"}),
            "api_key_env": forms.TextInput(
                attrs={"placeholder": "OPENAI_API_KEY", "autocomplete": "off", "class": "mono"}
            ),
            "temperature": forms.NumberInput(attrs={"step": "0.05"}),
            "request_timeout_s": forms.NumberInput(attrs={"step": "any"}),
        }

    def clean_api_key_env(self):
        return self.cleaned_data["api_key_env"].strip()

    def clean_base_url(self):
        return self.cleaned_data["base_url"].strip()


class ProjectJudgeForm(forms.Form):
    endpoint = forms.ModelChoiceField(
        queryset=ModelEndpoint.objects.none(),
        required=False,
        label="Judge endpoint",
        empty_label="No judge (judge graders are skipped)",
        help_text="Scores the rubric of every judge grader in runs, re-grades and validation. "
        "Use a strong model at temperature 0; a run batch may choose another.",
    )

    def __init__(self, *args, project, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["endpoint"].queryset = ModelEndpoint.objects.filter(project=project).order_by(
            "name"
        )
