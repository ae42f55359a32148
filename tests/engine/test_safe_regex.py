import pytest

from coworkenv_engine.safe_regex import (
    MAX_SUBJECT_CHARS,
    UnsafeRegex,
    check_pattern,
    compile_safe,
    never_matches,
    safe_search,
)


@pytest.mark.parametrize(
    "pattern",
    [
        "(?i)dentist",
        "\\?",
        "16:00",
        "[a-z]+@acme\\.test",
        "\\d+(,\\d{3})*",
        "(?:ab)*c",
        "(\\w|-)+",
        "a{1,3}b{2}",
        "^(yes|no)$",
    ],
)
def test_safe_patterns_are_allowed(pattern):
    assert check_pattern(pattern) is None


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("(a+)+b", "nested"),
        ("(a*)*", "nested"),
        ("(x+x+)+y", "nested"),
        ("(.*a){20}", "nested"),
        ("(a{1,2})*", "nested"),
        ("(a|ab)*c", "alternation"),
        ("(a)\\1", "back-references"),
        (".*.*.*.*x", "unbounded"),
        ("a" * 301, "longer"),
        ("(", "does not compile"),
    ],
)
def test_dangerous_or_broken_patterns_are_refused(pattern, reason):
    assert reason in check_pattern(pattern)
    with pytest.raises(UnsafeRegex):
        compile_safe(pattern)


def test_subject_is_clipped():
    text = "a" * MAX_SUBJECT_CHARS + "NEEDLE"
    assert safe_search("NEEDLE", text) is None
    assert safe_search("NEEDLE", "x NEEDLE") is not None


@pytest.mark.parametrize(
    "pattern, never",
    [
        (r"\Zabc", True), (r"a^b", True), (r"[^\s\S]", True), (r"x$y", True),
        (r"(a\Zb|c\Zd)", True), (r"(?:a\Zb)+", True), (r"a\Ab", True),
        (r"abc\Z", False), (r"(?m)a^b", False), ("x$\n", False), (r"(?i)dentist", False),
        (r"(a\Zb|cd)", False), (r"(?s)x$.", False), (r"x$\s", False), (r"(?:a\Zb)*", False),
        (r"^foo$", False), ("(unclosed", False), (r"(?i)password$ reset", True),
    ],
)  # fmt: skip
def test_never_matches_decides_the_plain_cases(pattern, never):
    assert never_matches(pattern) is never
