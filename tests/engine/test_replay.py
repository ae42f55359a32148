"""runner.replay_transcript: a recorded transcript replayed in a fresh episode and graded."""

import copy
import json

import pytest

from coworkenv_engine.policies import OraclePolicy
from coworkenv_engine.runner import replay_transcript, run_task
from coworkenv_engine.simulator import Episode
from coworkenv_engine.spec import load_spec

from .helpers import SAMPLES, load_json


def test_replaying_the_oracle_reproduces_its_episode(spec):
    recorded = run_task(spec, "book", OraclePolicy(), faults=False)
    replayed = replay_transcript(spec, "book", recorded.transcript)
    assert replayed.policy == "replay"
    assert replayed.transcript == recorded.transcript
    assert replayed.audit_log == recorded.audit_log
    assert replayed.state_hash == recorded.state_hash
    assert replayed.grading.to_dict() == recorded.grading.to_dict()
    assert replayed.divergent_calls == []
    assert replayed.tools == spec.openai_tools()


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.stem)
def test_recorded_faults_are_replayed_as_faults(path):
    """Samples with faulty tools: every seed's transcript replays to the same audit log
    (faults where they were, fault-free elsewhere), whatever seed the replay is given."""
    spec = load_spec(load_json(path))
    faults_seen = 0
    for task in spec.tasks:
        for seed in range(3):
            recorded = run_task(spec, task.key, OraclePolicy(), seed=seed)
            faults_seen += sum(1 for e in recorded.audit_log if e["fault"])
            replayed = replay_transcript(spec, task.key, recorded.transcript, seed=seed + 7)
            assert replayed.audit_log == recorded.audit_log
            assert replayed.grading.to_dict() == recorded.grading.to_dict()
            assert replayed.divergent_calls == []
    if any(tool.faults.rate > 0 for tool in spec.tools):
        assert faults_seen > 0


def test_dropping_the_state_changing_calls_fails_the_task(spec):
    recorded = run_task(spec, "book", OraclePolicy(), faults=False)
    # Keep the system prompt, the first user message and the first (read-only) call + result.
    kept = recorded.transcript[:4]
    replayed = replay_transcript(spec, "book", kept)
    assert replayed.transcript == kept
    assert [e["tool"] for e in replayed.audit_log] == ["list_events"]
    assert replayed.grading.passed is False
    verdicts = {v.grader_id: v.status for v in replayed.grading.verdicts}
    assert verdicts["booked"] == "failed"
    assert verdicts["told"] == "failed"


def test_edited_text_and_weights_are_kept_and_graded(spec):
    recorded = run_task(spec, "book", OraclePolicy(), faults=False)
    edited = copy.deepcopy(recorded.transcript)
    finals = [m for m in edited if m["role"] == "assistant" and not m.get("tool_calls")]
    finals[-1]["content"] = "Nothing clashes."  # no longer mentions the dentist
    finals[0]["weight"] = 0
    replayed = replay_transcript(spec, "book", edited)
    assert replayed.transcript == edited
    assert replayed.transcript[edited.index(finals[0])]["weight"] == 0
    verdicts = {v.grader_id: v.status for v in replayed.grading.verdicts}
    assert verdicts["clash"] == "failed"
    assert replayed.grading.score < recorded.grading.score


def test_a_call_without_its_result_is_executed_and_answered(spec):
    recorded = run_task(spec, "book", OraclePolicy(), faults=False)
    cut = recorded.transcript[:3]  # ends with the assistant's list_events call
    replayed = replay_transcript(spec, "book", cut)
    assert replayed.transcript[:3] == cut
    assert replayed.transcript[3]["role"] == "tool"
    assert replayed.transcript[3]["tool_call_id"] == "call_1"
    assert replayed.transcript[3] == recorded.transcript[3]


def test_a_changed_environment_shows_as_divergent_calls(doc):
    recorded = run_task(load_spec(doc), "book", OraclePolicy(), faults=False)
    changed = copy.deepcopy(doc)
    changed["services"]["calendar"]["events"][0]["title"] = "Doctor"
    replayed = replay_transcript(load_spec(changed), "book", recorded.transcript)
    # Both list_events results now read differently; the writes return the same records.
    assert replayed.divergent_calls == ["call_1", "call_4"]
    assert replayed.transcript == recorded.transcript


def test_malformed_entries_become_tool_errors_not_exceptions(spec):
    transcript = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        "not a message",
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "nope", "arguments": "{}"}},
                {"id": "b", "type": "function", "function": {"name": "list_events"}},
                {"id": "c", "type": "function", "function": {"arguments": "{bad"}},
                {"id": "d"},
            ],
        },
    ]
    replayed = replay_transcript(spec, "book", transcript)
    codes = [e["error_code"] for e in replayed.audit_log]
    assert codes == ["unknown_tool", None, "bad_arguments", "unknown_tool"]
    assert [m.get("tool_call_id") for m in replayed.transcript if m.get("role") == "tool"] == [
        "a",
        "b",
        "c",
        "d",
    ]
    assert replayed.grading.passed is False


def test_episode_call_refuses_an_unknown_forced_fault(spec):
    episode = Episode(spec, "book", faults=False)
    episode.advance_turn()
    with pytest.raises(ValueError, match="unknown fault kind"):
        episode.call("list_events", {}, fault="meteor")
    result = episode.call("list_events", {}, fault="rate_limit")
    assert (result.ok, result.error_code) == (False, "rate_limit")
    assert episode.audit_log[-1].fault == "rate_limit"
    assert json.loads(result.to_message_content())["error"]["code"] == "rate_limit"
