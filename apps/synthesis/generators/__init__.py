"""Offline environment generators (pure Python, no Django).

``generate_environment(seed=..., capabilities=[...])`` builds a complete, valid
``coworkenv.environment/v1`` document from scenario templates; ``FAMILIES`` and
``families_for`` describe the scenario families; ``PATTERNS`` and ``pattern_for`` map
capability slugs to task patterns. ``TEMPLATE_FAMILY_CHOICES`` lists every family a
synthesis job may ask the template generator for: the standard-service ones and
``receipts`` (``generators/receipts.py``, multimodal: its documents come with image files).
"""

from .families import FAMILIES, Family, families_for
from .patterns import CAPABILITY_PATTERNS, PATTERNS, Pattern, pattern_for
from .receipts import FAMILY_KEY as RECEIPTS_FAMILY
from .receipts import VENDORS as RECEIPT_VENDORS
from .template import GENERATOR_VERSION, generate_environment

# (key, label) of the families a job may choose; "" (the default) lets the seed choose one
# of the standard-service families that cover the requested services.
TEMPLATE_FAMILY_CHOICES: list[tuple[str, str]] = [
    *((family.key, family.title) for family in FAMILIES.values()),
    (RECEIPTS_FAMILY, "Expense receipts (images to read)"),
]
MAX_RECEIPT_TASKS = len(RECEIPT_VENDORS)

__all__ = [
    "CAPABILITY_PATTERNS",
    "FAMILIES",
    "GENERATOR_VERSION",
    "MAX_RECEIPT_TASKS",
    "PATTERNS",
    "RECEIPTS_FAMILY",
    "TEMPLATE_FAMILY_CHOICES",
    "Family",
    "Pattern",
    "families_for",
    "generate_environment",
    "pattern_for",
]
