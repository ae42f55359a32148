"""Strict readers for settings that come from the process environment.

Each reader refuses values it cannot interpret instead of guessing, so a typo in a deployment
fails at start-up with a message naming the variable. ``settings.py`` only calls them: the
parsing of every value lives here.
"""

import ipaddress
import math
import os
import secrets
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

from django.core.exceptions import ImproperlyConfigured

from apps.llm.origins import parse_key_hosts, parse_networks

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def env_str(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be true or false, not {value!r}.")


def env_choice(name: str, default: str, choices: Sequence[str]) -> str:
    """One of ``choices`` (compared as written: ``S3`` is not ``s3``)."""
    value = env_str(name, default)
    if value not in choices:
        *others, last = (repr(choice) for choice in choices)
        allowed = f"{', '.join(others)} or {last}" if others else last
        raise ImproperlyConfigured(f"{name} must be {allowed}, not {value!r}.")
    return value


def _bounded(name: str, number: float, minimum: float | None, positive: bool) -> None:
    """Refuse a number (the default included) below ``minimum``, or not above 0."""
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, not {number!r}.")
    if positive and number <= 0:
        raise ImproperlyConfigured(f"{name} must be positive, not {number!r}.")


def _env_number(name: str, default, parse, what: str):
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return parse(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be {what}, not {value!r}.") from None


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    number = _env_number(name, default, int, "an integer")
    _bounded(name, number, minimum, positive=False)
    return number


def env_float(
    name: str, default: float, *, minimum: float | None = None, positive: bool = False
) -> float:
    """A finite number (``inf`` and ``nan`` are refused: no setting means "forever" that way)."""
    number = _env_number(name, default, float, "a number")
    if not math.isfinite(number):
        raise ImproperlyConfigured(f"{name} must be a finite number, not {os.environ.get(name)!r}.")
    _bounded(name, number, minimum, positive)
    return number


def env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


def env_secret(name: str, default: str | None = None) -> str | None:
    """Read NAME, or the contents of the file named by NAME_FILE (Docker/Kubernetes secrets)."""
    file_path = os.environ.get(f"{name}_FILE")
    if file_path:
        try:
            return Path(file_path).read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE points at an unreadable file: {exc}") from None
    return env_str(name, default)


def env_secret_key(name: str, development_file: Path | None) -> str:
    """NAME (or NAME_FILE); unset, the secret kept in ``development_file`` (generated the first
    time), or a refusal to start where there is none (a server)."""
    secret = env_secret(name)
    if secret:
        return secret
    if development_file is None:
        raise ImproperlyConfigured(f"{name} (or {name}_FILE) is required when DEBUG=false.")
    if not development_file.exists():
        development_file.parent.mkdir(parents=True, exist_ok=True)
        development_file.write_text(secrets.token_urlsafe(50))
    return development_file.read_text().strip()


def env_addresses(name: str) -> list[str]:
    """``10.0.0.0/8,fd00::/8,192.0.2.7`` -> those entries as written, each checked; unset -> []."""
    addresses = env_list(name, [])
    for address in addresses:
        try:
            ipaddress.ip_network(address, strict=False)
        except ValueError:
            raise ImproperlyConfigured(
                f"{name}: {address!r} is not an address or a network (10.0.0.0/8)."
            ) from None
    return addresses


def env_database(name: str, *, sqlite_options: dict, conn_max_age: int) -> dict | None:
    """The Django database that the URL in NAME (or NAME_FILE) names, None when it is unset.

    ``postgres://user:password@host:port/name?sslmode=require``: the query becomes the
    connection's options. ``sqlite:///path/to/file.sqlite3?timeout=30``: ``sqlite_options``,
    with ``?timeout=`` seconds (default 20) of waiting for the write lock.
    """
    url = env_secret(name)
    if not url:
        return None
    parsed = urlparse(url)
    query = {key: values[-1] for key, values in parse_qs(parsed.query).items()}
    if parsed.scheme in ("postgres", "postgresql", "pgsql"):
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": unquote(parsed.path.lstrip("/")),
            "USER": unquote(parsed.username or ""),
            "PASSWORD": unquote(parsed.password or ""),
            "HOST": parsed.hostname or "",
            "PORT": str(parsed.port or ""),
            "CONN_MAX_AGE": conn_max_age,
            "CONN_HEALTH_CHECKS": True,
            "OPTIONS": query,
        }
    if parsed.scheme == "sqlite":
        try:
            timeout = float(query.get("timeout", 20))
        except ValueError:
            raise ImproperlyConfigured(f"{name}'s ?timeout= must be seconds.") from None
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": unquote(parsed.path) or ":memory:",
            # As in the default local mode: processes sharing the file wait for the write lock
            # (``?timeout=`` seconds, then "database is locked", which workers retry).
            "OPTIONS": {**sqlite_options, "timeout": timeout},
        }
    raise ImproperlyConfigured(
        f"{name} must start with postgres:// or sqlite://, not {parsed.scheme!r}://."
    )


def env_key_hosts(name: str, default: str) -> dict[str, list[str]] | None:
    """``OPENAI_API_KEY=https://api.openai.com,VLLM_API_KEY=http://gpu1.lan:8000|http://gpu2.lan:8000``
    -> {name: [origins]}; a bare host (``api.openai.com``) means ``https://api.openai.com:443``.
    ``any`` -> None (no restriction)."""
    value = env_str(name, default)
    if value.strip().lower() == "any":
        return None
    try:
        return parse_key_hosts(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} {exc}") from None


def env_networks(name: str, default: str) -> list[str]:
    """``127.0.0.1/32, 10.0.0.0/8`` -> the CIDR ranges, normalised; ``none`` -> []."""
    try:
        return parse_networks(env_str(name, default))
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} {exc}") from None


def env_tokenizers(name: str) -> dict[str, str]:
    """``qwen=/models/qwen/tokenizer.json,llama=/models/llama`` -> {name: path}; unset -> {}."""
    found: dict[str, str] = {}
    for item in (env_str(name) or "").split(","):
        if not item.strip():
            continue
        tokenizer, sep, path = item.partition("=")
        if not sep or not tokenizer.strip() or not path.strip():
            raise ImproperlyConfigured(
                f"{name} entries look like NAME=/path/to/tokenizer.json, not {item.strip()!r}."
            )
        found[tokenizer.strip()] = path.strip()
    return found
