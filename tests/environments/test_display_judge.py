"""A judge check on the environment pages says what its judge is shown, when declared."""

from apps.environments.templatetags.environment_display import check_lines


def test_a_judge_line_says_what_a_declared_context_shows():
    plain = {"kind": "judge", "rubric": "Polite?"}
    assert check_lines(plain) == [{"depth": 0, "text": "judge (final, threshold 0.5): Polite?"}]
    assert check_lines({**plain, "context": {}}) == check_lines(plain)  # the default, unsaid
    declared = {**plain, "context": {"messages": "final", "calls": False, "state": ["crm"]}}
    [line] = check_lines(declared)
    assert line["text"] == (
        "judge (final, threshold 0.5; shown messages: final, no calls, records of crm): Polite?"
    )
