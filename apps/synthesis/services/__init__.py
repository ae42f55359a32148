"""Writes for synthesis. Import from here: ``from apps.synthesis.services import …``."""

from apps.synthesis.services.demo import synthesis_demo_seed
from apps.synthesis.services.jobs import (
    SYNTHESIS_JOB_KIND,
    synthesis_cancel,
    synthesis_refresh,
    synthesis_resume,
    synthesis_run_inline,
    synthesis_start,
    synthesis_sweep,
)
from apps.synthesis.services.slots import synthesis_slot_run

__all__ = [
    "SYNTHESIS_JOB_KIND",
    "synthesis_cancel",
    "synthesis_demo_seed",
    "synthesis_refresh",
    "synthesis_resume",
    "synthesis_run_inline",
    "synthesis_slot_run",
    "synthesis_start",
    "synthesis_sweep",
]
