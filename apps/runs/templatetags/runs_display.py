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
def compare_label(other, run) -> str:
    """A Compare option that tells runs apart: id, batch, policy (and model when it says more),
    trial, score and outcome, e.g. "#12 · batch #3 · oracle · trial 2 · 1.00 passed"."""
    policy = other.policy_name or "—"
    if other.model and other.model != other.policy_name:
        policy = f"{policy} ({other.model})"
    trial = f"trial {other.trial}" + (f" attempt {other.attempt}" if other.attempt > 1 else "")
    if other.passed is None:
        outcome = other.get_status_display().lower()
    else:
        outcome = "passed" if other.passed else "failed"
    if other.score is not None:
        outcome = f"{score(other.score)} {outcome}"
    batch = "this batch" if other.batch_id == run.batch_id else f"batch #{other.batch_id}"
    return " · ".join([f"#{other.pk}", batch, policy, trial, outcome])


@register.filter
def at(mapping, key):
    """``mapping|at:k`` for dicts keyed by int or str (pass@k tables)."""
    if not mapping:
        return None
    if key in mapping:
        return mapping[key]
    return mapping.get(str(key))
