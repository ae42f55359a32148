"""Offline environment generators (pure Python, no Django).

``generate_environment(seed=..., capabilities=[...])`` builds a complete, valid
``coworkenv.environment/v1`` document from scenario templates; ``FAMILIES`` and
``families_for`` describe the scenario families; ``PATTERNS`` and ``pattern_for`` map
capability slugs to task patterns.
"""

from .families import FAMILIES, Family, families_for
from .patterns import CAPABILITY_PATTERNS, PATTERNS, Pattern, pattern_for
from .template import GENERATOR_VERSION, generate_environment

__all__ = [
    "CAPABILITY_PATTERNS",
    "FAMILIES",
    "GENERATOR_VERSION",
    "PATTERNS",
    "Family",
    "Pattern",
    "families_for",
    "generate_environment",
    "pattern_for",
]
