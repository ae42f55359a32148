"""JSON Schema helpers: a stdlib-only format checker and a cache of compiled validators."""

from __future__ import annotations

import re
from datetime import date, datetime
from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker

FORMAT_CHECKER = FormatChecker(formats=())

_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


@FORMAT_CHECKER.checks("date-time", raises=ValueError)
def _is_datetime(value: object) -> bool:
    if not isinstance(value, str):
        return True
    if "T" not in value and "t" not in value:
        raise ValueError("a date-time needs a 'T' between date and time")
    datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    return True


@FORMAT_CHECKER.checks("date", raises=ValueError)
def _is_date(value: object) -> bool:
    if isinstance(value, str):
        date.fromisoformat(value)
    return True


@FORMAT_CHECKER.checks("email")
def _is_email(value: object) -> bool:
    return not isinstance(value, str) or bool(_EMAIL.match(value))


@lru_cache(maxsize=1)
def _meta_validator() -> Draft202012Validator:
    return Draft202012Validator(Draft202012Validator.META_SCHEMA)


@lru_cache(maxsize=2048)
def _schema_problem(schema_json: str) -> str | None:
    import json

    from jsonschema.exceptions import best_match

    err = best_match(_meta_validator().iter_errors(json.loads(schema_json)))
    return None if err is None else err.message


def schema_problem(schema: Any) -> str | None:
    """Why ``schema`` is not a valid draft 2020-12 schema, or None when it is."""
    import json

    try:
        text = json.dumps(schema, sort_keys=True)
    except (TypeError, ValueError) as exc:
        return f"not JSON: {exc}"
    return _schema_problem(text)


def compile_validator(schema: dict) -> Draft202012Validator:
    return Draft202012Validator(schema, format_checker=FORMAT_CHECKER)


@lru_cache(maxsize=1024)
def _cached(schema_json: str) -> Draft202012Validator:
    import json

    return compile_validator(json.loads(schema_json))


def validator_for(schema: dict) -> Draft202012Validator:
    """A compiled validator, shared between specs that carry the same schema text."""
    import json

    return _cached(json.dumps(schema, sort_keys=True))
