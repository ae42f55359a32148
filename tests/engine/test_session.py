"""EpisodeSession: a step-wise episode gives exactly what run_task gives for the same actions."""

from __future__ import annotations

import pytest

from coworkenv_engine import rewards
from coworkenv_engine.adversaries import policy_by_name
from coworkenv_engine.policies import ToolCall
from coworkenv_engine.runner import run_task
from coworkenv_engine.session import EpisodeSession, SessionError
from coworkenv_engine.simulator import Limits
from coworkenv_engine.spec import load_spec

from .drive import play
from .helpers import SAMPLES, load_json

SPECS = {p.stem: load_spec(load_json(p)) for p in SAMPLES}
CASES = [(name, t.key) for name, spec in SPECS.items() for t in spec.tasks]


@pytest.mark.parametrize(("sample", "task_key"), CASES)
@pytest.mark.parametrize("policy_name", ["oracle", "null", "echo", "sprayer"])
def test_session_equals_run_task(sample, task_key, policy_name):
    spec = SPECS[sample]
    for seed in (0, 1):
        session = EpisodeSession(spec, task_key, seed)
        seen = play(
            spec,
            task_key,
            policy_by_name(policy_name),
            session.start(),
            lambda a, s=session: s.act(
                a["reply"], [ToolCall(c["name"], c["arguments"]) for c in a["tool_calls"]]
            ),
        )
        expected = run_task(spec, task_key, policy_by_name(policy_name), seed=seed)
        final = seen[-1]
        assert session.transcript == expected.transcript
        assert [e.to_dict() for e in session.episode.audit_log] == expected.audit_log
        assert session.episode.state_hash() == expected.state_hash
        assert final["grading"] == expected.grading.to_dict()
        assert final["reward"] == expected.grading.score
        assert final["stop_reason"] == expected.stop_reason
        assert all(o["reward"] is None and not o["done"] for o in seen[:-1])
        # turn rewards sent at turn ends = the post-hoc split of the final grading
        sent = [o["turn_reward"] for o in seen[1:] if o["turn_ended"]]
        assert sent == final["turn_rewards"]
        assert sent == rewards.turn_rewards(expected.grading, len(spec.task(task_key).turns))
        if policy_name == "oracle":
            assert final["reward"] == 1.0 and final["grading"]["strict"] is True


def test_reset_observation_carries_prompt_tools_and_first_message():
    spec = SPECS["acme-ops"]
    obs = EpisodeSession(spec, "budget-figure-clarify", 3).start()
    task = spec.task("budget-figure-clarify")
    assert obs["system_prompt"] == task.system_prompt()
    assert obs["tools"] == spec.openai_tools()
    assert obs["user_message"] == task.turns[0].message
    assert [m["role"] for m in obs["messages"]] == ["system", "user"]
    assert obs["episode"] == {
        "environment": spec.name,
        "task_key": "budget-figure-clarify",
        "seed": 3,
        "faults": True,
    }
    assert (obs["turn"], obs["done"], obs["reward"], obs["turn_ended"]) == (0, False, None, False)


def test_a_turn_end_brings_the_next_user_message_and_turn_reward():
    spec = SPECS["acme-ops"]
    session = EpisodeSession(spec, "budget-figure-clarify")
    session.start()
    obs = session.act("Which figure do you mean exactly?")
    assert obs["turn_ended"] and not obs["done"] and obs["turn"] == 1
    assert obs["messages"] == [{"role": "user", "content": obs["user_message"]}]
    assert obs["turn_reward"] == session.turn_rewards[0] > 0


def test_out_of_order_actions_are_refused():
    spec = SPECS["acme-ops"]
    session = EpisodeSession(spec, "book-q3-review")
    with pytest.raises(SessionError, match="call reset first"):
        session.act("hi")
    session.start()
    with pytest.raises(SessionError, match="already started"):
        session.start()
    final = session.act("Done.")
    assert final["done"] and final["stop_reason"] == "completed"
    assert final["reward"] < 0.75
    with pytest.raises(SessionError, match="episode is over"):
        session.act("again")


def test_round_limit_ends_the_episode_like_the_runner():
    spec = SPECS["acme-ops"]
    session = EpisodeSession(spec, "book-q3-review", limits=Limits(max_rounds_per_turn=2))
    session.start()
    first = session.act(None, [ToolCall("no_such_tool", {})])
    assert not first["done"] and first["tool_results"][0]["error_code"] == "unknown_tool"
    final = session.act(None, [ToolCall("no_such_tool", {})])
    assert final["done"] and final["stop_reason"] == "round_limit"
    assert final["turn_rewards"] == [final["reward"]]
