"""Problems found in a spec, the error that carries them, and the catalogue of codes.

A problem is data, not an exception: the same list drives the UI, the API and the
LLM repair prompt, so every problem names a stable code, a JSON pointer into the spec,
a message saying what is wrong and a hint saying how to fix it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning"]

#: The catalogue: code -> what it means. Codes are stable snake_case strings.
CODES: dict[str, str] = {
    # document shape
    "not_an_object": "The document is not a JSON object.",
    "schema_invalid": "The document does not validate against the JSON Schema.",
    "json_too_deep": "The document nests deeper than the limit.",
    "text_not_storable": "A text holds NUL (U+0000) or a lone UTF-16 surrogate.",
    # identifiers
    "duplicate_id": "Two items that must be unique share an identifier.",
    "tool_name_invalid": "A tool name is not a valid function name ([A-Za-z0-9_-], 1-64).",
    "tool_parameters_invalid": "A tool's `parameters` is not a valid JSON Schema object.",
    "reserved_parameter": "A tool parameter uses a reserved name.",
    # references
    "unknown_service": "A binding, update, record set or check names a service that is absent.",
    "unknown_collection": "A binding, update, record set or check names an absent collection.",
    "undeclared_parameter": "A binding uses a $param the tool's parameters do not declare.",
    "parameter_unused": "A declared tool parameter is not used by the binding.",
    "binding_missing_required_field": "A create binding cannot fill a required record field.",
    "unknown_tool": "A check or reference-solution call names a tool that is not declared.",
    "unknown_argument": "A tool_call argument matcher names a parameter the tool lacks.",
    "turn_out_of_range": "A turn index points past the task's turns.",
    "duplicate_reference_turn": "The reference solution has two steps for the same turn.",
    # records
    "record_missing_field": "A record lacks a field its service kind requires.",
    "dangling_reference": "A record refers to an id that does not exist.",
    "update_target_missing": "An exogenous update or delete targets a record that does not exist.",
    "state_too_large": "The initial state is larger than the simulator allows.",
    # checks
    "jmespath_invalid": "A JMESPath expression does not compile.",
    "query_unknown_field": "A query reads a record field that no record in that collection has.",
    "regex_invalid": "A regular expression does not compile.",
    "regex_unsafe": "A regular expression risks catastrophic backtracking or is too long.",
    "check_invalid": "A check's operator and operands do not fit together.",
    "weight_not_positive": "A grader weight is zero or negative.",
    "no_completion_check": "A task has no deterministic completion grader.",
    "reference_arguments_invalid": "A reference-solution call's arguments fail the tool schema.",
    # dynamic
    "oracle_tool_error": "The reference solution hits a tool error.",
    "oracle_not_strict": "The reference solution fails a grader.",
    "oracle_fails_under_faults": "The reference solution fails when faults are injected.",
    "grader_passes_null_agent": "A do-nothing agent passes the task.",
    "grader_passes_echo_agent": "An agent that only echoes the request passes the task.",
    "grader_satisfied_by_null": "A completion grader is satisfied without the agent acting.",
    "mutant_not_caught": "Dropping a state-changing reference call does not lose score.",
    "judge_not_certified": "A judge grader was skipped (no judge): only partially certified.",
    "nondeterministic": "Two identical oracle replays give different states or scores.",
    "simulation_crashed": "The simulator failed unexpectedly on this task (an engine bug).",
    # reward hacking (issue 18): gameable graders, collateral writes, adversarial agents
    "side_effects_unchecked": "A task has no side_effects grader: collateral writes go unseen.",
    "response_readable_from_state": (
        "A response check that counts toward completion is satisfied by pasting the records "
        "an agent can read (or the conversation)."
    ),
    "state_check_any_element": (
        "A state check over a collection the task writes passes when any element matches, "
        "so sprayed writes satisfy it."
    ),
    "process_check_alone": (
        "A completion grader checks only that tools were called (order, turn or a bare call), "
        "not the outcome."
    ),
    "tool_call_max_partial": (
        "A tool_call check bounds only the calls matching its arguments; other calls are free."
    ),
    "capability_grader_not_decisive": (
        "The grader that tests the task's capability can fail while the task still passes."
    ),
    "capability_grader_unknown": "A grader's capability is not one of the task's capabilities.",
    "capability_grader_missing": "A task with capabilities marks no grader as testing one.",
    "adversary_passes": "An adversarial agent that does not do the task passes it.",
    "later_turns_unweighted": "The reference cut before a later turn (later turns claimed) passes.",
    # ---- bounds and soundness (issue 11): limits, ranges, budgets, semantic faults
    "document_too_large": "The document is over the size or value-count limit.",
    "document_too_deep": "The document nests deeper than the limit.",
    "too_many_items": "More tasks, tools or records than the limit.",
    "string_too_long": "A string is longer than the limit.",
    "string_not_unicode": "A string holds a lone UTF-16 surrogate.",
    "duplicate_key": "A JSON object has the same key twice.",
    "value_out_of_range": "A value would push a computation out of range (dates, weights).",
    "datetime_without_offset": "A date-time has no UTC offset (its moment depends on the TZ).",
    "turn_time_before_clock": "A turn's time is earlier than the clock at that turn.",
    "query_budget_exceeded": "A JMESPath query builds too large a value or takes too many steps.",
    "mutants_sampled": "Only a sample of the mutants was replayed (work budget).",
    "validation_budget_exceeded": "Validating the spec would take more simulated work than "
    "allowed.",
    "validation_time_budget_exceeded": "Validation ran past its wall-clock time budget.",
    "grader_counts_failed_attempts": "A grader bounds attempts at a tool that injects faults.",
    "update_failed_at_run": "An exogenous update fails when the task runs.",
    "update_id_collides": "An exogenous create uses an id of the form the tools generate.",
    "identifier_not_ascii": "A parameter name is not a plain ASCII identifier.",
    "identifier_confusable": "Two tool or parameter names collide after case/look-alike folding.",
    "schema_required_undeclared": "A JSON Schema `required` names an undeclared property.",
    "instruction_like_text": "Data or a tool description carries prompt-injection-like text.",
    "check_type_mismatch": "A check compares values of types that make it always or never hold.",
    "check_vacuous": "A check looks at a turn its grader never sees.",
    "negation_vacuous": "A `not` negates a check that can hold in no reachable state.",
    "binding_unknown_field": "A search binding searches only fields no record has.",
    "clarification_fact_given": "A clarification task's first message already gives the fact.",
    "grader_ignores_reference_call": "The main completion grader still passes when a "
    "reference call writing what it reads is dropped.",
    "update_does_agent_work": "An exogenous update alone satisfies a completion grader.",
    "reference_value_unseen": "The reference solution uses a value the agent cannot see.",
    "binding_optional_required_field": "A create binding fills a required field from an "
    "optional parameter.",
    # ---- attachments (issue 16): images and PDFs stored by content hash
    "attachment_missing": "A record refers to an attachment that /attachments does not list.",
    "attachment_type_unsupported": "An attachment's media type is not a supported image or PDF.",
    "attachment_too_large": "An attachment (or all of them together) is over the size limit.",
    "attachment_unreferenced": "A listed attachment is referred to by no record.",
    "attachment_field_unknown": "A view tool reads a field where no record holds an attachment.",
    "attachment_content_invalid": "An attachment's stored bytes are missing or do not match "
    "its hash, size or media type.",
    # ---- validator (issue 25): the right entity, facts known in time, attachments, judges
    "wrong_entity_passes": "The reference solution done on a sibling record still passes.",
    "side_effects_scope_partial": "A collection the task's tools write is watched by no "
    "side_effects grader.",
    "fact_in_unread_collection": "A fact the task needs lives only in a collection no tool reads.",
    "value_given_later": "The reference uses a date, time or number the agent is given only "
    "at a later turn.",
    "reference_acts_in_past": "A reference call schedules something before the simulated clock.",
    "reference_crosses_midnight": "One turn's reference calls run across midnight (UTC).",
    "attachment_not_viewable": "A record refers to an attachment that no view tool shows.",
    "attachment_wrong_kind": "A view tool shows a field holding a file it cannot show (a PDF).",
    "judge_threshold_vacuous": "A judge threshold any verdict passes.",
    "judge_sole_evidence": "The judge graders alone can carry the task past its threshold.",
    "judge_rubric_parrotable": "A judge rubric the user's own words (echoed back) satisfy.",
    "judge_rubric_unexposed": "A judge rubric names a fact the task never exposes.",
    "judge_rubric_out_of_context": "A judge rubric names a fact the reference carries only "
    "outside what the judge is shown.",
    "safety_pattern_misses_format": "A safety regex misses a value in the data's own format.",
    "update_notice_contradicts": "An update's notice gives a time, date, id or value it does "
    "not write.",
    "exact_match_rejects_variant": "A grader fails the reference phrased another natural way.",
    "reference_breaks_rule": "The reference solution breaks a rule the task states.",
    "call_limit_headroom": "The reference needs as many calls as an episode or a turn allows, "
    "or more.",
}


@dataclass(frozen=True, slots=True)
class Problem:
    code: str
    severity: Severity
    pointer: str
    message: str
    hint: str = ""

    def to_dict(self) -> dict[str, str]:
        return {
            "code": self.code,
            "severity": self.severity,
            "pointer": self.pointer,
            "message": self.message,
            "hint": self.hint,
        }


def error(code: str, pointer: str, message: str, hint: str = "") -> Problem:
    assert code in CODES, code
    return Problem(code, "error", pointer, message, hint)


def warning(code: str, pointer: str, message: str, hint: str = "") -> Problem:
    assert code in CODES, code
    return Problem(code, "warning", pointer, message, hint)


def pointer(*parts: str | int) -> str:
    """Build an RFC 6901 JSON pointer from path parts (escaping ``~`` and ``/``)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def has_errors(problems: Iterable[Problem]) -> bool:
    return any(p.severity == "error" for p in problems)


class SpecError(ValueError):
    """Raised by the loader when a document is not a usable spec."""

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        first = self.problems[0] if self.problems else None
        summary = f"{first.pointer or '/'}: {first.message}" if first else "invalid spec"
        more = f" (+{len(self.problems) - 1} more)" if len(self.problems) > 1 else ""
        super().__init__(summary + more)
