"""Forms of the environment pages."""

from django import forms

from apps.environments.services.imports import human_size, max_upload_bytes

# --- browse: import ------------------------------------------------------------------------


class EnvironmentImportForm(forms.Form):
    """Either a file (a .json spec or a .zip of them) or pasted JSON, not both."""

    file = forms.FileField(
        required=False,
        label="Spec file",
        help_text="A .json spec, or a .zip of .json specs (at most 200).",
        widget=forms.ClearableFileInput(attrs={"accept": ".json,.zip,application/json"}),
    )
    text = forms.CharField(
        required=False,
        label="…or paste a spec",
        strip=False,
        widget=forms.Textarea(
            attrs={"rows": 12, "spellcheck": "false", "class": "mono", "placeholder": "{ … }"}
        ),
    )
    validate = forms.BooleanField(
        required=False,
        initial=True,
        label="Validate after importing",
        help_text="Queues a validation job so the status is known in a minute.",
    )

    def clean(self):
        data = super().clean()
        upload, text = data.get("file"), data.get("text", "")
        if upload and text.strip():
            raise forms.ValidationError("Upload a file or paste JSON, not both.")
        if not upload and not text.strip():
            raise forms.ValidationError("Choose a file to upload or paste a spec.")
        if upload:
            limit = max_upload_bytes()
            if upload.size > limit:
                self.add_error(
                    "file",
                    f"This file is {human_size(upload.size)}; the limit is {human_size(limit)}.",
                )
            elif not upload.name.lower().endswith((".json", ".zip")):
                self.add_error("file", "Upload a .json spec or a .zip of .json specs.")
        return data
