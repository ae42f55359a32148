from django import forms

from apps.capabilities.models import (
    DESCRIPTION_MAX_LENGTH,
    EXAMPLE_MAX_LENGTH,
    EXAMPLES_MAX,
    GUIDANCE_MAX_LENGTH,
    Capability,
)
from apps.core.text import count_of


class CapabilityForm(forms.Form):
    name = forms.CharField(max_length=120)
    slug = forms.SlugField(
        max_length=80,
        required=False,
        help_text="How specs name it (tasks[].capabilities). Leave blank to derive from the name.",
    )
    group = forms.CharField(
        max_length=60,
        required=False,
        help_text="Capabilities are listed by group, e.g. “Coordination” or “Policy and safety”.",
    )
    description = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}), required=False, max_length=DESCRIPTION_MAX_LENGTH
    )
    guidance = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 5}),
        required=False,
        max_length=GUIDANCE_MAX_LENGTH,
        help_text=Capability._meta.get_field("guidance").help_text
        + " Traps to seed, graders that catch a failure.",
    )
    examples = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 4}),
        required=False,
        help_text="Example user requests, one per line.",
    )

    @classmethod
    def for_capability(
        cls, capability: Capability, data=None, *, tasks_using: int = 0
    ) -> "CapabilityForm":
        """An edit form; the slug is locked while tasks use it (it is part of their specs)."""
        initial = {
            "name": capability.name,
            "slug": capability.slug,
            "group": capability.group,
            "description": capability.description,
            "guidance": capability.guidance,
            "examples": "\n".join(capability.examples),
        }
        form = cls(data, initial=initial)
        if tasks_using:
            form.fields["slug"].disabled = True
            form.fields["slug"].help_text = (
                f"Locked: {count_of(tasks_using, 'task')} "
                f"{'uses' if tasks_using == 1 else 'use'} this capability and their specs "
                "name it by this slug."
            )
        return form

    def clean_examples(self) -> list[str]:
        examples = [
            line.strip() for line in self.cleaned_data["examples"].splitlines() if line.strip()
        ]
        if len(examples) > EXAMPLES_MAX:
            raise forms.ValidationError(f"At most {EXAMPLES_MAX} examples.")
        if any(len(example) > EXAMPLE_MAX_LENGTH for example in examples):
            raise forms.ValidationError(f"Each example is at most {EXAMPLE_MAX_LENGTH} characters.")
        return examples
