"""The JSON Schema of ``coworkenv.environment/v1`` and the problems it finds in a document
(with pointers and hints), bounds first; ``spec`` builds on it."""

from __future__ import annotations

import json
import math
from functools import lru_cache
from importlib import resources
from typing import Any

from .bounds import document_problems
from .formats import compile_validator
from .problems import Problem, error, pointer

MAX_SCHEMA_PROBLEMS = 50


@lru_cache(maxsize=1)
def _schema_text() -> str:
    return (resources.files(__package__) / "schema" / "environment.v1.json").read_text("utf-8")


@lru_cache(maxsize=1)
def _schema_validator():
    return compile_validator(json.loads(_schema_text()))


def spec_json_schema() -> dict:
    """A fresh copy of the JSON Schema (safe for the caller to mutate)."""
    return json.loads(_schema_text())


def schema_problems(doc: Any) -> list[Problem]:
    """Problems from the JSON Schema alone (empty when the document validates)."""
    if not isinstance(doc, dict):
        return [
            error(
                "not_an_object",
                "",
                f"The document is a JSON {json_type(doc)}, not an object.",
                'Send one JSON object with "schema": "coworkenv.environment/v1".',
            )
        ]
    bounds = document_problems(doc)
    if bounds:
        return bounds
    not_json = _not_json(doc)
    if not_json:
        return not_json
    errors = sorted(
        _schema_validator().iter_errors(doc), key=lambda e: [str(p) for p in e.absolute_path]
    )
    problems = []
    for err in errors[:MAX_SCHEMA_PROBLEMS]:
        path = list(err.absolute_path)
        if err.validator == "additionalProperties" and isinstance(err.instance, dict):
            allowed = set(err.schema.get("properties", {}))
            extra = sorted(k for k in err.instance if k not in allowed)
            if extra:
                path = [*path, extra[0]]
        problems.append(error("schema_invalid", pointer(*path), err.message, _hint(err)))
    if len(errors) > MAX_SCHEMA_PROBLEMS:
        problems.append(
            error(
                "schema_invalid",
                "",
                f"{len(errors) - MAX_SCHEMA_PROBLEMS} further schema errors were not listed.",
                "Fix the listed errors first.",
            )
        )
    return problems


def _not_json(doc: Any) -> list[Problem]:
    """NaN/Infinity (which Python's json accepts) and non-JSON Python values, by pointer."""
    try:
        json.dumps(doc, allow_nan=False)
        return []
    except RecursionError:
        return [error("json_too_deep", "", "The document nests too deeply.", "Flatten it.")]
    except (TypeError, ValueError):
        pass
    found: list[Problem] = []

    def walk(value: Any, path: tuple) -> None:
        if len(found) >= MAX_SCHEMA_PROBLEMS:
            return
        if isinstance(value, float) and not math.isfinite(value):
            found.append(
                error(
                    "schema_invalid",
                    pointer(*path),
                    f"{value} is not a JSON number.",
                    "Use a finite number (NaN and Infinity are not JSON).",
                )
            )
        elif isinstance(value, dict):
            for k, v in value.items():
                if not isinstance(k, str):
                    found.append(
                        error(
                            "schema_invalid",
                            pointer(*path),
                            f"Key {k!r} is not a string.",
                            "JSON object keys are strings.",
                        )
                    )
                else:
                    walk(v, (*path, k))
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, (*path, i))
        elif value is not None and not isinstance(value, (str, int, float, bool)):
            found.append(
                error(
                    "schema_invalid",
                    pointer(*path),
                    f"A {type(value).__name__} is not a JSON value.",
                    "Use JSON values only.",
                )
            )

    walk(doc, ())
    return found


def _hint(err: Any) -> str:
    v = err.validator
    if v == "required":
        return "Add the missing field."
    if v == "additionalProperties":
        allowed = ", ".join(sorted(err.schema.get("properties", {})))
        return f"Remove the unknown key; allowed keys here: {allowed}." if allowed else ""
    if v == "enum":
        return "Use one of: " + ", ".join(json.dumps(x) for x in err.validator_value) + "."
    if v == "const":
        return f"Set it to {json.dumps(err.validator_value)}."
    if v == "type":
        return f"Use a JSON {err.validator_value}."
    if v == "pattern":
        return f"Match the pattern {err.validator_value}."
    if v == "format":
        return f"Use a valid {err.validator_value} (e.g. 2026-03-02T09:00:00Z)."
    if v is False or err.schema is False:
        return "Remove this key: it does not apply here (see the op or kind)."
    if v in ("minItems", "minLength"):
        return "Add at least one item." if v == "minItems" else "Use a non-empty string."
    if v in ("oneOf", "anyOf"):
        return "Give exactly one of the alternatives the schema lists."
    return ""


def json_type(value: Any) -> str:
    """The JSON type a value has (a Python value outside JSON: its class's name)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else type(value).__name__
