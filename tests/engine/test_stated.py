"""The reference breaks a rule the task states (validation/stated.py)."""

from hypothesis import given
from hypothesis import strategies as st

from coworkenv_engine.spec import parse_spec
from coworkenv_engine.validation.stated import stated_rule_problems

from .helpers import mini_doc

BREAKS = "reference_breaks_rule"
SEND = "/tasks/0/reference_solution/0/calls/2"


def _broken(doc: dict) -> list[tuple[str, str]]:
    return [(p.code, p.pointer) for p in stated_rule_problems(parse_spec(doc), 0)]


def _emailing(to: str, rule: str) -> dict:
    doc = mini_doc()
    task = doc["tasks"][0]
    task["constraints"] = [rule]
    task["reference_solution"][0]["calls"][2]["arguments"]["to"] = to
    return doc


@given(
    rule=st.sampled_from(
        [
            "Never email anyone outside acme.test.",
            "Do not send mail to external addresses.",
            "You must not email people outside of @acme.test; keep it internal.",
        ]
    ),
    domain=st.sampled_from(["partners.test", "acme.test.evil.test", "gmail.test"]),
)
def test_an_email_outside_the_stated_domain_breaks_the_rule(rule, domain):
    assert _broken(_emailing(f"dana@{domain}", rule)) == [(BREAKS, SEND)]
    assert _broken(_emailing("dana@acme.test", rule)) == []
    assert _broken(_emailing("dana@eu.acme.test", rule)) == []


def test_a_rule_with_an_exception_is_not_read():
    rule = "Never email outside acme.test unless the user asks for it."
    assert _broken(_emailing("dana@partners.test", rule)) == []
    assert _broken(mini_doc()) == []


def _calling(rule: str, *calls: dict) -> dict:
    doc = mini_doc()
    task = doc["tasks"][0]
    task["constraints"] = [rule]
    task["reference_solution"][1]["calls"] += list(calls)
    return doc


def test_a_delete_the_rule_forbids():
    delete = {"tool": "delete_event", "arguments": {"event_id": "e1"}}
    move = {
        "tool": "update_event",
        "arguments": {"event_id": "e1", "start": "2026-03-05T18:00:00Z"},
    }
    at = "/tasks/0/reference_solution/1/calls/1"
    assert _broken(_calling("Do not delete any events.", delete)) == [(BREAKS, at)]
    assert _broken(_calling("Do not delete any events.", move)) == []


def test_more_calls_than_a_stated_limit_breaks_it():
    mail = {
        "tool": "send_email",
        "arguments": {"to": "dana@acme.test", "subject": "x", "body": "y"},
    }
    at = "/tasks/0/reference_solution/1/calls/1"
    assert _broken(_calling("Send at most one email.", mail)) == [(BREAKS, at)]
    assert _broken(_calling("Send no more than 2 emails.", mail)) == []
