from django import forms

from apps.core.forms import IdModelChoiceField
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

    # context management is optional: a form that leaves it out keeps the model's defaults
    OPTIONAL_WITH_DEFAULT = ("context_tokens", "context_strategy", "keep_tool_results")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name in self.OPTIONAL_WITH_DEFAULT:
            self.fields[name].required = False

    def _default_if_empty(self, name):
        value = self.cleaned_data.get(name)
        if value in (None, ""):
            return ModelEndpoint._meta.get_field(name).get_default()
        return value

    def clean_context_tokens(self):
        return self._default_if_empty("context_tokens")

    def clean_context_strategy(self):
        return self._default_if_empty("context_strategy")

    def clean_keep_tool_results(self):
        return self._default_if_empty("keep_tool_results")

    def clean_api_key_env(self):
        return self.cleaned_data["api_key_env"].strip()

    def clean_base_url(self):
        return self.cleaned_data["base_url"].strip()


class ProjectJudgeForm(forms.Form):
    endpoint = IdModelChoiceField(
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
