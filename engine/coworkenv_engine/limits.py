"""The bounds an episode runs within (a leaf module: the validator reads them too)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    max_calls: int = 200
    max_state_bytes: int = 5_000_000
    max_record_bytes: int = 50_000
    max_result_chars: int = 20_000
    max_argument_chars: int = 20_000
    max_rounds_per_turn: int = 40
