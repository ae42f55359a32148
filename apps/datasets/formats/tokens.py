"""Counting a row's tokens: with a real tokenizer when one is configured, else an estimate.
No Django: the build gives the tokenizer's name and file.

Either way the text counted is the row's canonical JSON (messages and tools, sorted keys,
no spaces): the same text the content hash covers. No chat template is applied, so a
trainer's count differs by the template's few tokens per message.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ESTIMATE = "estimate"


class TokenizerUnavailable(Exception):
    """The configured tokenizer cannot be loaded (message says why)."""


@dataclass(frozen=True)
class TokenCounter:
    """``name`` is ``"estimate"`` or the configured tokenizer's name; ``source`` the file."""

    name: str = ESTIMATE
    source: str = ""
    _tokenizer: Any = None

    @property
    def is_estimate(self) -> bool:
        return self._tokenizer is None

    def count(self, text: str) -> int:
        if self._tokenizer is None:
            return math.ceil(len(text) / 4)
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def describe(self) -> str:
        if self.is_estimate:
            return (
                "estimated: characters of the row's canonical JSON divided by 4, rounded up "
                "(no tokenizer configured)"
            )
        return (
            f"counted with the tokenizer “{self.name}” ({self.source}) over the row's "
            "canonical JSON, no chat template applied"
        )


def tokenizer_file(path: str) -> Path:
    """A tokenizer.json file, or a directory holding one."""
    candidate = Path(path).expanduser()
    if candidate.is_dir():
        candidate = candidate / "tokenizer.json"
    return candidate


def token_counter(name: str = "", path: str = "") -> TokenCounter:
    """The estimate when ``name`` is empty, else the ``tokenizers`` tokenizer at ``path``."""
    if not name:
        return TokenCounter()
    file = tokenizer_file(path)
    if not file.is_file():
        raise TokenizerUnavailable(f"The tokenizer “{name}” has no file at {file}.")
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:  # pragma: no cover - the dependency is declared
        raise TokenizerUnavailable(
            "Counting with a tokenizer needs the `tokenizers` package (pip install tokenizers)."
        ) from exc
    try:
        tokenizer = Tokenizer.from_file(str(file))
    except Exception as exc:  # tokenizers raises its own Exception type for bad files
        raise TokenizerUnavailable(
            f"The tokenizer “{name}” at {file} could not be loaded: {exc}"
        ) from exc
    return TokenCounter(name=name, source=str(file), _tokenizer=tokenizer)
