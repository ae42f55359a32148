from django import forms

from apps.core.safeinput import INT32_MAX
from apps.curation.models import MAX_REVIEWS_REQUIRED, Decision
from apps.curation.services.reviews import MAX_COMMENT


class DecisionForm(forms.Form):
    decision = forms.ChoiceField(choices=Decision.choices)
    reason_tags = forms.MultipleChoiceField(
        required=False, widget=forms.CheckboxSelectMultiple, label="Reasons"
    )
    comment = forms.CharField(
        required=False, max_length=MAX_COMMENT, widget=forms.Textarea(attrs={"rows": 3})
    )

    def __init__(self, *args, tags=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["reason_tags"].choices = [(t.name, t.name) for t in tags]


class CorrectionForm(forms.Form):
    """One edit of the current version (the page posts one edit at a time)."""

    op = forms.ChoiceField(
        choices=[("edit", "Edit text"), ("weight", "Set weight"), ("truncate", "Drop from here")]
    )
    index = forms.IntegerField(min_value=0, max_value=INT32_MAX)
    content = forms.CharField(required=False, strip=False, widget=forms.Textarea)
    weight = forms.TypedChoiceField(
        required=False, choices=[("0", "0"), ("1", "1")], coerce=int, empty_value=None
    )
    note = forms.CharField(required=False, max_length=500)

    def edit(self) -> dict:
        data = self.cleaned_data
        edit = {"op": data["op"], "index": data["index"]}
        if data["op"] == "edit":
            edit["content"] = data.get("content") or ""
        elif data["op"] == "weight":
            edit["weight"] = data.get("weight")
        return edit


class CurationSettingsForm(forms.Form):
    pass_threshold = forms.FloatField(
        min_value=0.0,
        max_value=1.0,
        help_text="A teacher run that scores at least this becomes a demonstration.",
    )
    strict_only = forms.BooleanField(
        required=False, help_text="Only runs where every grader passed."
    )
    reviews_required = forms.IntegerField(
        min_value=1,
        max_value=MAX_REVIEWS_REQUIRED,
        help_text="Reviewers per demonstration, blind to each other; 2 or more gives an "
        "agreement figure.",
    )


class ReasonTagForm(forms.Form):
    name = forms.CharField(max_length=60)
    description = forms.CharField(max_length=300, required=False)
