"""Synthesis validations run under the VALIDATION_TIME_BUDGET_S setting, not the engine's
default: a budget spent before the first run stops them at the first task."""

import pytest
from django.test import override_settings

from apps.synthesis.generators import generate_environment
from apps.synthesis.models import SlotStatus, SynthesisAttempt
from apps.synthesis.services import staged, synthesis_run_inline

pytestmark = pytest.mark.django_db

OVER = ("validation_time_budget_exceeded", "/tasks/0")


def _codes(report: dict) -> list[tuple[str, str]]:
    return [(p["code"], p["pointer"]) for p in report["problems"]]


@override_settings(VALIDATION_TIME_BUDGET_S=1e-9)  # spent before the first run
def test_a_template_draft_is_validated_under_the_setting(start_template):
    synthesis = start_template(count=1, seed=11, max_repair_rounds=0)
    synthesis_run_inline(synthesis=synthesis)
    slot = synthesis.slots.get()
    assert slot.status == SlotStatus.INVALID
    attempt = SynthesisAttempt.objects.get(slot=slot, round=0)
    assert attempt.valid is False
    assert OVER in _codes(attempt.report)


def test_a_template_draft_passes_under_the_default_setting(start_template):
    synthesis = start_template(count=1, seed=11, max_repair_rounds=0)
    synthesis_run_inline(synthesis=synthesis)
    attempt = SynthesisAttempt.objects.get(slot=synthesis.slots.get(), round=0)
    assert attempt.valid is True
    assert OVER not in _codes(attempt.report)


def _document() -> dict:
    return generate_environment(
        seed=3, capabilities=["clarify-before-acting"], tasks_per_environment=1
    )


@override_settings(VALIDATION_TIME_BUDGET_S=1e-9)
def test_the_staged_final_check_is_validated_under_the_setting():
    answer = staged.final_check(_document())
    assert answer.report["valid"] is False
    assert OVER in _codes(answer.report)


def test_the_staged_final_check_passes_under_the_default_setting():
    answer = staged.final_check(_document())
    assert answer.report["valid"] is True
    assert _codes(answer.report) == []
