"""Strict readers for settings that come from the process environment.

Each helper refuses values it cannot interpret instead of guessing, so a typo in a deployment
fails at start-up with a message naming the variable.
"""

import math
import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

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


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, not {value!r}.") from None


def env_float(name: str, default: float) -> float:
    """A finite number (``inf`` and ``nan`` are refused: no setting means "forever" that way)."""
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        number = float(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, not {value!r}.") from None
    if not math.isfinite(number):
        raise ImproperlyConfigured(f"{name} must be a finite number, not {value!r}.")
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
