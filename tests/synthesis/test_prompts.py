"""The repair prompt carries the validator's problems and says how to fix each class."""

from apps.synthesis.services.prompts import render_repair
from coworkenv_engine.problems import CODES

# the codes of the soundness checks (issue 11): each has fix guidance in the prompt
SOUNDNESS_CODES = [
    "document_too_deep", "document_too_large", "too_many_items", "string_too_long",
    "duplicate_key", "string_not_unicode", "value_out_of_range", "datetime_without_offset",
    "turn_time_before_clock", "query_budget_exceeded", "regex_unsafe",
    "oracle_fails_under_faults", "grader_counts_failed_attempts", "check_type_mismatch",
    "check_vacuous", "grader_passes_null_agent", "grader_passes_echo_agent",
    "grader_ignores_reference_call", "update_does_agent_work", "update_failed_at_run",
    "update_id_collides", "dangling_reference", "binding_optional_required_field",
    "reference_value_unseen", "clarification_fact_given", "identifier_not_ascii",
    "identifier_confusable", "schema_required_undeclared", "binding_unknown_field",
    "instruction_like_text", "validation_budget_exceeded", "attachment_missing",
    "attachment_unreferenced", "attachment_field_unknown", "attachment_type_unsupported",
    "attachment_too_large", "attachment_content_invalid", "validation_time_budget_exceeded",
    "negation_vacuous",
]  # fmt: skip


def test_repair_prompt_names_the_problems_and_guides_every_soundness_code():
    report = {
        "problems": [
            {
                "code": "check_type_mismatch",
                "severity": "error",
                "pointer": "/tasks/0/graders/1/check",
                "message": "The query yields a array.",
                "hint": "Use length(...).",
            }
        ]
    }
    text = render_repair("v1", round=1, max_rounds=3, report=report)
    assert (
        "- [error] `check_type_mismatch` at `/tasks/0/graders/1/check`: The query yields a "
        "array. Hint: Use length(...)." in text
    )
    assert set(SOUNDNESS_CODES) <= set(CODES)
    missing = [code for code in SOUNDNESS_CODES if f"`{code}`" not in text.split("How to fix")[1]]
    assert missing == []


# the codes of the validator's issue-25 checks: each has fix guidance in the prompt
VALIDATOR_CODES = [
    "wrong_entity_passes", "side_effects_scope_partial", "fact_in_unread_collection",
    "value_given_later", "reference_acts_in_past", "reference_crosses_midnight",
    "call_limit_headroom", "attachment_not_viewable", "attachment_wrong_kind",
    "judge_threshold_vacuous", "judge_sole_evidence", "judge_rubric_parrotable",
    "judge_rubric_unexposed", "judge_rubric_out_of_context", "safety_pattern_misses_format",
    "update_notice_contradicts", "exact_match_rejects_variant", "reference_breaks_rule",
]  # fmt: skip


def test_repair_prompt_guides_every_validator_code():
    text = render_repair("v1", round=1, max_rounds=3, report={"problems": []})
    assert set(VALIDATOR_CODES) <= set(CODES)
    guidance = text.split("How to fix")[1]
    assert [code for code in VALIDATOR_CODES if f"`{code}`" not in guidance] == []
