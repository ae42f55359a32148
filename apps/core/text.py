"""Words for people: counts with the right plural form ("1 problem", "3 problems")."""


def noun_for(n: int, singular: str, plural: str | None = None) -> str:
    """The noun alone in the form that agrees with ``n``: ``noun_for(2, "key")`` is "keys"."""
    return singular if n == 1 else (plural or singular + "s")


def count_of(n: int, singular: str, plural: str | None = None) -> str:
    """``n`` and the noun in the form that agrees with it: ``count_of(1, "task")`` is
    "1 task", ``count_of(2, "task")`` "2 tasks", ``count_of(2, "reply", "replies")``
    "2 replies"."""
    return f"{n} {noun_for(n, singular, plural)}"
