from django import forms
from django.conf import settings

from apps.serving.services import MAX_IDLE_TIMEOUT_S


class StartForm(forms.Form):
    """What to serve: a trained model of the project (the training page's Serve button
    names it) or a hub id / a folder on the gpu worker (e.g. the base model)."""

    trained_model = forms.IntegerField(
        required=False, min_value=1, max_value=2**63 - 1, widget=forms.HiddenInput
    )
    model_path = forms.CharField(
        max_length=500,
        required=False,
        label="Model (hub id or folder on the worker)",
        help_text="e.g. Qwen/Qwen2.5-0.5B-Instruct, or the base model of a before/after.",
    )
    idle_timeout_s = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=MAX_IDLE_TIMEOUT_S,
        label="Stop after idle (seconds, 0: never)",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["idle_timeout_s"].initial = settings.SERVING_IDLE_TIMEOUT_S
