from django import template

register = template.Library()


@register.filter
def delta_pct(value) -> str:
    """A difference of two rates as signed percentage points: +12.5 pp, -3.0 pp, —."""
    if value is None:
        return "—"
    points = value * 100
    sign = "+" if points > 0 else ("-" if points < 0 else "±")
    return f"{sign}{abs(points):.1f} pp"


@register.filter
def delta_class(value) -> str:
    if value is None or abs(value) < 1e-9:
        return "delta-flat"
    return "delta-up" if value > 0 else "delta-down"


@register.filter
def sig(value) -> str:
    """A float in at most four significant digits (``0.0003``, not the float's full repr
    ``0.00030000000000000003``); anything else as it is."""
    if isinstance(value, float):
        return f"{value:.4g}"
    return value
