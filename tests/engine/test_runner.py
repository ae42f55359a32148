import json

import pytest

from coworkenv_engine.adversaries import policy_by_name
from coworkenv_engine.policies import (
    EchoPolicy,
    MutantPolicy,
    NullPolicy,
    OraclePolicy,
    Policy,
    PolicyAction,
    ToolCall,
    state_changing_calls,
)
from coworkenv_engine.runner import run_task
from coworkenv_engine.simulator import Limits


def test_oracle_transcript_is_openai_chat_format(spec):
    result = run_task(spec, "book", OraclePolicy(), faults=False)
    t = result.transcript
    assert t[0]["role"] == "system" and "Constraints:" in t[0]["content"]
    assert t[1] == {"role": "user", "content": spec.task("book").turns[0].message}
    call_msg = t[2]
    assert call_msg["role"] == "assistant" and call_msg["content"] is None
    (tc,) = call_msg["tool_calls"]
    assert tc == {
        "id": "call_1",
        "type": "function",
        "function": {"name": "list_events", "arguments": "{}"},
    }
    assert t[3]["role"] == "tool" and t[3]["tool_call_id"] == "call_1"
    assert json.loads(t[3]["content"])["total"] == 1
    roles = [m["role"] for m in t]
    assert roles == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert t[-1] == {
        "role": "assistant",
        "content": "Yes, the dentist moved to 16:30 and overlaps.",
    }
    for m in t:
        for call in m.get("tool_calls", []):
            assert isinstance(call["function"]["arguments"], str)
    assert result.grading.strict and result.grading.score == 1.0
    assert result.stop_reason == "completed"
    assert [e["tool"] for e in result.audit_log] == [
        "list_events",
        "create_event",
        "send_email",
        "list_events",
    ]
    assert result.audit_log[1]["diff"][0]["op"] == "create"
    assert result.final_state["email"]["sent"][0]["to"] == "dana@acme.test"
    json.dumps(result.to_dict())


def test_tools_are_in_openai_function_format(spec):
    result = run_task(spec, "book", NullPolicy())
    assert result.tools == spec.openai_tools()


def test_null_and_echo_fail(spec):
    null = run_task(spec, "book", NullPolicy())
    assert [m["content"] for m in null.transcript if m["role"] == "assistant"] == ["Done."] * 2
    assert not null.grading.passed and null.audit_log == []
    echo = run_task(spec, "book", EchoPolicy())
    replies = [m["content"] for m in echo.transcript if m["role"] == "assistant"]
    assert replies == [turn.message for turn in spec.task("book").turns]
    assert not echo.grading.passed


def test_mutants_drop_one_state_changing_call_each(spec):
    task = spec.task("book")
    targets = state_changing_calls(spec, task)
    assert [(s, c, call.tool) for s, c, call in targets] == [
        (0, 1, "create_event"),
        (0, 2, "send_email"),
    ]
    first = run_task(spec, "book", MutantPolicy(0), faults=False)
    assert [e["tool"] for e in first.audit_log] == ["list_events", "send_email", "list_events"]
    assert first.grading.verdict("booked").status == "failed"
    second = run_task(spec, "book", MutantPolicy(1), faults=False)
    assert [e["tool"] for e in second.audit_log] == ["list_events", "create_event", "list_events"]
    assert second.grading.verdict("told").status == "failed"
    with pytest.raises(IndexError):
        run_task(spec, "book", MutantPolicy(2))


def test_oracle_retries_transient_faults(doc):
    for tool in doc["tools"]:
        tool["faults"] = {"rate": 0.3, "kinds": ["rate_limit", "server_error", "timeout"]}
    faulted = [run_task(doc, "book", OraclePolicy(), seed=s) for s in range(6)]
    assert any(r.grading.tool_errors for r in faulted)
    for r in faulted:
        assert r.grading.strict
        assert [e["tool"] for e in r.audit_log if e["ok"]] == [
            "list_events",
            "create_event",
            "send_email",
            "list_events",
        ]
        assert r.grading.robustness == 1.0


class ScriptedAgent:
    """An LLM-like policy: several rounds, parallel calls, JSON-string arguments."""

    name = "scripted"

    def __init__(self):
        self.views = []

    def act(self, view):
        self.views.append(view)
        if view.turn == 0 and view.round == 0:
            return PolicyAction(
                reply="Let me look.",
                tool_calls=[
                    ToolCall("list_events", "{}", id="a1"),
                    ToolCall("search_email", '{"query": "Q3"}', id="a2"),
                ],
            )
        if view.turn == 0 and view.round == 1:
            return PolicyAction(tool_calls=[ToolCall("create_event", "{broken json", id="a3")])
        if view.turn == 0 and view.round == 2:
            return PolicyAction(
                tool_calls=[
                    ToolCall(
                        "create_event",
                        {
                            "title": "Q3 review",
                            "start": "2026-03-05T16:00:00Z",
                            "end": "2026-03-05T17:00:00Z",
                            "attendees": ["dana@acme.test"],
                        },
                    )
                ]
            )
        return PolicyAction(reply="All set, the dentist is fine.")


def test_runner_drives_a_multi_round_policy(spec):
    agent = ScriptedAgent()
    assert isinstance(agent, Policy)
    result = run_task(spec, "book", agent, faults=False)
    t = result.transcript
    assert t[2]["content"] == "Let me look." and [c["id"] for c in t[2]["tool_calls"]] == [
        "a1",
        "a2",
    ]
    assert [t[3]["tool_call_id"], t[4]["tool_call_id"]] == ["a1", "a2"]
    assert t[5]["tool_calls"][0]["function"]["arguments"] == "{broken json"
    assert json.loads(t[6]["content"])["error"]["code"] == "bad_arguments"
    assert t[7]["tool_calls"][0]["id"] == "call_4"
    view = agent.views[2]
    assert [r.ok for _, r in view.turn_results] == [True, True, False]
    assert view.messages[-1]["role"] == "tool" and view.tools == spec.openai_tools()
    assert result.grading.verdict("booked").passed
    assert result.grading.robustness == 1.0  # the create_event error was recovered
    assert [v.status for v in result.grading.verdicts if v.grader_id == "re-read"] == ["failed"]


class Looper:
    name = "looper"

    def act(self, view):
        return PolicyAction(tool_calls=[ToolCall("list_events", {})])


def test_round_limit_stops_a_looping_policy(spec):
    result = run_task(spec, "book", Looper(), limits=Limits(max_rounds_per_turn=5))
    assert result.stop_reason == "round_limit"
    assert len(result.audit_log) == 5
    assert [m["role"] for m in result.transcript].count("user") == 1


def test_call_limit_stops_the_episode(spec):
    result = run_task(spec, "book", Looper(), limits=Limits(max_calls=3))
    assert result.stop_reason == "call_limit"
    assert [e["error_code"] for e in result.audit_log] == [None, None, None, "call_limit"]


def test_policy_must_return_a_policy_action(spec):
    class Bad:
        name = "bad"

        def act(self, view):
            return "hello"

    with pytest.raises(TypeError):
        run_task(spec, "book", Bad())


def test_replays_are_identical(spec):
    a = run_task(spec, "book", OraclePolicy(), seed=3)
    b = run_task(spec, "book", OraclePolicy(), seed=3)
    assert a.to_dict() == b.to_dict()


def test_policy_by_name():
    assert isinstance(policy_by_name("oracle"), OraclePolicy)
    assert policy_by_name("null").name == "null" and policy_by_name("echo").name == "echo"
    assert policy_by_name("mutant:2").index == 2
    with pytest.raises(ValueError):
        policy_by_name("gpt")


def test_user_simulator_writes_the_turns_after_the_first(spec):
    from coworkenv_engine.runner import UserTurnView

    seen: list[UserTurnView] = []

    def simulated_user(view: UserTurnView) -> str:
        seen.append(view)
        return f"(simulated) {view.scripted}"

    result = run_task(spec, "book", OraclePolicy(), faults=False, user_turn=simulated_user)
    users = [m["content"] for m in result.transcript if m["role"] == "user"]
    assert users == [
        spec.task("book").turns[0].message,
        "(simulated) Anything clashing now?",
    ]
    (view,) = seen
    assert (view.turn, view.scripted, view.notices) == (1, "Anything clashing now?", ())
    assert view.last_assistant_message == "Booked for 16:00 and told Dana."
    assert view.messages == result.transcript[: len(view.messages)]
    assert view.task.key == "book"
    assert result.grading.strict is True


def test_user_simulator_must_return_text(spec):
    with pytest.raises(TypeError, match="user simulator returned NoneType"):
        run_task(spec, "book", OraclePolicy(), faults=False, user_turn=lambda view: None)
