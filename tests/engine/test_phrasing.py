"""An exact-match grader where the request allows natural variants (validation/phrasing.py)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from coworkenv_engine.spec import parse_spec
from coworkenv_engine.validation import validate_spec
from coworkenv_engine.validation.phrasing import _free_text, candidates, variant

from .helpers import mini_doc

REJECTS = "exact_match_rejects_variant"


def _retitled(title: str, message: str, op: str = "==") -> dict:
    """mini_doc with the meeting titled ``title`` by the reference, asked for by ``message``."""
    doc = mini_doc()
    task = doc["tasks"][0]
    task["turns"][0]["message"] = message
    task["reference_solution"][0]["calls"][1]["arguments"]["title"] = title
    for grader in task["graders"]:
        checks = grader["check"].get("all", [grader["check"]])
        for check in checks:
            if "title == 'Q3 review'" in check.get("query", ""):
                if op == "==":
                    check["query"] = f"length(calendar.events[?title == '{title}'])"
                else:
                    key = title.split()[0].lower()
                    check["query"] = f"length(calendar.events[?contains(title, '{key}')])"
    return doc


def _rejects(doc: dict) -> list[str]:
    return [p.pointer for p in validate_spec(doc).errors if p.code == REJECTS]


def test_an_exact_title_the_request_does_not_give_rejects_the_variant():
    doc = _retitled("Quarterly planning", "Meet Dana about the quarter, Thu 16:00-17:00; tell her.")
    assert _rejects(doc) == ["/tasks/0/graders/0", "/tasks/0/graders/2", "/tasks/0/graders/3"]


def test_a_case_sensitive_match_on_a_word_of_the_title_rejects_the_variant():
    """``contains(title, 'planning')`` passes "Quarterly planning" and "Quarterly planning
    update" alike, but not "Quarterly Planning": the case is the agent's to choose."""
    doc = _retitled("Quarterly planning", "Meet Dana about the quarter, Thu 16:00-17:00; tell her.")
    for grader in doc["tasks"][0]["graders"]:
        for check in grader["check"].get("all", [grader["check"]]):
            if "title == 'Quarterly planning'" in check.get("query", ""):
                check["query"] = "length(calendar.events[?contains(title, 'planning')])"
    assert "/tasks/0/graders/0" in _rejects(doc)


def test_a_title_the_request_gives_or_a_loose_match_is_fair():
    quoted = _retitled("Quarterly planning", "Book 'Quarterly planning' with Dana, Thu 16:00.")
    loose = _retitled("Quarterly planning", "Meet Dana about it, Thu 16:00-17:00; tell her.", "in")
    assert _rejects(quoted) == [] and _rejects(loose) == []
    assert _rejects(mini_doc()) == []  # 'Q3 review' is the inbox's subject: copied data


def test_only_free_text_a_state_changing_call_writes_is_varied():
    spec = parse_spec(_retitled("Quarterly planning", "Meet Dana about the quarter."))
    found = [(v, parts[-1]) for v, parts in candidates(spec, spec.tasks[0])]
    # the attendees, the dates and Dana's address are not free text; the subject is data
    assert found == [("Quarterly planning", "title"), ("Booked Thursday 16:00-17:00.", "body")]


@settings(max_examples=50)
@given(st.text(min_size=1, max_size=60))
def test_a_variant_is_another_string_with_the_same_words(text):
    out = variant(text)
    assert out.endswith(" update") and out[: -len(" update")].casefold() == text.casefold()
    assert variant("t-27: assignee?") == "t-27: Assignee? update"  # codes kept as written
    assert variant("quarterly planning") == "Quarterly Planning update"
    assert variant("Orientation: Amara Laine") == "Orientation: Amara Laine update"


@given(st.sampled_from(["dana@acme.test", "2026-03-05", "FIN-22", "t-102", "https://x.test/a",
                        "12", "--", "a " * 20]))  # fmt: skip
def test_ids_emails_dates_and_codes_are_not_free_text(value):
    assert not _free_text(value)
