from django import template

register = template.Library()


@register.filter
def pct(value) -> str:
    """0.8333 → "83%"; None (nothing graded) → "—"."""
    if value is None or value == "":
        return "—"
    return f"{float(value) * 100:.0f}%"


@register.filter
def score(value) -> str:
    if value is None or value == "":
        return "—"
    return f"{float(value):.2f}"


@register.filter
def at(mapping, key):
    """``mapping|at:k`` for dicts keyed by int or str (pass@k tables)."""
    if not mapping:
        return None
    if key in mapping:
        return mapping[key]
    return mapping.get(str(key))
