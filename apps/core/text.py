"""Words for people: counts with the right plural form ("1 problem", "3 problems")."""


def count_of(n: int, singular: str, plural: str | None = None) -> str:
    """``n`` and the noun in the form that agrees with it: ``count_of(1, "task")`` is
    "1 task", ``count_of(2, "task")`` "2 tasks", ``count_of(2, "reply", "replies")``
    "2 replies"."""
    return f"{n} {singular if n == 1 else (plural or singular + 's')}"
