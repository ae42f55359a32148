"""Redaction of every secret this process knows, for whatever a trainer or a scheduler
prints: the log tail, job messages, the recorded command, artifacts.

A training script runs code the server did not write, and its output is shown to project
members. Before any of it is stored or shown, each value the process holds as a secret is
replaced by ``***``: ``SECRET_KEY``, the database, broker and result-backend URLs (and the
password inside any URL that carries one), every setting and environment variable whose
name looks secret (``…KEY``, ``…TOKEN``, ``…SECRET…``, ``…PASSWORD…``, the endpoints'
``…_API_KEY`` variables), and the job's own callback secret. Exact values only: a trainer's
output is full of paths and sha256 digests that pattern-based redaction
(``apps.llm.redaction``) would blank.
"""

from __future__ import annotations

import os
import re
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from django.conf import settings

REDACTED = "***"
MIN_SECRET_CHARS = 6
# Names whose value is always a secret of the server, whatever it looks like.
SERVER_SECRET_NAMES = (
    "SECRET_KEY",
    "DATABASE_URL",
    "CELERY_BROKER_URL",
    "CELERY_RESULT_BACKEND",
    "BROKER_URL",
    "REDIS_URL",
    "CACHE_URL",
    "EMAIL_HOST_PASSWORD",
)
SECRET_NAME = re.compile(
    r"(?i)(secret|passw|token|credential|private|api[_-]?key|access[_-]?key|_key$|^key$|_dsn$)"
)


def _url_parts(value: str) -> list[str]:
    """The password (and user:password) of a URL that carries one, raw and decoded."""
    if "://" not in value or "@" not in value:
        return []
    try:
        parts = urlsplit(value)
        password = parts.password
    except ValueError:
        return []
    if not password:
        return []
    return [password, unquote(password), quote(unquote(password), safe="")]


def _settings_values() -> list[str]:
    values = []
    for name in dir(settings):
        if not name.isupper():
            continue
        value = getattr(settings, name, None)
        if isinstance(value, str) and (name in SERVER_SECRET_NAMES or SECRET_NAME.search(name)):
            values.append(value)
        elif isinstance(value, str):
            values += _url_parts(value)
    for database in getattr(settings, "DATABASES", {}).values():
        if database.get("PASSWORD"):
            values.append(str(database["PASSWORD"]))
    return values


def _environment_values() -> list[str]:
    values = []
    for name, value in os.environ.items():
        if name in SERVER_SECRET_NAMES or SECRET_NAME.search(name):
            values.append(value)
        values += _url_parts(value)
    return values


def known_secrets(extra: tuple[str, ...] = ()) -> list[str]:
    """Every secret value the process holds (longest first, so that a secret containing
    another is replaced whole); values shorter than MIN_SECRET_CHARS are left out (they
    would blank ordinary words)."""
    found = {
        value
        for value in (*_settings_values(), *_environment_values(), *extra)
        if value and len(value) >= MIN_SECRET_CHARS
    }
    return sorted(found, key=len, reverse=True)


def scrub(text: str, extra: tuple[str, ...] = ()) -> str:
    """``text`` with every known secret (and ``extra``) replaced."""
    if not text:
        return text
    for secret in known_secrets(extra):
        text = text.replace(secret, REDACTED)
    return text


def scrub_json(value: Any, extra: tuple[str, ...] = ()) -> Any:
    """A JSON value with every known secret replaced in its strings (keys included)."""
    secrets = known_secrets(extra)

    def walk(item: Any) -> Any:
        if isinstance(item, str):
            for secret in secrets:
                item = item.replace(secret, REDACTED)
            return item
        if isinstance(item, dict):
            return {walk(str(k)): walk(v) for k, v in item.items()}
        if isinstance(item, list):
            return [walk(v) for v in item]
        return item

    return walk(value)
