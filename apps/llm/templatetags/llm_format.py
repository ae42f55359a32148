import json

from django import template

register = template.Library()


@register.filter
def pretty_json(value) -> str:
    """Indented JSON text (the template escapes it like any other string)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return value
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


@register.filter
def is_text(value) -> bool:
    return isinstance(value, str)
