"""Files every export ships: the engine (as ``coworkenv_engine``) and the shipped runtime."""

from __future__ import annotations

import re
from pathlib import Path

import coworkenv_engine

INTEROP = Path(__file__).resolve().parent
ENGINE = Path(coworkenv_engine.__file__).resolve().parent
SHIPPED = INTEROP / "shipped"
_SAFE = re.compile(r"[^A-Za-z0-9_]+")


def engine_files(prefix: str) -> dict[str, bytes]:
    """The engine package's source and schema, under ``<prefix>/coworkenv_engine/``."""
    out = {}
    for path in sorted(ENGINE.rglob("*")):
        if path.is_file() and path.suffix in (".py", ".json") and "__pycache__" not in path.parts:
            out[f"{prefix}/coworkenv_engine/{path.relative_to(ENGINE).as_posix()}"] = (
                path.read_bytes()
            )
    return out


def shipped(name: str) -> bytes:
    return (SHIPPED / name).read_bytes()


def identifier(text: str, fallback: str = "task") -> str:
    """A name made of letters, digits and underscores (Python and path safe)."""
    cleaned = _SAFE.sub("_", text).strip("_")
    return cleaned or fallback


def python_literal(value) -> str:
    """JSON data as a Python literal (``true`` → ``True``…), stable and readable."""
    import pprint

    return pprint.pformat(value, indent=1, width=96, sort_dicts=False)


def in_docstring(text: str) -> str:
    """Text safe inside a generated triple-quoted docstring."""
    text = text.replace("\\", "\\\\").replace('"""', "'''")
    return text[:-1] + '\\"' if text.endswith('"') else text


def in_comment(text: str) -> str:
    """Text safe on one generated comment line."""
    return " ".join(text.split())
